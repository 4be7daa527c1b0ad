"""How a test is scored: the learner's observations against the solution's, in the coordinator.

This is the one place that decides points. The learner's process only *observes* (see
:mod:`course_utils.observe`); nothing it computes, prints or raises can award a point. A
test cell earns its points when, observation by observation, the learner's run produced
what the run of the chapter's solution produced (the reference, :mod:`grader.verdict.reference`):
same sites in the same order, each value equal to the reference's expected value within the
reference's tolerances, the cell's end reached and no error left in it. Every argument of a
comparison other than the learner's value comes from the reference. Reasons are written here
and in :mod:`grader.verdict.comparison` (one observation against the reference's), from the two
values, never from text the learner's process sent.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from typing import Any

from nbformat import NotebookNode

from course_utils.observe import SCHEMA
from grader import cells
from grader.engines.execution import Execution
from grader.prepare.integrity import Finding
from grader.verdict import expectations, hints
from grader.verdict.comparison import compare, site_message
from grader.verdict.instrument import Message, TestSource
from grader.verdict.library_messages import library_words
from grader.verdict.observations import (
    MAX_CELL_BYTES,
    MAX_OBSERVATIONS,
    Malformed,
    first_error,
    observations,
)
from grader.verdict.rules import rule as rules
from grader.verdict.syntax import syntax_error
from grader.verdict.verdicts import Verdicts

MAX_REASON = 600

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
UNANSWERED = ("not answered yet: the answer cell still holds the line `raise NotImplementedError(...)`;"
              " replace it with your answer and run the cell")
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


# -- scoring --------------------------------------------------------------------------------

@functools.cache
def known_exceptions() -> frozenset[str]:
    """Names of the exception classes Python and the libraries a chapter uses define: the only
    ones a reason repeats (a class the notebook defined can carry any text in its name)."""
    import builtins

    import numpy as np
    import torch

    names = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    for module in (torch, torch.cuda, torch.autograd, np, getattr(np, "exceptions", np)):
        names |= {n for n, v in vars(module).items() if isinstance(v, type) and issubclass(v, BaseException)}
    return frozenset(names | {"AnswerError", "StdinNotImplementedError", "OutOfMemoryError"})


def _error_reason(error: dict, where: str = "", hidden: bool = False) -> tuple[str, str]:
    """Status and reason for an error the learner's code left in a test cell, ``where`` it
    stopped the test (" while checking <the reference's next check>", or "").

    The error's name is repeated only when it is Python's or a library's, and its message then
    only as its first line cut to 40 characters (:func:`_error_message`). Memory is told from
    the name alone: a message can say anything."""
    ename, evalue = str(error.get("ename", "")), str(error.get("evalue", ""))
    if ename == "MemoryError" or (ename in ("RuntimeError", "OutOfMemoryError") and _out_of_memory(evalue)):
        return MEMORY, f"the code used more memory than allowed ({ename}){where}"
    if ename not in known_exceptions():
        return FAILED, f"the code raised an exception of a class defined in the notebook{where}"
    if ename in FRIENDLY:
        return FAILED, f"{ename}: {FRIENDLY[ename]}"
    if ename == "NotImplementedError" and evalue in ("", cells.STUB_MESSAGE):
        return FAILED, UNANSWERED
    m = _NAME_ERROR.match(evalue)
    if ename == "NameError" and m:
        return FAILED, (
            f"NameError: name '{m[1]}' is not defined{where} (did its answer cell run? a syntax error"
            " there stops it from defining anything)"
        )
    message = _error_message(evalue)
    said = f" with the message {message}" if message else ""
    if hidden:
        see = ": it came in the test's hidden part; call your function on such inputs yourself to see the whole error"
    else:
        see = " (run the test cell in your notebook to see the whole error and the line that raised it)"
    return FAILED, f"{ename} was raised{said}{where}{see}"


def _error_message(evalue: str) -> str:
    """An error's message as a reason quotes it: only where it begins with the words Python or
    torch write for that error (:mod:`grader.verdict.library_messages`), and then only those words, with
    the numbers, names and shapes in their slots; "" for any other text.

    The message is text the learner's process sent: a learner's own
    ``raise RuntimeError("... score 20/20")`` names a builtin class and says anything. Quoting
    only a library's template, filled with short numbers and names, shows what the library said
    (the shapes that clashed, the attribute that is missing) and nothing a learner wrote."""
    words = library_words(evalue)
    return repr(words) if words else ""


def _out_of_memory(evalue: str) -> bool:
    """torch's own wording for an allocation that failed (CPU and CUDA)."""
    return evalue.startswith(("[enforce fail at alloc_cpu", "CUDA out of memory", "DefaultCPUAllocator: can't allocate memory",
                              "DefaultCPUAllocator: not enough memory"))


def _where(refs: list[dict], i: int) -> str:
    """' while checking <name>': the reference's next named check in the same part of the test; else
    ' after checking <name>': the last one before it in that part (an error after the last check)."""
    for part, word in ((refs[i:], "while"), (refs[:i][::-1], "after")):
        for ref in part:
            if ref.get("kind") == "phase":  # another part of the test: name none of it
                break
            if ref.get("kind") in ("tensor", "value", "shape"):
                try:
                    return f" {word} checking {expectations.of(ref).param('name', 'your answer')}"
                except Malformed:
                    return ""
    return ""


def _diverged(got: dict, ref: dict) -> bool:
    """Whether the learner's check at this place is another one than the reference's: its name
    (written from the check's input) differs. After an error, that is a run gone another way --
    an input tried again after the error (hypothesis retries smaller ones), a loop left early --
    so its value is no answer to the reference's input there, and the error decides."""
    params, ref_params = got.get("params"), ref.get("params")
    if not isinstance(params, dict) or not isinstance(ref_params, dict):
        return True
    return params.get("name") != ref_params.get("name")


#: Kinds of observation that carry a value of the learner's answer. The others (``assert``,
#: ``fail``: whether a condition held) are yes/no answers the learner's process can fake, so a
#: test whose points would rest on them alone is never passed (and the hidden-test lint refuses it).
VALUE_KINDS = frozenset({"tensor", "value", "shape", "raises"})


def judge(cell: NotebookNode, refs: list[dict], asserts: dict[int, Message], *,
          forge_yes_no: bool = False) -> tuple[str, str]:
    """(status, reason) of one executed test cell against its reference observations.

    ``forge_yes_no`` judges as a learner's process would have it that fakes every yes/no it
    sends: each ``assert`` observation says it held. A wrong answer must still fail then
    (``tests/test_chapters.py`` checks it for every known mistake): its test fails on values.
    """
    got, error = observations(cell), first_error(cell)
    text = _VERDICTS.key(got, error)
    verdict = _VERDICTS.get(refs, asserts, forge_yes_no, text) if text is not None else None
    if verdict is None:
        verdict = _judge(got, error, refs, asserts, forge_yes_no=forge_yes_no)
        if text is not None and not verdict[1].startswith(_NOT_COMPARED):  # that one may be the machine's
            _VERDICTS.put(refs, asserts, forge_yes_no, text, verdict)
    return verdict


_NOT_COMPARED = "the answer could not be compared with the expected value"
#: verdicts worked out once per distinct data of a test cell (see :class:`grader.verdict.verdicts.Verdicts`)
_VERDICTS = Verdicts()


def _judge(got: list[Any], error: dict | None, refs: list[dict], asserts: dict[int, Message], *,
           forge_yes_no: bool) -> tuple[str, str]:
    """:func:`judge` of a cell's observations ``got`` and first error."""
    size = _text_size(got, refs)
    if len(got) > MAX_OBSERVATIONS or size > MAX_CELL_BYTES:
        return FAILED, "the test sent more observations than the grader accepts"
    if not any(ref.get("kind") in VALUE_KINDS for ref in refs):
        return FAILED, "this test checks no value of the answer, so the grader cannot score it: an instructor must fix it"
    hidden = False
    for i, ref in enumerate(refs):
        if ref.get("kind") == "phase":
            hidden = True
        if i >= len(got):
            if error is not None:
                return _stopped_by(error, refs, i)
            return FAILED, "the test stopped before its end" + _where(refs, i)
        if not isinstance(got[i], dict) or got[i].get("v") != SCHEMA:
            return FAILED, "the test sent a malformed observation"
        if forge_yes_no and ref.get("kind") == "assert" and got[i].get("kind") == "assert":
            continue
        try:
            why = compare(got[i], ref, asserts, hidden=hidden)
        except Malformed as exc:
            return FAILED, f"the test sent a malformed observation ({exc})"
        except Exception as exc:  # values the checks cannot compare: that test fails, nothing else
            return FAILED, f"{_NOT_COMPARED} ({type(exc).__name__})"
        if why is not None:
            if got[i].get("kind") == "fail":  # the test's own `raise AnswerError(...)` fired
                return FAILED, site_message(got[i], asserts)
            if error is not None and (got[i].get("kind") != ref.get("kind") or _diverged(got[i], ref)):
                return _stopped_by(error, refs, i)
            return FAILED, why
    if len(got) > len(refs):
        return FAILED, "the test sent more observations than its checks make"
    if error is not None:
        return _error_reason(error, _where(refs, len(refs)), hidden)
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
    hidden = any(ref.get("kind") == "phase" for ref in refs[:i])
    return _error_reason(error, _where(refs, i), hidden)


def static_notes(findings: list[Finding], nb: NotebookNode) -> dict[int, str]:
    """Test cell index -> a reviewer's note, for the test that follows each suspicious learner cell."""
    notes: dict[int, str] = {}
    tests = [i for i, c in enumerate(nb.cells) if cells.is_test(c)]
    for f in findings:
        after = [i for i in tests if i > f.cell_index]
        if after and after[0] not in notes:
            notes[after[0]] = f"for review: the answer {f.reason}: `{f.excerpt}`"
    return notes


def score(execution: Execution, reference: dict[str, list[dict]], tests: dict[str, TestSource],
          findings: list[Finding] = ()) -> list[TestResult]:
    """One :class:`TestResult` per graded test cell of the executed notebook.

    ``reference`` maps each test's grade_id to the observations of the solution's run;
    ``tests`` gives the grader's version of each test cell (for assert messages). A test
    cell the chapter does not have is not scored. What the static scan or the in-process
    guard found is a note, never a score.
    """
    notes = static_notes(list(findings), execution.nb)
    read: rules.Read | None = None
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
        elif index in execution.timed_out:  # the engine's word, never an output's
            limit = f"{execution.cell_timeout} s" if execution.cell_timeout else "its time limit"
            status, reason = TIMED_OUT, f"the cell ran longer than {limit} and was stopped"
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
            broken_cell = syntax_error(execution.nb, index) if status == FAILED else None
            if broken_cell is not None:
                reason = broken_cell
            elif status == FAILED:
                reason = hints.add(reason, tests[gid].hints, limit=MAX_REASON)
        rule = tests[gid].rule if gid in tests else None
        if status == PASSED and rule is not None:  # how it is written, read from its source
            broken = rules.violation(read := read or rules.read(execution.nb), rule)  # read once for all its rules
            if broken:
                status, reason = FAILED, hints.add(broken, tests[gid].hints, rule=True, limit=MAX_REASON)
        reason = hints.shorten(reason, MAX_REASON)
        points = max_points if status == PASSED else 0.0
        results.append(TestResult(gid, points, max_points, status, reason, note))
    return results
