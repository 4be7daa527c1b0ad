"""Recording results: scores into the gradebook (one transaction for several), then the result files.

What is recorded is each submission's :class:`grader.verdict.outcome.Report`, decided in the
coordinator (:mod:`grader.verdict.outcome`), so that no worker and no learner process decides a point.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from grader import jsonio
from grader.engines.execution import NOT_GRADING, ExecOptions
from grader.exceptions import OptionError
from grader.intake.submissions import Submission
from grader.intake.workspace import Workspace, describe_change
from grader.record import scores
from grader.record.fingerprints import chapter_options, chapter_part, remembered_options, result_key
from grader.record.scores import Scores
from grader.verdict.judge import TestResult
from grader.verdict.outcome import Report, error_name, see_log, test_points

log = logging.getLogger(__name__)

INTAKE = "intake.json"
GRADED = "graded"


def write_intake(ws: Workspace, skipped: list[Submission]) -> None:
    """Add the folders and files a batch did not read as submissions (skipped, superseded), with why,
    to the workspace's list: ``course export`` writes each as a row of results.csv."""
    rows = read_intake(ws.root)  # the batches of a workspace (a Canvas zip, then a Moodle one) add up
    for s in skipped:
        row = {"student": s.student, "chapter": s.chapter, "status": s.status, "reason": (s.problem or "")[:300],
               "name": s.name, "late": s.late}
        if row not in rows:
            rows.append(row)
    _write_json(ws.root / INTAKE, rows)


def read_intake(workdir: Path) -> list[dict]:
    """What :func:`write_intake` wrote ([] when nothing, or unreadable)."""
    try:
        rows = json.loads((Path(workdir) / INTAKE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(jsonio.dumps(data, indent=True) + b"\n")
    os.replace(tmp, path)  # atomic: a killed run never leaves half a result


class Recorder:
    """Records reports a few at a time: their scores in one gradebook transaction, then their result files.

    A report waits here until ``batch`` of them are waiting, or the oldest has waited ``wait``
    seconds when another arrives; when nothing else is ready (:meth:`idle`), until ``idle_batch``
    are waiting or the oldest has waited ``wait``; or until :meth:`flush` (the batch's end). The
    order -- the transaction committed, then each result file written -- is what makes a killed
    batch resume to the same grades: a result file exists only for scores the gradebook holds, and
    a submission without one is graded again.
    """

    def __init__(self, ws: Workspace, db_url: str, on_recorded: Callable[[Report], None] | None = None,
                 *, batch: int = 64, wait: float = 0.5, idle_batch: int = 1) -> None:
        self.ws, self.db_url, self.on_recorded = ws, db_url, on_recorded
        self.batch, self.wait, self.idle_batch = batch, wait, idle_batch
        self._pending: list[tuple[Report, Path, bool]] = []
        self._since = 0.0

    def add(self, report: Report, source: Path, fp: str = "", *, announce: bool = True) -> None:
        """Record ``report`` (a submission of ``source``'s chapter) soon; ``announce``: pass it to
        ``on_recorded`` once recorded."""
        report.fingerprint = fp
        if report.status != GRADED and self._keeps_grade(report):
            if announce and self.on_recorded:
                self.on_recorded(report)
            return
        if not self._pending:
            self._since = time.monotonic()
        self._pending.append((report, source, announce))
        if len(self._pending) >= self.batch or time.monotonic() - self._since >= self.wait:
            self.flush()

    def _keeps_grade(self, report: Report) -> bool:
        """Whether ``report`` (a status, not a grade) meets a grade recorded earlier, which it then
        leaves as it is: nothing but a grade replaces a grade. The report says so."""
        path = self.ws.result_path(report.student, report.chapter)
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if not isinstance(before, dict) or before.get("status") != GRADED:
            return False
        report.score, report.max_score = float(before.get("score") or 0), float(before.get("max_score") or 0)
        report.message = "; ".join(filter(None, [report.message, "the grade recorded earlier is kept"]))
        log.warning("%s/%s: %s; the grade recorded earlier is kept", report.student, report.chapter, report.status)
        return True

    def idle(self) -> None:
        """Nothing else is ready: record the waiting reports once ``idle_batch`` of them wait or the
        oldest has waited ``wait`` seconds (results that come one at a time, as the fork path's do, are
        not one transaction each)."""
        if self._pending and (len(self._pending) >= self.idle_batch or time.monotonic() - self._since >= self.wait):
            self.flush()

    def flush(self) -> None:
        """Record every waiting report now."""
        if not self._pending:
            return
        pending, items = self._pending, []
        for report, source, _ in pending:
            points = test_points(source)
            got = {t["grade_id"]: float(t["points"]) for t in report.tests if t["grade_id"] in points}
            items.append(Scores(report.chapter, source.stem, report.student, {g: got.get(g, 0.0) for g in points},
                                name=report.name))
        scores.save(self.db_url, items)
        self._pending = []
        students: dict[str, list[str]] = {}
        for item in items:
            students.setdefault(item.chapter, []).append(item.student)
        recorded = {chapter: scores.totals(self.db_url, chapter, names) for chapter, names in students.items()}
        for (report, source, announce), item in zip(pending, items, strict=True):
            total = recorded[report.chapter].get(report.student)
            report.score, report.max_score = total if total else (sum(item.scores.values()),
                                                                  sum(test_points(source).values()))
            _write_report(self.ws.result_path(report.student, report.chapter), report, source, see_log(self.ws))
            if announce and self.on_recorded:
                self.on_recorded(report)


def _write_report(path: Path, report: Report, source: Path, see: str) -> None:
    """Write ``report``'s result file; one that cannot be written as JSON is written as an error
    (graded again next run; ``see``: where its message sends the instructor)."""
    try:
        data = asdict(report)
        jsonio.dumps(data)
    except Exception as exc:  # noqa: BLE001 -- one submission never stops the batch
        log.exception("the result of %s/%s cannot be written", report.student, report.chapter)
        report.status = "error"
        report.message = f"the grader could not record this result ({error_name(exc)}; {see})"
        report.tests = [TestResult(g, 0.0, m, "not run", "not recorded").to_dict()
                        for g, m in test_points(source).items()]
        data = asdict(report)
    _write_json(path, data)


def cached(ws: Workspace, sub: Submission, fp: str, totals: dict[str, tuple[float, float]]) -> Report | None:
    """The report recorded for ``sub`` by an earlier run with the same fingerprint (``totals``:
    the chapter's scores in the gradebook, student -> (score, max_score)); None when there is none."""
    path = ws.result_path(sub.student, sub.chapter)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if data.get("fingerprint") != fp or data.get("status") == "error":
        return None
    total = totals.get(sub.student)
    if total is None:
        return None
    report = Report(**{k: v for k, v in data.items() if k in Report.__dataclass_fields__})
    report.score, report.max_score = total
    report.cached = True
    return report


def recorded_fingerprint(ws: Workspace, sub: Submission) -> str | None:
    """The fingerprint of the result recorded for ``sub``; None when there is none, or when it
    failed to grade (such a result is always graded again)."""
    try:
        data = json.loads(ws.result_path(sub.student, sub.chapter).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return None if data.get("status") == "error" else data.get("fingerprint")


def already_graded(ws: Workspace, db_url: str, found: list[Submission], sources: dict[str, Path],
                    base: ExecOptions, force: bool) -> tuple[list[Report], list[tuple[Submission, dict, bytes, str]]]:
    """(the recorded reports kept, the submissions to grade now, each with its options, bytes and
    fingerprint): a result recorded for the same file, chapter source and options is kept unless ``force``.

    Raises:
        OptionError: results recorded with other options would be replaced (without ``force``).
    """
    reports: list[Report] = []
    candidates: list[tuple[Submission, dict, bytes, str]] = []
    recorded = {c: scores.totals(db_url, c) for c in {s.chapter for s in found if s.path is not None}}
    before = remembered_options(ws, base)
    changed = 0  # recorded results these options would re-grade (same file, same chapter source)
    chapters: dict[str, tuple[ExecOptions, tuple[bytes, ...]]] = {}  # worked out once per chapter:
    before_parts: dict[str, tuple[bytes, ...]] = {}  # its options, what its keys take from it
    for sub in found:
        if sub.path is None:
            continue
        source = sources[sub.chapter]
        if sub.chapter not in chapters:
            chapters[sub.chapter] = (chapter_options(base, source.parent), chapter_part(source, base))
        options, part = chapters[sub.chapter]
        raw = sub.path.read_bytes()
        fp = result_key(raw, source, base, part)
        kept = cached(ws, sub, fp, recorded[sub.chapter])
        if kept is not None and not force:
            reports.append(kept)
            continue
        if before is not None and not force:
            if sub.chapter not in before_parts:
                before_parts[sub.chapter] = chapter_part(source, before)
            changed += recorded_fingerprint(ws, sub) == result_key(raw, source, before, before_parts[sub.chapter])
        candidates.append((sub, asdict(options), raw, fp))
    if changed:
        shown = {k: v for k, v in asdict(base).items() if k not in NOT_GRADING}
        was = {k: v for k, v in asdict(before).items() if k not in NOT_GRADING}
        raise OptionError(f"{changed} recorded result(s) were graded with other options ({describe_change(was, shown)}); "
                          "grading them with these would replace their grades",
                          hint="add --force to re-grade them, or leave the changed option(s) out to grade as before")
    return reports, candidates
