"""One submission's verdict as the batch reports it: a :class:`Report`, test by test.

:func:`scored` is the verdict stage for one executed submission: its notebook kept in
``DIR/autograded/``, each test cell judged (:func:`grader.verdict.judge.score`), the statuses
the grader itself met (a kernel that could not run it, a test the solution did not pass). Whatever
the submission made the grader meet on the way costs it an "error" report, never the batch.
:func:`unreadable` and :func:`failed` are the reports of submissions that were not executed or
not scored. :mod:`grader.record.results` records them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from grader import cells, jsonio
from grader.engines.execution import Execution
from grader.intake.submissions import Submission
from grader.intake.workspace import LOG, Workspace
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
    file: str | None = None  # the file graded as the learner uploaded it (an LMS's download)
    superseded: list[str] = field(default_factory=list)  # the learner's earlier uploads, not graded


def error_name(exc: BaseException) -> str:
    """``exc``'s type name where a builtin or a library defines it, else "an unexpected error"."""
    kind = type(exc)
    if str(getattr(kind, "__module__", "")).split(".")[0] in LIBRARIES:
        return kind.__name__
    return "an unexpected error"


def see_log(ws: Workspace) -> str:
    """Where a message sends the instructor for the cause: the batch's log (:data:`grader.intake.workspace.LOG`)."""
    return f"the cause is in {ws.root / LOG}"


def failed(sub: Submission, source: Path, message: str, reason: str = "grading failed") -> Report:
    """The "error" report of a submission the grader could not score: every test not run, for ``reason``."""
    report = Report(sub.student, sub.chapter, "error", message=message, name=sub.name, late=sub.late, file=sub.file,
                    superseded=list(sub.superseded))
    report.tests = [TestResult(g, 0.0, m, "not run", reason).to_dict() for g, m in test_points(source).items()]
    return report


def unreadable(sub: Submission, status: str, reason: str, sources: dict[str, Path]) -> Report:
    """The report of a submission that was not executed: every test of its chapter says why."""
    report = Report(sub.student, sub.chapter, status, message=reason, name=sub.name, late=sub.late, file=sub.file,
                    superseded=list(sub.superseded))
    if sub.chapter in sources:
        report.tests = [
            TestResult(g, 0.0, m, "not run", reason).to_dict() for g, m in test_points(sources[sub.chapter]).items()
        ]
    return report


def scored(ws: Workspace, sub: Submission, outcome, source: Path, judged: tuple) -> Report:
    """Score an executed submission here, in the coordinator (recorded by a :class:`Recorder`).

    Whatever the submission made the grader meet on the way (an observation nothing decodes, an
    output of the wrong type), it costs this submission an "error" report, never the batch: the
    report says so in the grader's words, and the log has the traceback.
    """
    if isinstance(outcome, Exception):
        log.error("executing %s failed: %s: %s", sub.key, type(outcome).__name__, outcome)
        return failed(sub, source, f"grading failed ({error_name(outcome)}; {see_log(ws)})")
    try:
        return _scored(ws, sub, outcome, source, judged)
    except Exception as exc:  # noqa: BLE001 -- one submission never stops the batch
        log.exception("scoring %s failed", sub.key)
        return failed(sub, source, f"the grader could not score this submission ({error_name(exc)}; {see_log(ws)})",
                      "not scored: the grader failed on this submission")


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
                    late=sub.late, file=sub.file, superseded=list(sub.superseded))
    report.tests = [t.to_dict() for t in score(execution, refs, chapter_tests, findings)]
    unjudged = [t["grade_id"] for t in report.tests if t["status"] == NO_REFERENCE]
    if info.get("error"):
        report.status, report.message = "error", f"the kernel could not run the notebook: {info['error']}"
    elif unjudged:  # the grader's failure, not the learner's: not a grade, and graded again next run
        report.status = "error"
        report.message = "; ".join(filter(None, [report.message, (
            f"not graded in full: the chapter's solution did not pass {', '.join(unjudged)} when run here "
            f"({see_log(ws)}); grade again once it does")]))
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


def test_points(source: Path) -> dict[str, float]:
    """The points of each test cell of a chapter's source (read once per version of the file)."""
    st = source.stat()
    key = (str(source), st.st_mtime_ns, st.st_size)
    if key not in _points:
        nb = nbformat.read(str(source), as_version=4)
        _points[key] = {cells.grade_id(c): cells.points(c) for c in nb.cells if cells.is_test(c)}
    return dict(_points[key])


def passed_tests(report: Report) -> list[str]:
    """grade_ids of the tests a report passed."""
    return [t["grade_id"] for t in report.tests if t["status"] == PASSED]
