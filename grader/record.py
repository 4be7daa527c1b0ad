"""Recording a result: scores into the gradebook (one transaction), then the result file.

The coordinator scores each executed submission here (:func:`grader.verdict.score`), so
that no worker and no learner process decides a point, and writes what it decided.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from grader import cells
from grader import gradebook as gbmod
from grader.engines.execution import Execution
from grader.intake import Submission
from grader.verdict import PASSED, TestResult, score
from grader.workspace import Workspace


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


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # atomic: a killed run never leaves half a result


def record(ws: Workspace, sub: Submission, fp: str, outcome, db_url: str, source: Path, judged: tuple) -> Report:
    """Score an executed submission here, in the coordinator, and record it."""
    if isinstance(outcome, Exception):
        report = Report(sub.student, sub.chapter, "error", message=f"grading failed: {type(outcome).__name__}: {outcome}",
                        name=sub.name)
        tests = [TestResult(g, 0.0, m, "not run", "grading failed") for g, m in _test_points(source).items()]
        report.tests = [t.to_dict() for t in tests]
    else:
        nb, info = outcome
        out = ws.autograded / sub.student / sub.chapter / source.name
        out.parent.mkdir(parents=True, exist_ok=True)
        # a valid notebook file, written without nbformat's copy and validation, and without
        # indentation: json's C encoder only serves ``indent=None`` (5x faster on a chapter's outputs)
        out.write_text(json.dumps(nb, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        execution = Execution(
            nb=nb,
            timed_out=list(info.get("timed_out", [])),
            died=list(info.get("died", [])),
            not_run_from=info.get("not_run_from"),
            tampered={int(k): v for k, v in info.get("tampered", {}).items()},
            error=info.get("error"),
            restarts=info.get("restarts", 0),
        )
        refs, chapter_tests, findings = judged
        broken = syntax_errors(execution.nb)
        notes = [sub.note or ""] + ([f"syntax error in cell {', '.join(map(str, broken))}"] if broken else [])
        report = Report(sub.student, sub.chapter, "graded", message="; ".join(n for n in notes if n), name=sub.name,
                        late=sub.late)
        report.tests = [t.to_dict() for t in score(execution, refs, chapter_tests, findings)]
        if info.get("error"):
            report.status, report.message = "error", f"the kernel could not run the notebook: {info['error']}"
    _finish(report, sub.chapter, source, db_url, fp, ws)
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


def _finish(report: Report, chapter: str, source: Path, db_url: str, fp: str, ws: Workspace) -> None:
    """Write scores (one transaction), then the result file: the order makes resuming safe."""
    points = _test_points(source)
    got = {t["grade_id"]: float(t["points"]) for t in report.tests if t["grade_id"] in points}
    scores = {gid: got.get(gid, 0.0) for gid in points}
    gbmod.save_scores(db_url, chapter, source.stem, report.student, scores, name=report.name)
    total = gbmod.student_scores(db_url, chapter, report.student)
    report.score, report.max_score = total if total else (sum(scores.values()), sum(points.values()))
    report.fingerprint = fp
    _write_json(ws.result_path(report.student, chapter), asdict(report))


def unreadable(sub: Submission, status: str, reason: str, db_url: str, sources: dict[str, Path], *, fingerprint: str = "", ws: Workspace | None = None) -> Report:
    report = Report(sub.student, sub.chapter, status, message=reason, name=sub.name)
    if sub.chapter in sources and ws is not None:
        report.tests = [
            TestResult(g, 0.0, m, "not run", reason).to_dict() for g, m in _test_points(sources[sub.chapter]).items()
        ]
        _finish(report, sub.chapter, sources[sub.chapter], db_url, fingerprint, ws)
    return report


def cached(ws: Workspace, sub: Submission, fp: str, db_url: str) -> Report | None:
    path = ws.result_path(sub.student, sub.chapter)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if data.get("fingerprint") != fp or data.get("status") == "error":
        return None
    total = gbmod.student_scores(db_url, sub.chapter, sub.student)
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
