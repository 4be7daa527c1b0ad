"""Cell predicates: the one place that reads a cell's ``nbgrader`` metadata or tags."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from nbformat import NotebookNode

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
#: A debugging exercise's answer cell: the buggy code the release shows instead of the solution,
#: commented out in the source after the solution region (grader.prepare.stubs).
BEGIN_STUB = "### BEGIN STUB"
END_STUB = "### END STUB"

#: What an unsolved answer raises in the release (nbgrader's ClearSolutions stub).
STUB_MESSAGE = "not solved yet: replace this line with your answer"
CODE_STUB = f'# YOUR CODE HERE\nraise NotImplementedError("{STUB_MESSAGE}")'

#: First line the release writes into every answer and test cell, so that a cell can be
#: recognised even when an editor dropped its metadata (see grader.prepare.preprocessors).
MARKER_RE = re.compile(r"^# \[(?P<kind>answer|tests): (?P<grade_id>[A-Za-z0-9_.-]+)\]")
MARKER_TEXT = {
    "answer": "# [answer: {grade_id}] keep this line; write your answer below it",
    "tests": "# [tests: {grade_id}] locked: run this cell to check your answer",
}


def nbgrader_meta(cell: NotebookNode) -> dict[str, Any]:
    """The cell's ``nbgrader`` metadata (an empty dict when it has none)."""
    meta = cell.get("metadata", _ABSENT).get("nbgrader", _ABSENT)
    return meta if isinstance(meta, dict) and meta is not _ABSENT else {}


_ABSENT: dict = {}  # never handed out: a cell without the metadata gets a dict of its own


def grade_id(cell: NotebookNode) -> str | None:
    """The cell's nbgrader ``grade_id``, or None."""
    return nbgrader_meta(cell).get("grade_id")


def is_solution(cell: NotebookNode) -> bool:
    """An answer cell: the learner writes code in it."""
    return bool(nbgrader_meta(cell).get("solution", False))


def is_graded(cell: NotebookNode) -> bool:
    """A graded cell: it carries points (for us: an autograded test cell)."""
    return bool(nbgrader_meta(cell).get("grade", False))


def is_test(cell: NotebookNode) -> bool:
    """An autograded test cell: a graded code cell that is not an answer cell."""
    if cell.get("cell_type") != "code":
        return False
    meta = nbgrader_meta(cell)  # read once: a notebook's cells are asked this many times a submission
    return bool(meta.get("grade", False)) and not meta.get("solution", False)


def is_locked(cell: NotebookNode) -> bool:
    """A cell the learner must not edit."""
    return bool(nbgrader_meta(cell).get("locked", False))


def points(cell: NotebookNode) -> float:
    """Points of a graded cell (0 for any other cell)."""
    return float(nbgrader_meta(cell).get("points", 0) or 0) if is_graded(cell) else 0.0


#: The tag of a deep dive's cells; a test cell that carries it is a practice exercise's (:func:`is_practice`).
OPTIONAL = "optional"


def is_practice(cell: NotebookNode) -> bool:
    """A practice exercise's test cell: in an optional section, graded for feedback, worth no points."""
    return is_test(cell) and has_tag(cell, OPTIONAL)


def is_practice_result(test: dict) -> bool:
    """A practice test's result (a report's test dict): graded for feedback, its ``max_points`` 0."""
    return not float(test.get("max_points") or 0)


def has_tag(cell: NotebookNode, tag: str) -> bool:
    """Whether the cell carries the given tag (e.g. ``parameters``)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and tag in tags


def add_tag(cell: NotebookNode, tag: str) -> None:
    """Add a tag to the cell (no-op when present)."""
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if tag not in tags:
        tags.append(tag)


def set_nbgrader_meta(cell: NotebookNode, meta: dict[str, Any]) -> None:
    """Replace the cell's ``nbgrader`` metadata."""
    cell.setdefault("metadata", NotebookNode())["nbgrader"] = NotebookNode(meta)


def source_text(cell: NotebookNode) -> str:
    """The cell's source as one string (nbformat allows a list of lines on disk)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def marker(cell: NotebookNode) -> tuple[str, str] | None:
    """``(kind, grade_id)`` of the release marker on the cell's first line, or None."""
    text = source_text(cell)
    start = 0
    while text.startswith("\n", start):  # the first line that is not empty
        start += 1
    if not text.startswith("# [", start):  # what every marker begins with: most cells end here
        return None
    end = text.find("\n", start)
    m = MARKER_RE.match(text[start:end] if end >= 0 else text[start:])
    return (m["kind"], m["grade_id"]) if m else None


def marker_line(kind: str, gid: str) -> str:
    """The marker line the release writes for an answer (``kind='answer'``) or test cell."""
    return MARKER_TEXT[kind].format(grade_id=gid)


def split_hidden(source: str) -> tuple[str, str]:
    """Split a test cell's source into (visible part, hidden part without the delimiters)."""
    if BEGIN_HIDDEN not in source:
        return source, ""
    visible, rest = source.split(BEGIN_HIDDEN, 1)
    hidden, _, after = rest.partition(END_HIDDEN)
    return visible + after, hidden


def parameters_cell_index(nb: NotebookNode) -> int | None:
    """Index of the cell tagged ``parameters``, or None."""
    for i, cell in enumerate(nb.cells):
        if has_tag(cell, "parameters"):
            return i
    return None


def checksum(source: str, cell_type: str, meta: dict[str, Any]) -> str:
    """nbgrader's checksum of a cell (``nbgrader.utils.compute_checksum``) from its source, type and
    ``nbgrader`` metadata, without nbgrader: what the release records on every graded, answer and
    locked cell, and what ``cu.submit()`` compares against."""
    grade, solution = meta.get("grade", False), meta.get("solution", False)
    locked = False if solution else True if grade else meta.get("locked", False)
    parts = [source, cell_type, str(grade), str(solution), str(locked), str(meta["grade_id"])]
    if grade:
        parts.append(str(float(meta["points"])))
    digest = hashlib.md5()
    for part in parts:
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()
