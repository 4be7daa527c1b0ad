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

import nbformat
from nbformat import NotebookNode
from nbformat.reader import get_version

from grader import cells, instrument, pipeline, reference
from grader import gradebook as gbmod
from grader.integrity import Finding, scan
from grader.preprocessors import RestoreCells

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
        data = json.loads(raw.decode("utf-8-sig"))  # Windows editors may write a byte-order mark
    except UnicodeDecodeError as exc:
        raise ValueError(f"the file is not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        raise ValueError("the file is JSON but not a Jupyter notebook")
    try:
        major, minor = get_version(data)
        if major not in nbformat.versions:
            raise nbformat.NBFormatError(f"Unsupported nbformat version {major}")
        try:
            nb = nbformat.versions[major].to_notebook_json(data, minor=minor)
        except AttributeError as exc:
            raise nbformat.ValidationError(f"The notebook is invalid and is missing an expected key: {exc}") from None
        nb = nbformat.convert(nb, 4)
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError as exc:
            log.error("Notebook JSON is invalid: %s", exc)
    except Exception as exc:
        raise ValueError(f"the notebook could not be read ({type(exc).__name__}: {exc})") from None
    return nb


def prepare(nb: NotebookNode, chapter: str, notebook: str, db_url: str, release: NotebookNode, device: str,
            tests: dict[str, instrument.TestSource] | None = None,
            registered: gbmod.ChapterCells | None = None) -> NotebookNode:
    """Sanitise a submission (restore test cells, metadata), inject the grading parameters and
    put the grader's version of every test cell in place (see :mod:`grader.instrument`).

    ``registered`` is the chapter's cells as the gradebook holds them (read once per batch);
    without it they are read from ``db_url`` now.
    """
    registered = registered or gbmod.chapter_cells(db_url, chapter, notebook)
    release_meta = {cells.grade_id(c): cells.nbgrader_meta(c) for c in release.cells if cells.grade_id(c)}
    release_ids = {c.id: cells.grade_id(c) for c in release.cells if cells.grade_id(c) and c.get("id")}
    pairs, answer = {}, None
    for c in release.cells:
        if cells.is_solution(c):
            answer = cells.grade_id(c)
        elif cells.is_test(c) and answer:
            pairs[cells.grade_id(c)] = answer
    resources = {
        "nbgrader": {"notebook": notebook, "assignment": chapter, "db_url": db_url},
        "course": {"release_meta": release_meta, "release_ids": release_ids, "pairs": pairs, "gradebook": registered},
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
    return reference.grading_notebook(nb, tests or {}, device)


def learner_findings(nb: NotebookNode, release: NotebookNode) -> list[Finding]:
    """Suspicious code in the cells the learner wrote (answer cells and any cell added)."""
    texts, shapes = _released_code(release)
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
    """:func:`grader.integrity.scan` of one cell's code, remembered: a batch meets the same cell
    text again and again (an extra ``print(x)``, an answer written as the hints put it)."""
    return tuple(scan(text))


_released: dict[int, tuple[NotebookNode, set[str], set[str]]] = {}


def _released_code(release: NotebookNode) -> tuple[set[str], set[str]]:
    """The release's code cells, as texts and as code shapes (worked out once per release)."""
    known = _released.get(id(release))
    if known is None or known[0] is not release:
        sources = [cells.source_text(c) for c in release.cells if c.cell_type == "code"]
        known = _released[id(release)] = (release, {_newlines(s) for s in sources}, {_code_shape(s) for s in sources})
    return known[1], known[2]


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
    def ids(notebook: NotebookNode) -> set[str]:
        out = set()
        for c in notebook.cells:
            gid = cells.grade_id(c)
            if gid:
                out.add(gid)
            m = cells.marker(c)
            if m:
                out.add(m[1])
        return out

    mine, theirs = ids(release), ids(nb)
    if mine & theirs or not theirs:
        return None
    for chapter, other in others.items():
        if ids(other) & theirs:
            return f"this is a notebook of chapter {chapter}, not of this chapter"
    return "no exercise of this chapter was found in the notebook"
