"""Scoring an executed submission: a test cell earns its points only if it ran and raised nothing."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from nbformat import NotebookNode

from grader import cells
from grader.execute import TIMEOUT_ENAME, Execution
from grader.integrity import Finding

MAX_REASON = 400

PASSED = "passed"
FAILED = "failed"
TIMED_OUT = "timed out"
MEMORY = "memory limit"
NOT_RUN = "not run"
KERNEL_DIED = "kernel died"
FLAGGED = "flagged"

#: Errors whose raw message would puzzle a learner, and what to say instead.
FRIENDLY = {
    "StdinNotImplementedError": "input() is not available when grading: an answer must not ask for input",
    "SystemExit": "the code called sys.exit() / exit(), which stops the notebook",
    "KeyboardInterrupt": "the cell was interrupted",
}
UNANSWERED = "not answered yet: the answer cell still raises NotImplementedError()"


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


def _failure(error: dict) -> tuple[str, str]:
    ename, evalue = error.get("ename", "Error"), str(error.get("evalue", ""))
    if ename == "MemoryError" or "can't allocate memory" in evalue or "out of memory" in evalue.lower():
        return MEMORY, f"the code used more memory than allowed ({ename})"
    if ename in FRIENDLY:
        return FAILED, f"{ename}: {FRIENDLY[ename]}"
    if ename == "NotImplementedError" and evalue in ("", cells.STUB_MESSAGE):  # the release's stub
        return FAILED, f"{ename}: {UNANSWERED}"
    return FAILED, f"{ename}: {evalue}".strip()


def static_flags(findings: list[Finding], nb: NotebookNode) -> dict[int, str]:
    """Test cell index -> reason, for the test that follows each suspicious learner cell."""
    flags: dict[int, str] = {}
    tests = [i for i, c in enumerate(nb.cells) if cells.is_test(c)]
    for f in findings:
        after = [i for i in tests if i > f.cell_index]
        if after and after[0] not in flags:
            flags[after[0]] = f"the answer {f.reason}: `{f.excerpt}`"
    return flags


def score(execution: Execution, findings: list[Finding] = ()) -> list[TestResult]:
    """One :class:`TestResult` per graded test cell of the executed notebook.

    Unlike nbgrader's rule, output on stderr (a warning) never costs points, and a cell that
    never ran (the kernel died or failed to start) scores 0 instead of full marks. A test
    after tampering (see :mod:`grader.integrity`) scores 0 and is flagged.
    """
    flags = static_flags(list(findings), execution.nb)
    results = []
    for index, cell in enumerate(execution.nb.cells):
        if not cells.is_test(cell):
            continue
        gid = cells.grade_id(cell) or f"cell {index}"
        max_points = cells.points(cell)
        error = _first_error(cell)
        if execution.error is not None:
            status, reason = NOT_RUN, f"the notebook could not be run: {execution.error}"
        elif index in flags:
            status, reason = FLAGGED, flags[index]
        elif index in execution.tampered:
            status, reason = FLAGGED, f"tampering: the code {execution.tampered[index]}"
        elif index in execution.timed_out:
            stop = next((o for o in cell.get("outputs", []) if o.get("ename") == TIMEOUT_ENAME), None)
            status, reason = TIMED_OUT, str(stop.get("evalue", "")) if stop else "timed out"
        elif index in execution.died:
            status, reason = KERNEL_DIED, "the kernel died while running this test (a crash, os._exit or a memory bomb)"
        elif execution.not_run_from is not None and index >= execution.not_run_from:
            status, reason = NOT_RUN, "not run: the kernel died too many times before this test"
        elif not cell.get("execution_count") and error is None:
            status, reason = NOT_RUN, "not run"
        elif error is not None:
            status, reason = _failure(error)
        else:
            status, reason = PASSED, ""
        if len(reason) > MAX_REASON:
            reason = reason[: MAX_REASON - 1] + "…"
        points = max_points if status == PASSED else 0.0
        results.append(TestResult(gid, points, max_points, status, reason))
    return results
