"""Scoring an executed submission: a test cell earns its points only if it ran and raised nothing."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from nbformat import NotebookNode

from grader import cells
from grader.execute import Execution

MAX_REASON = 400

PASSED = "passed"
FAILED = "failed"
TIMED_OUT = "timed out"
NOT_RUN = "not run"
KERNEL_DIED = "kernel died"


@dataclass
class TestResult:
    """The outcome of one graded test cell."""

    grade_id: str
    points: float
    max_points: float
    status: str
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _first_error(cell: NotebookNode) -> dict | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return out
    return None


def score(execution: Execution) -> list[TestResult]:
    """One :class:`TestResult` per graded test cell of the executed notebook.

    Unlike nbgrader's rule, output on stderr (a warning) never costs points, and a cell
    that never ran (the kernel died or failed to start) scores 0 instead of full marks.
    """
    results = []
    for index, cell in enumerate(execution.nb.cells):
        if not cells.is_test(cell):
            continue
        gid = cells.grade_id(cell) or f"cell {index}"
        max_points = cells.points(cell)
        error = _first_error(cell)
        if execution.error is not None:
            status, reason = NOT_RUN, f"the notebook could not be run: {execution.error}"
        elif index in execution.timed_out:
            status, reason = TIMED_OUT, str(error.get("evalue", "")) if error else "timed out"
        elif execution.died_at is not None and index == execution.died_at:
            status, reason = KERNEL_DIED, "the kernel died while running this cell"
        elif execution.died_at is not None and (execution.died_at < 0 or index > execution.died_at):
            status, reason = NOT_RUN, f"not run: the kernel died earlier (in cell {execution.died_at})"
        elif not cell.get("execution_count") and error is None:
            status, reason = NOT_RUN, "not run"
        elif error is not None:
            status = FAILED
            reason = f"{error.get('ename', 'Error')}: {error.get('evalue', '')}".strip()
        else:
            status, reason = PASSED, ""
        if len(reason) > MAX_REASON:
            reason = reason[: MAX_REASON - 1] + "…"
        points = max_points if status == PASSED else 0.0
        results.append(TestResult(gid, points, max_points, status, reason))
    return results
