"""Recording results: scores into the gradebook (one transaction for several), then the result files.

The coordinator scores each executed submission here (:func:`grader.verdict.judge.score`), so
that no worker and no learner process decides a point, and writes what it decided.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from grader import cells, jsonio
from grader.engines.execution import Execution
from grader.intake.submissions import Submission
from grader.intake.workspace import LOG, Workspace
from grader.record import scores
from grader.record.scores import Scores
from grader.verdict.judge import NO_REFERENCE, PASSED, TestResult, score

log = logging.getLogger(__name__)

#: Packages whose exceptions a reason may name by type (a learner's own class is never named).
LIBRARIES = frozenset({"builtins", "binascii", "json", "zlib", "sqlite3", "numpy", "torch", "nbformat", "jsonschema",
                       "sqlalchemy", "nbgrader", "nbclient", "jupyter_client", "zmq", "orjson", "grader"})


@dataclass
class Report:
    """One status line of the batch: a student's chapter, or why it was not graded."""

    student: str
    chapter: str
    status: str  # graded | unreadable | missing | error
    score: float = 0.0
    max_score: float = 0.0
    message: str = ""
    tests: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: str = ""
    cached: bool = False
    name: str | None = None  # the student's folder name when ``student`` was derived from it
    late: bool = False  # the LMS marked the submission late


INTAKE = "intake.json"


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


def error_name(exc: BaseException) -> str:
    """``exc``'s type name where a builtin or a library defines it, else "an unexpected error"."""
    kind = type(exc)
    if str(getattr(kind, "__module__", "")).split(".")[0] in LIBRARIES:
        return kind.__name__
    return "an unexpected error"


def failed(sub: Submission, source: Path, message: str, reason: str = "grading failed") -> Report:
    """The "error" report of a submission the grader could not score: every test not run, for ``reason``."""
    report = Report(sub.student, sub.chapter, "error", message=message, name=sub.name, late=sub.late)
    report.tests = [TestResult(g, 0.0, m, "not run", reason).to_dict() for g, m in _test_points(source).items()]
    return report


def scored(ws: Workspace, sub: Submission, outcome, source: Path, judged: tuple) -> Report:
    """Score an executed submission here, in the coordinator (recorded by a :class:`Recorder`).

    Whatever the submission made the grader meet on the way (an observation nothing decodes, an
    output of the wrong type), it costs this submission an "error" report, never the batch: the
    report says so in the grader's words, and the log has the traceback.
    """
    if isinstance(outcome, Exception):
        log.error("executing %s failed: %s: %s", sub.key, type(outcome).__name__, outcome)
        return failed(sub, source, f"grading failed ({error_name(outcome)}; {_see(ws)})")
    try:
        return _scored(ws, sub, outcome, source, judged)
    except Exception as exc:  # noqa: BLE001 -- one submission never stops the batch
        log.exception("scoring %s failed", sub.key)
        return failed(sub, source, f"the grader could not score this submission ({error_name(exc)}; {_see(ws)})",
                      "not scored: the grader failed on this submission")


def _see(ws: Workspace) -> str:
    """Where a message sends the instructor for the cause: the batch's log (:data:`grader.intake.workspace.LOG`)."""
    return f"the cause is in {ws.root / LOG}"


def _scored(ws: Workspace, sub: Submission, outcome, source: Path, judged: tuple) -> Report:
    nb, info = outcome
    out = ws.autograded / sub.student / sub.chapter / source.name
    out.parent.mkdir(parents=True, exist_ok=True)
    # a valid notebook file, written without nbformat's copy and validation, and without
    # indentation (see grader.jsonio: a tenth of json.dumps's time on a chapter's outputs)
    out.write_bytes(jsonio.dumps(nb, sort_keys=True) + b"\n")
    execution = Execution(
        nb=nb,
        timed_out=list(info.get("timed_out", [])),
        died=list(info.get("died", [])),
        not_run_from=info.get("not_run_from"),
        tampered={int(k): v for k, v in info.get("tampered", {}).items()},
        error=info.get("error"),
        restarts=info.get("restarts", 0),
        cell_timeout=info.get("cell_timeout"),
    )
    refs, chapter_tests, findings = judged
    broken = syntax_errors(execution.nb)
    notes = [sub.note or ""] + ([f"syntax error in cell {', '.join(map(str, broken))}"] if broken else [])
    report = Report(sub.student, sub.chapter, "graded", message="; ".join(n for n in notes if n), name=sub.name,
                    late=sub.late)
    report.tests = [t.to_dict() for t in score(execution, refs, chapter_tests, findings)]
    unjudged = [t["grade_id"] for t in report.tests if t["status"] == NO_REFERENCE]
    if info.get("error"):
        report.status, report.message = "error", f"the kernel could not run the notebook: {info['error']}"
    elif unjudged:  # the grader's failure, not the learner's: not a grade, and graded again next run
        report.status = "error"
        report.message = "; ".join(filter(None, [report.message, (
            f"not graded in full: the chapter's solution did not pass {', '.join(unjudged)} when run here "
            f"({_see(ws)}); grade again once it does")]))
    return report


def syntax_errors(nb: nbformat.NotebookNode) -> list[int]:
    """Numbers (1-based, as the learner's notebook counts them) of the cells that did not parse."""
    found, number = [], 0
    for cell in nb.cells:
        if cells.has_tag(cell, "injected-parameters"):
            continue
        number += 1
        if cell.get("cell_type") == "code" and not cells.is_test(cell) and any(
            o.get("output_type") == "error" and o.get("ename") in ("SyntaxError", "IndentationError", "TabError")
            for o in cell.get("outputs", [])
        ):
            found.append(number)
    return found


_points: dict[tuple[str, int, int], dict[str, float]] = {}


def _test_points(source: Path) -> dict[str, float]:
    """The points of each test cell of a chapter's source (read once per version of the file)."""
    st = source.stat()
    key = (str(source), st.st_mtime_ns, st.st_size)
    if key not in _points:
        nb = nbformat.read(str(source), as_version=4)
        _points[key] = {cells.grade_id(c): cells.points(c) for c in nb.cells if cells.is_test(c)}
    return dict(_points[key])


class Recorder:
    """Records reports a few at a time: their scores in one gradebook transaction, then their result files.

    A report waits here until ``batch`` of them are waiting, or the oldest has waited ``wait``
    seconds when another arrives, or :meth:`flush` is called (the batch's end, or when nothing
    else is ready). The order -- the transaction committed, then each result file written -- is
    what makes a killed batch resume to the same grades: a result file exists only for scores
    the gradebook holds, and a submission without one is graded again.
    """

    def __init__(self, ws: Workspace, db_url: str, on_recorded: Callable[[Report], None] | None = None,
                 *, batch: int = 64, wait: float = 0.5) -> None:
        self.ws, self.db_url, self.on_recorded = ws, db_url, on_recorded
        self.batch, self.wait = batch, wait
        self._pending: list[tuple[Report, Path, bool]] = []
        self._since = 0.0

    def add(self, report: Report, source: Path, fp: str = "", *, announce: bool = True) -> None:
        """Record ``report`` (a submission of ``source``'s chapter) soon; ``announce``: pass it to
        ``on_recorded`` once recorded."""
        report.fingerprint = fp
        if not self._pending:
            self._since = time.monotonic()
        self._pending.append((report, source, announce))
        if len(self._pending) >= self.batch or time.monotonic() - self._since >= self.wait:
            self.flush()

    def flush(self) -> None:
        """Record every waiting report now."""
        if not self._pending:
            return
        pending, items = self._pending, []
        for report, source, _ in pending:
            points = _test_points(source)
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
                                                                  sum(_test_points(source).values()))
            _write_report(self.ws.result_path(report.student, report.chapter), report, source, _see(self.ws))
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
                        for g, m in _test_points(source).items()]
        data = asdict(report)
    _write_json(path, data)


def unreadable(sub: Submission, status: str, reason: str, sources: dict[str, Path]) -> Report:
    """The report of a submission that was not executed: every test of its chapter says why."""
    report = Report(sub.student, sub.chapter, status, message=reason, name=sub.name)
    if sub.chapter in sources:
        report.tests = [
            TestResult(g, 0.0, m, "not run", reason).to_dict() for g, m in _test_points(sources[sub.chapter]).items()
        ]
    return report


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


def passed_tests(report: Report) -> list[str]:
    """grade_ids of the tests a report passed."""
    return [t["grade_id"] for t in report.tests if t["status"] == PASSED]
