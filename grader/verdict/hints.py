"""What to try, per exercise: the reviewed hint table a reason ends with when a test fails.

A chapter's ``solutions/NN/hints.toml`` holds one table per exercise, keyed by its answer cell's
grade_id, with one sentence per way its test fails::

    [ex1_tensor_bytes]
    value = "Multiply the number of elements by what one element of `dtype` takes (`element_size()`)."
    dtype = "..."        # and shape, device, type, raised, rule; default for any other failure

The kind of a failure is read from the grader's own reason (:func:`kind_of`), never from anything
the learner's process sent; the hint is the instructor's text. Reasons that already say what to
do (not answered yet, a syntax error, a timeout) get no hint.
"""

from __future__ import annotations

import re
from pathlib import Path

from nbformat import NotebookNode

from grader import cells

#: The ways a test fails that a hint table can answer, tried in this order on the reason.
KINDS = ("rule", "raised", "device", "dtype", "shape", "type", "value")

_PATTERNS = (
    ("raised", re.compile(r"\bwas raised\b|\bexpected \S+(?: or \S+)* to be raised\b|\bthe code raised\b"
                          r"|\braised [A-Z]\w*(?:Error|Exception)\b")),
    ("device", re.compile(r" is on device ")),
    ("dtype", re.compile(r" has dtype ")),
    ("shape", re.compile(r" has shape | has \d+ items but expected |, \d+ items, but expected ")),
    ("type", re.compile(r" should be (?:a|an|None)\b")),
    ("value", re.compile(r" but expected | values differ|not the solution's value| differs from the solution's")),
)

#: Reasons that are already an instruction, or a status, not a mistake in the answer's value.
_NO_HINT = re.compile(r"^(?:not answered yet|your answer cell has a syntax error|NameError|the cell ran longer"
                      r"|the kernel died|not run|the notebook could not be run|the test sent|the test's checks"
                      r"|this test checks no value|the chapter's solution)")

#: The checks' own advice, general to every exercise (course_utils.checks): where the exercise's
#: table has a hint for the kind of failure, the reason gives that one instead.
GENERIC = re.compile(
    r" (?:An extra trailing dim equal to the last one often comes from|Same elements, different size-1 dims: try"
    r"|Same sizes in another order: try|Same number of elements: try|Your tensor is empty: check"
    r"|Check the dtype of the tensors you start from|Create new tensors on the device the call asks for"
    r"|Return the tensor itself: `\.item\(\)`|Wrap it with torch\.tensor\(|Convert it with torch\.from_numpy"
    r"|Use `\.item\(\)` to get a Python number)[^\n]*$")

#: How a reason introduces the exercise's hint.
LEAD = " What to try: "

FILE = "hints.toml"


def load(chapter_dir: Path) -> dict[str, dict[str, str]]:
    """A chapter's hint table: answer grade_id -> kind -> sentence ({} without ``hints.toml``).

    Raises:
        OSError, UnicodeDecodeError, tomllib.TOMLDecodeError: the file is there but unreadable.
    """
    import tomllib

    path = Path(chapter_dir) / FILE
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {gid: {k: str(v).strip() for k, v in table.items() if k in (*KINDS, "default") and str(v).strip()}
            for gid, table in data.items() if isinstance(table, dict)}


def by_test(table: dict[str, dict[str, str]], source_nb: NotebookNode) -> dict[str, dict[str, str]]:
    """Test grade_id -> the hints of its exercise (the answer cell before it)."""
    out: dict[str, dict[str, str]] = {}
    answer = None
    for cell in source_nb.cells:
        if cells.is_solution(cell):
            answer = cells.grade_id(cell)
        elif cells.is_test(cell) and answer is not None:
            if answer in table and cells.grade_id(cell):
                out[cells.grade_id(cell)] = table[answer]
            answer = None
    return out


def kind_of(reason: str, *, rule: bool = False) -> str | None:
    """Which way of failing the grader's ``reason`` tells (one of :data:`KINDS`), None for a reason
    that is a status or an instruction already."""
    if rule:
        return "rule"
    if not reason or _NO_HINT.match(reason):
        return None
    for kind, pattern in _PATTERNS:
        if pattern.search(reason):
            return kind
    return "default"


def shorten(reason: str, limit: int) -> str:
    """``reason`` within ``limit`` characters, cut in its middle: its beginning names the call, its
    end holds the learner's value ("yours is ...", "got ..."), and both are worth more than the rest."""
    if len(reason) <= limit:
        return reason
    head = (limit - 1) * 2 // 5
    return reason[:head] + "…" + reason[len(reason) - (limit - 1 - head):]


def add(reason: str, hints: dict[str, str] | None, *, rule: bool = False, limit: int = 600) -> str:
    """``reason`` ending with the exercise's hint for its kind of failure (or the ``default`` one);
    ``reason`` is cut first (:func:`shorten`) where both would pass ``limit`` characters, so the hint is never lost."""
    kind = kind_of(reason, rule=rule)
    specific = (hints or {}).get(kind or "", "")
    hint = specific or ((hints or {}).get("default", "") if kind else "")
    if not hint or LEAD.strip() in reason:
        return reason
    if specific:  # the exercise's own advice replaces the checks' general one
        reason = GENERIC.sub("", reason)
    reason = shorten(reason, max(limit - len(LEAD) - len(hint) - 1, 80))
    if not reason.endswith((".", "!", "?", "…")):
        reason += "."
    return reason + LEAD + hint
