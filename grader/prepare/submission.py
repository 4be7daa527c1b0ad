"""Preparing a submission: read it, check it is this chapter's, sanitise it, put the grader's tests in.

Runs in the coordinator, before execution. Nothing here runs learner code.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import nbformat
from nbformat import NotebookNode
from nbformat.reader import get_version
from nbformat.v4.nbbase import random_cell_id
from nbformat.v4.rwbase import rejoin_lines, strip_transient

from grader import cells, jsonio
from grader.prepare import pipeline
from grader.prepare.integrity import Finding, scan
from grader.prepare.preprocessors import RestoreCells
from grader.verdict import instrument

if TYPE_CHECKING:
    from grader.record.gradebook import ChapterCells
from grader.prepare.parameters import grading_notebook

log = logging.getLogger(__name__)


def read_submission(path: Path) -> NotebookNode:
    """Read a submitted notebook, upgrading old nbformat versions.

    What ``nbformat.reads(text, as_version=4)`` does (the format's version read from the file,
    the notebook upgraded, then validated, invalid JSON for the format only logged), from JSON
    parsed once: parsing is most of what reading a notebook with outputs costs.

    Raises:
        ValueError: with a sentence saying what is wrong with the file.
    """
    raw = path.read_bytes()
    if not raw.strip():
        raise ValueError("the file is empty")
    try:
        data = jsonio.loads(raw.decode("utf-8-sig"))  # Windows editors may write a byte-order mark
    except UnicodeDecodeError as exc:
        raise ValueError(f"the file is not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        if exc.msg == jsonio.TOO_DEEP:
            raise ValueError("the file's JSON is nested too deeply to be a notebook") from None
        raise ValueError(f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        raise ValueError("the file is JSON but not a Jupyter notebook")
    try:
        major, minor = get_version(data)
        if major not in nbformat.versions:
            raise nbformat.NBFormatError(f"Unsupported nbformat version {major}")
        if major == 4:
            _join_sources(data)
        try:
            nb = (strip_transient(rejoin_lines(_node(data))) if major == 4  # what v4's to_notebook_json does
                  else nbformat.versions[major].to_notebook_json(data, minor=minor))
        except AttributeError as exc:
            raise nbformat.ValidationError(f"The notebook is invalid and is missing an expected key: {exc}") from None
        nb = nbformat.convert(nb, 4)
        _validate(nb)
    except Exception as exc:
        raise ValueError(f"the notebook could not be read ({type(exc).__name__}: {exc})") from None
    return nb


def _node(data: dict) -> NotebookNode:
    """nbformat's ``from_dict`` for parsed JSON (dicts, lists and plain values): the same nodes, without
    a call for every plain value (most of a notebook's values)."""
    return NotebookNode({k: _node(v) if type(v) is dict else _nodes(v) if type(v) is list else v for k, v in data.items()})


def _nodes(items: list) -> list:
    return [_node(v) if type(v) is dict else _nodes(v) if type(v) is list else v for v in items]


def _join_sources(data: dict) -> None:
    """Each cell's source given as a list of lines (as files hold it) joined into one string, before
    nbformat makes a node of every line and joins them itself (``rejoin_lines``): the same notebook,
    without the nodes that cost most of reading it. Anything else is left to nbformat, its errors too."""
    notebook_cells = data.get("cells")
    if not isinstance(notebook_cells, list):
        return
    for cell in notebook_cells:
        source = cell.get("source") if isinstance(cell, dict) else None
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            cell["source"] = "".join(source)


#: cells found valid, per (nbformat, nbformat_minor), as their sorted JSON
_VALID_CELLS: dict[tuple[int, int], set[bytes]] = {}
MAX_VALID_CELLS = 8192  # distinct valid cells remembered; past it, forgotten and found again


def _validate(nb: NotebookNode) -> None:
    """What ``nbformat.validate`` does when reading: cell ids repaired (nbformat >= 4.5: a missing
    or repeated id gets a new one), the notebook checked against its schema, an error only logged.

    A batch's notebooks are mostly the release's cells again: a cell found valid is remembered,
    and only the top level and the cells not seen before are checked (a tenth of the time on a
    chapter-01 submission). When something is invalid, the whole notebook is checked again, so
    the error logged is the one nbformat gives.
    """
    version = (nb.get("nbformat"), nb.get("nbformat_minor"))
    notebook_cells = nb.get("cells")
    if not isinstance(notebook_cells, list) or not all(isinstance(v, int) for v in version):
        return _log_invalid(nb)
    if version >= (4, 5):
        try:
            _repair_ids(notebook_cells)
        except (TypeError, AttributeError):  # a cell that is not a dict, an id that is not hashable:
            return _log_invalid(nb)  # nbformat meets the same and raises it
    valid = _VALID_CELLS.setdefault(version, set())
    keys = [jsonio.dumps(cell, sort_keys=True) for cell in notebook_cells]
    fresh = [cell for cell, key in zip(notebook_cells, keys, strict=True) if key not in valid]
    skeleton = {k: v for k, v in nb.items() if k != "cells"}
    skeleton["cells"] = fresh
    try:
        nbformat.validate(skeleton)
    except nbformat.ValidationError:
        return _log_invalid(nb)
    if len(valid) + len(keys) > MAX_VALID_CELLS:
        valid.clear()
    valid.update(keys)


def _repair_ids(notebook_cells: list) -> None:
    """nbformat's repair, in its order: a cell without an id gets one, then a repeated id is replaced."""
    for cell in notebook_cells:
        if "id" not in cell:
            cell["id"] = random_cell_id()
    seen = set()
    for cell in notebook_cells:
        if cell["id"] in seen:
            cell["id"] = random_cell_id()
        seen.add(cell["id"])


def _log_invalid(nb: NotebookNode) -> None:
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        log.error("Notebook JSON is invalid: %s", exc)


def prepare(nb: NotebookNode, chapter: str, notebook: str, db_url: str, release: NotebookNode, device: str,
            tests: dict[str, instrument.TestSource], registered: ChapterCells) -> NotebookNode:
    """Sanitise a submission (restore test cells, metadata), inject the grading parameters and
    put the grader's version of every test cell in place (see :mod:`grader.verdict.instrument`).

    ``registered`` is the chapter's cells as the gradebook holds them (read once per batch, by
    the caller: preparing reads no gradebook).
    """
    known = _release_facts(release)
    resources = {
        "nbgrader": {"notebook": notebook, "assignment": chapter, "db_url": db_url},
        "course": {"release_meta": dict(known.meta), "release_ids": dict(known.ids), "pairs": dict(known.pairs),
                   "gradebook": registered},
    }
    nb, resources = pipeline.run(
        pipeline.SANITIZE, nb, resources, config={RestoreCells: {"add_missing_cells": True}}
    )
    forgotten = resources.get("course", {}).get("forgotten", [])
    if forgotten:
        nb.metadata["course_forgotten"] = forgotten
    if cells.parameters_cell_index(nb) is None:
        # papermill puts the injected parameters on top when the tagged cell is gone
        log.info("%s: the parameters cell is missing; parameters go on top", notebook)
    return grading_notebook(nb, tests, device, copy=False)


def learner_findings(nb: NotebookNode, release: NotebookNode) -> list[Finding]:
    """Suspicious code in the cells the learner wrote (answer cells and any cell added)."""
    known = _release_facts(release)
    texts, shapes = known.texts, known.shapes
    found: list[Finding] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cells.is_test(cell) or cells.has_tag(cell, "injected-parameters"):
            continue
        text = cells.source_text(cell)
        if _newlines(text) in texts or _code_shape(text) in shapes:  # a released cell, give or take
            continue  # comments and spacing
        found.extend(dataclasses.replace(f, cell_index=i) for f in _scan(text))
    return found


@functools.lru_cache(maxsize=4096)
def _scan(text: str) -> tuple[Finding, ...]:
    """:func:`grader.prepare.integrity.scan` of one cell's code, remembered: a batch meets the same cell
    text again and again (an extra ``print(x)``, an answer written as the hints put it)."""
    return tuple(scan(text))


class _Release(NamedTuple):
    """What preparing reads from a chapter's release, worked out once per release (every submission
    of a batch is prepared against the same one)."""

    release: NotebookNode
    meta: dict[str, dict]  # grade_id -> its nbgrader metadata
    ids: dict[str, str]  # cell id -> grade_id
    pairs: dict[str, str]  # a test's grade_id -> its answer's
    texts: set[str]  # the code cells' texts
    shapes: set[str]  # the code cells' code shapes
    exercise_ids: set[str]  # the grade_ids and marked ids that say which chapter a notebook is


_releases: dict[int, _Release] = {}
MAX_RELEASES = 64  # releases remembered (a batch has one per chapter); past it, forgotten and worked out again


def _release_facts(release: NotebookNode) -> _Release:
    known = _releases.get(id(release))
    if known is not None and known.release is release:
        return known
    meta = {cells.grade_id(c): cells.nbgrader_meta(c) for c in release.cells if cells.grade_id(c)}
    ids = {c.id: cells.grade_id(c) for c in release.cells if cells.grade_id(c) and c.get("id")}
    pairs, answer = {}, None
    for c in release.cells:
        if cells.is_solution(c):
            answer = cells.grade_id(c)
        elif cells.is_test(c) and answer:
            pairs[cells.grade_id(c)] = answer
    sources = [cells.source_text(c) for c in release.cells if c.cell_type == "code"]
    known = _Release(release, meta, ids, pairs, {_newlines(s) for s in sources}, {_code_shape(s) for s in sources},
                     _exercise_ids(release))
    if len(_releases) >= MAX_RELEASES:
        _releases.clear()
    _releases[id(release)] = known
    return known


def _newlines(source: str) -> str:
    return source.replace("\r\n", "\n").replace("\r", "\n")


@functools.lru_cache(maxsize=4096)
def _code_shape(source: str) -> str:
    """The code of a cell without its comments, blank lines, spacing or line-ending style."""
    text = _newlines(source)
    try:
        return ast.dump(ast.parse(text))
    except SyntaxError:
        return text.strip()


def chapter_belongs(nb: NotebookNode, release: NotebookNode, others: dict[str, NotebookNode]) -> str | None:
    """None when ``nb`` is a notebook of the release's chapter, else a sentence saying why not."""
    mine, theirs = _release_facts(release).exercise_ids, _exercise_ids(nb)
    if mine & theirs or not theirs:
        return None
    for chapter, other in others.items():
        if _release_facts(other).exercise_ids & theirs:
            return f"this is a notebook of chapter {chapter}, not of this chapter"
    return "no exercise of this chapter was found in the notebook"


def _exercise_ids(notebook: NotebookNode) -> set[str]:
    """The grade_ids of a notebook's cells, and the ids their release markers name."""
    out = set()
    for c in notebook.cells:
        gid = cells.grade_id(c)
        if gid:
            out.add(gid)
        m = cells.marker(c)
        if m:
            out.add(m[1])
    return out
