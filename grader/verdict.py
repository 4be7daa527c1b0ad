"""How a test is scored: the learner's observations against the solution's, in the coordinator.

This is the one place that decides points. The learner's process only *observes* (see
:mod:`course_utils.observe`); nothing it computes, prints or raises can award a point. A
test cell earns its points when, observation by observation, the learner's run produced
what the run of the chapter's solution produced (the reference, :mod:`grader.reference`):
same sites in the same order, each value equal to the reference's expected value within the
reference's tolerances, the cell's end reached and no error left in it. Every argument of a
comparison other than the learner's value comes from the reference. Reasons are written here,
from the two values, never from text the learner's process sent.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from nbformat import NotebookNode

from course_utils import checks
from course_utils.observe import SCHEMA
from grader import cells, expectations
from grader.engines.execution import TIMEOUT_ENAME, Execution
from grader.expectations import Expectation, Known
from grader.instrument import Message, TestSource
from grader.integrity import Finding
from grader.observations import (
    IDENT,
    MAX_CELL_BYTES,
    MAX_OBSERVATIONS,
    Elsewhere,
    Malformed,
    Opaque,
    Raised,
    decode,
    first_error,
    observations,
)

MAX_REASON = 400

PASSED = "passed"
FAILED = "failed"
TIMED_OUT = "timed out"
MEMORY = "memory limit"
NOT_RUN = "not run"
KERNEL_DIED = "kernel died"
NO_REFERENCE = "no reference"

#: What to say for an error the learner's code raised, by its type (never its message,
#: which the learner's process wrote and could fill with anything it read).
FRIENDLY = {
    "StdinNotImplementedError": "input() is not available when grading: an answer must not ask for input",
    "SystemExit": "the code called sys.exit() / exit(), which stops the notebook",
    "KeyboardInterrupt": "the cell was interrupted",
    "MemoryError": "the code used more memory than allowed",
}
UNANSWERED = "not answered yet: the answer cell still raises NotImplementedError()"
_NAME_ERROR = re.compile(r"^name '([A-Za-z_][A-Za-z0-9_]{0,40})' is not defined")


@dataclass
class TestResult:
    """The outcome of one graded test cell (``note``: for a reviewer, never a score)."""

    grade_id: str
    points: float
    max_points: float
    status: str
    reason: str = ""
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


# -- comparing ------------------------------------------------------------------------------

def _answer_error(fn, *args, **kwargs) -> str | None:
    try:
        fn(*args, **kwargs)
    except checks.AnswerError as exc:
        return str(exc)
    return None


#: Kinds of check whose verdict depends on nothing of the learner's observation but its value.
_BY_VALUE = ("begin", "end", "phase", "tensor", "value", "shape", "raises")


def compare(got: dict, ref: dict, asserts: dict[int, Message]) -> str | None:
    """None when the learner's observation ``got`` matches the reference's ``ref``, else why not.

    An answer that sends the very data the solution's run sent at this check gets the verdict
    worked out once for that data (see :class:`grader.expectations.Known`); any other answer is
    decoded and compared.
    """
    kind = ref["kind"]
    if not isinstance(got, dict) or got.get("kind") != kind or got.get("line") != ref.get("line"):
        return "the test's checks did not run as they should (a check was skipped, repeated or added)"
    exp = expectations.of(ref)
    data = got.get("actual")
    known = exp.own_answer(_own_answer)
    if known is not None and known.matches(data):
        return known.verdict
    return _compare(decode(data), exp, got, asserts)


def _own_answer(exp: Expectation) -> Known | None:
    """The data the solution's run sent as its answer, with the verdict for an answer sending
    that very data; None where the verdict could depend on more than the data, or cannot be given."""
    ref = exp.ref
    try:
        if ref["kind"] not in _BY_VALUE or "actual" not in ref:
            return None
        return Known(ref["actual"], _compare(decode(ref["actual"]), exp, ref, {}))
    except Exception:  # the learner's answer takes the full comparison, and fails as it would
        return None


def _compare(actual: Any, exp: Expectation, got: dict, asserts: dict[int, Message]) -> str | None:
    """:func:`compare` for the decoded value ``actual`` of the learner's observation ``got``."""
    kind = exp.ref["kind"]
    if kind in ("begin", "end", "phase"):
        return None if actual == exp.actual() else "the test did not run as it should"
    name = exp.param("name", "your answer")
    if isinstance(actual, Opaque) and kind in ("tensor", "value", "shape"):
        what = "a value too large to compare" if actual.kind == "too large" else f"an object of type {actual.kind}"
        wanted = "a plain torch.Tensor" if kind != "value" else "a number, a tensor or a plain Python value"
        return f"{name} should be {wanted}, but it is {what}."
    if kind == "tensor":
        expected = exp.expected()
        if isinstance(expected, Elsewhere) or isinstance(actual, Elsewhere):
            return _elsewhere(actual, expected, name)
        return _answer_error(
            checks.check_tensor, actual, expected, name=name, rtol=exp.param("rtol", 1e-5),
            atol=exp.param("atol", 1e-8), check_device=exp.param("check_device", True),
        )
    if kind == "value":
        expected = exp.expected()
        if isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
            return _arrays(actual, expected, name, exp.param("rel_tol", 1e-6), exp.param("abs_tol", 1e-9))
        return _answer_error(
            checks.check_value, actual, expected, name=name,
            rel_tol=exp.param("rel_tol", 1e-6), abs_tol=exp.param("abs_tol", 1e-9),
        )
    if kind == "shape":
        return _answer_error(checks.check_shape, actual, exp.param("shape", ()), name=name)
    if kind == "raises":
        return _raised(actual, exp.param("types", []), exp.param("match", None))
    if kind == "assert":
        if actual is True:
            return None
        return _site_message(got, asserts)
    return "the test sent an observation of an unknown kind"


def _arrays(actual: Any, expected: Any, name: str, rel_tol: float, abs_tol: float) -> str | None:
    """NumPy arrays compared as check_tensor compares tensors: kind, shape, dtype, then values."""
    if not isinstance(actual, np.ndarray):
        return f"{name} should be a NumPy array, but it is {checks._describe(actual)}."
    if not isinstance(expected, np.ndarray):
        return f"{name} should be {checks._describe(expected)}, but it is a NumPy array."
    if actual.shape != expected.shape:
        return f"{name} has shape {checks._fmt_shape(actual.shape)} but expected {checks._fmt_shape(expected.shape)}."
    if actual.dtype != expected.dtype:
        return f"{name} has dtype {actual.dtype} but expected {expected.dtype}."
    if actual.dtype.kind in "fc":
        ok = np.isclose(actual, expected, rtol=rel_tol, atol=abs_tol, equal_nan=True)
    else:
        ok = actual == expected
    if bool(np.all(ok)):
        return None
    return f"{name} has the right shape and dtype, but {int(np.size(ok) - np.count_nonzero(ok))} of {actual.size} values differ."


def _elsewhere(actual: Any, expected: Any, name: str) -> str | None:
    a = actual.device if isinstance(actual, Elsewhere) else getattr(actual, "device", None)
    e = expected.device if isinstance(expected, Elsewhere) else expected.device
    if a != e:
        return f"{name} is on device '{a}' but expected '{e}'."
    at = actual.tensor if isinstance(actual, Elsewhere) else actual
    et = expected.tensor if isinstance(expected, Elsewhere) else expected
    return _answer_error(checks.check_tensor, at, et, name=name, check_device=False)


def _raised(actual: Any, types: list[str], match: str | None) -> str | None:
    wanted = " or ".join(t.rsplit(".", 1)[-1] for t in types) or "an error"
    if not isinstance(actual, Raised):
        return "the test's checks did not run as they should"
    if actual.type is None:
        return f"expected {wanted} to be raised, but the code ran without error."
    if not set(types) & set(actual.mro):
        got = actual.type.rsplit(".", 1)[-1] if IDENT.match(actual.type) else "another error"
        return f"expected {wanted} to be raised, but the code raised {got}."
    if match is not None and not re.search(match, actual.message):
        return f"{wanted} was raised as expected, but its message does not match {match!r}."
    return None


# -- scoring --------------------------------------------------------------------------------

def _error_reason(error: dict) -> tuple[str, str]:
    """Status and reason for an error the learner's code left in a test cell."""
    ename, evalue = str(error.get("ename", "")), str(error.get("evalue", ""))
    if ename == "MemoryError" or "can't allocate memory" in evalue or "out of memory" in evalue.lower():
        return MEMORY, f"the code used more memory than allowed ({ename if IDENT.match(ename) else 'an error'})"
    if not IDENT.match(ename):
        return FAILED, "the code raised an error"
    if ename in FRIENDLY:
        return FAILED, f"{ename}: {FRIENDLY[ename]}"
    if ename == "NotImplementedError" and evalue in ("", cells.STUB_MESSAGE):
        return FAILED, f"{ename}: {UNANSWERED}"
    m = _NAME_ERROR.match(evalue)
    if ename == "NameError" and m:
        return FAILED, (
            f"NameError: name '{m[1]}' is not defined (did its answer cell run? a syntax error"
            " there stops it from defining anything)"
        )
    return FAILED, f"{ename} was raised (run the test cell in your notebook to see the message)"


def _site_message(obs: dict, asserts: dict[int, Message]) -> str:
    """The test's own message for a failed assert or ``raise AnswerError``, values written in
    only where they are plain data or text of the visible test."""
    site = obs.get("line")
    message = asserts.get(site) if type(site) is int else None
    if message is None or not message.parts:
        return "a check of the test failed"
    try:
        values = list(decode(obs.get("params", {}).get("values", {"t": "tuple", "items": []})))
    except (Malformed, TypeError):
        values = []
    out = []
    for part in message.parts:
        if part is not None:
            out.append(part)
        else:
            out.append(_plain(values.pop(0), message.visible) if values else "…")
    return "".join(out)


def _plain(value: Any, visible: str) -> str:
    """A value as a test message shows it, or "…" when it could carry text from the process."""
    if value is None or type(value) in (bool, int, float) or isinstance(value, torch.dtype | torch.device):
        return str(value)
    if isinstance(value, torch.Size | tuple | list) and all(type(v) in (int, bool) for v in value):
        return str(tuple(value)) if not isinstance(value, list) else str(value)
    if type(value) is str:
        return value if value and value in visible else "…"
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {checks._fmt_shape(value.shape)} and dtype {value.dtype}"
    return "…"


def _where(refs: list[dict], i: int) -> str:
    """' while checking <name>' for the reference's next named check in the same part of the test."""
    for ref in refs[i:]:
        if ref.get("kind") == "phase":  # the error came before the hidden part: name none of it
            return ""
        if ref.get("kind") in ("tensor", "value", "shape"):
            try:
                return f" while checking {expectations.of(ref).param('name', 'your answer')}"
            except Malformed:
                return ""
    return ""


def judge(cell: NotebookNode, refs: list[dict], asserts: dict[int, Message]) -> tuple[str, str]:
    """(status, reason) of one executed test cell against its reference observations."""
    got = observations(cell)
    error = first_error(cell)
    size = _text_size(got, refs)
    if len(got) > MAX_OBSERVATIONS or size > MAX_CELL_BYTES:
        return FAILED, "the test sent more observations than the grader accepts"
    for i, ref in enumerate(refs):
        if i >= len(got):
            if error is not None:
                return _stopped_by(error, refs, i)
            return FAILED, "the test stopped before its end" + _where(refs, i)
        if not isinstance(got[i], dict) or got[i].get("v") != SCHEMA:
            return FAILED, "the test sent a malformed observation"
        try:
            why = compare(got[i], ref, asserts)
        except Malformed as exc:
            return FAILED, f"the test sent a malformed observation ({exc})"
        except Exception as exc:  # values the checks cannot compare: that test fails, nothing else
            return FAILED, f"the answer could not be compared with the expected value ({type(exc).__name__})"
        if why is not None:
            if got[i].get("kind") == "fail":  # the test's own `raise AnswerError(...)` fired
                return FAILED, _site_message(got[i], asserts)
            if error is not None and got[i].get("kind") != ref.get("kind"):
                return _stopped_by(error, refs, i)
            return FAILED, why
    if len(got) > len(refs):
        return FAILED, "the test sent more observations than its checks make"
    if error is not None:
        return _error_reason(error)
    return PASSED, ""


def _text_size(got: list[Any], refs: list[dict]) -> int:
    """The observations' size as the cap counts it, ``len(str(obs))`` summed; or, where it stays
    under the cap, an upper bound of it taken from the reference for each observation equal
    (``==``) to the reference's at its place, which spares writing out every observation."""
    size, bounded = 0, False
    for i, obs in enumerate(got):
        bound = expectations.of(refs[i]).text_bound() if i < len(refs) and obs == refs[i] else None
        if bound is None:
            size += len(str(obs))
        else:
            size, bounded = size + bound, True
    if bounded and size > MAX_CELL_BYTES:  # near the cap: the exact figure decides
        return sum(len(str(obs)) for obs in got)
    return size


def _stopped_by(error: dict, refs: list[dict], i: int) -> tuple[str, str]:
    """(status, reason) for an error that stopped the test before the reference's i-th check."""
    status, reason = _error_reason(error)
    return status, reason + (_where(refs, i) if status == FAILED else "")


def static_notes(findings: list[Finding], nb: NotebookNode) -> dict[int, str]:
    """Test cell index -> a reviewer's note, for the test that follows each suspicious learner cell."""
    notes: dict[int, str] = {}
    tests = [i for i, c in enumerate(nb.cells) if cells.is_test(c)]
    for f in findings:
        after = [i for i in tests if i > f.cell_index]
        if after and after[0] not in notes:
            notes[after[0]] = f"for review: the answer {f.reason}: `{f.excerpt}`"
    return notes


def score(
    execution: Execution,
    reference: dict[str, list[dict]],
    tests: dict[str, TestSource],
    findings: list[Finding] = (),
) -> list[TestResult]:
    """One :class:`TestResult` per graded test cell of the executed notebook.

    ``reference`` maps each test's grade_id to the observations of the solution's run;
    ``tests`` gives the grader's version of each test cell (for assert messages). A test
    cell the chapter does not have is not scored. What the static scan or the in-process
    guard found is a note, never a score.
    """
    notes = static_notes(list(findings), execution.nb)
    results = []
    seen: set[str] = set()
    for index, cell in enumerate(execution.nb.cells):
        if not cells.is_test(cell):
            continue
        gid = cells.grade_id(cell) or f"cell {index}"
        if gid not in tests or gid in seen:
            continue
        seen.add(gid)
        max_points = cells.points(cell)
        note = notes.get(index, "")
        if index in execution.tampered:
            note = (note + "; " if note else "") + f"for review: the code {execution.tampered[index]}"
        if execution.error is not None:
            status, reason = NOT_RUN, f"the notebook could not be run: {execution.error}"
        elif index in execution.timed_out:
            stop = next((o for o in cell.get("outputs", []) if o.get("ename") == TIMEOUT_ENAME), None)
            status, reason = TIMED_OUT, str(stop.get("evalue", "")) if stop else "timed out"
        elif index in execution.died:
            status, reason = KERNEL_DIED, "the kernel died while running this test (a crash, os._exit or a memory bomb)"
        elif execution.not_run_from is not None and index >= execution.not_run_from:
            status, reason = NOT_RUN, "not run: the kernel died too many times before this test"
        elif not cell.get("execution_count") and first_error(cell) is None:
            status, reason = NOT_RUN, "not run"
        elif not reference.get(gid):
            status, reason = NO_REFERENCE, "the chapter's solution does not pass this test: an instructor must fix it"
        else:
            status, reason = judge(cell, reference[gid], tests[gid].asserts)
        if len(reason) > MAX_REASON:
            reason = reason[: MAX_REASON - 1] + "…"
        points = max_points if status == PASSED else 0.0
        results.append(TestResult(gid, points, max_points, status, reason, note))
    return results
