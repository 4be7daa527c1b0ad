"""The grading parameters put in as papermill does, and the grader's version of each test cell.

A prepared submission and a reference run get the same: ``DEVICE``, ``SEED`` and ``FAST`` injected
after the cell tagged ``parameters`` (found again where an editor dropped its tag), every cell an
id, and each test cell replaced by its instrumented version (:mod:`grader.verdict.instrument`).
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbformat.v4.nbbase import random_cell_id

from grader import cells
from grader.verdict import instrument

log = logging.getLogger(__name__)


def grading_notebook(nb: NotebookNode, tests: dict[str, instrument.TestSource], device: str, *,
                     copy: bool = True) -> NotebookNode:
    """``nb`` with the grading parameters injected and the grader's test cells in place (in a
    copy of ``nb``, or, with ``copy=False``, in ``nb`` itself, which the caller gives up)."""
    if copy:
        nb = nbformat.from_dict(nb)
    if cells.parameters_cell_index(nb) is None:  # an editor dropped the tag: find the cell itself
        found = next((c for c in nb.cells if _is_parameters(c)), None)
        if found is not None:
            cells.add_tag(found, "parameters")
    for i, cell in enumerate(nb.cells):
        if not cell.get("id"):
            cell["id"] = f"restored-{i}"
    inject_parameters(nb, {"DEVICE": device, "SEED": 0, "FAST": True})
    return instrument.apply(nb, tests)


@functools.lru_cache(maxsize=8)
def _parameters_cell(parameters: str) -> NotebookNode:
    """The cell papermill injects for ``parameters`` (a JSON object), built and validated once."""
    from papermill.translators import translate_parameters

    cell = nbformat.v4.new_code_cell(source=translate_parameters("python3", "python", json.loads(parameters)))
    cell.metadata["tags"] = ["injected-parameters"]
    return cell


def inject_parameters(nb: NotebookNode, parameters: dict[str, Any]) -> None:
    """What papermill's loader and ``parameterize_notebook`` do to ``nb`` (in place), with the injected
    cell built once per set of parameters rather than validated anew for every submission: the
    cell goes in place of an injected-parameters cell, else right after the cell tagged
    ``parameters``, else on top; the parameters are recorded in the notebook's metadata."""
    # papermill's loader gives every notebook these keys, and its injection relies on them
    nb.metadata.setdefault("papermill", NotebookNode()).setdefault("parameters", NotebookNode())
    for c in nb.cells:
        c.setdefault("metadata", NotebookNode()).setdefault("tags", [])
    nbformat.v4.upgrade(nb)
    cell = nbformat.from_dict(_parameters_cell(json.dumps(parameters)))  # in their order, as papermill writes them
    cell["id"] = random_cell_id()
    tagged = [next((i for i, c in enumerate(nb.cells) if tag in c.metadata.tags), -1)
              for tag in ("injected-parameters", "parameters")]
    if tagged[0] >= 0:
        nb.cells[tagged[0]] = cell
    elif tagged[1] >= 0:
        nb.cells.insert(tagged[1] + 1, cell)
    else:
        log.warning("Input notebook does not contain a cell with tag 'parameters'")
        nb.cells.insert(0, cell)
    nb.metadata.papermill["parameters"] = parameters


def _is_parameters(cell: NotebookNode) -> bool:
    """A code cell that only assigns DEVICE, SEED and FAST (the chapter's parameters cell)."""
    import ast

    if cell.get("cell_type") != "code":
        return False
    try:
        body = ast.parse(cells.source_text(cell).replace("\r\n", "\n")).body
    except SyntaxError:
        return False
    names = set()
    for stmt in body:
        if not isinstance(stmt, ast.Assign) or not all(isinstance(t, ast.Name) for t in stmt.targets):
            return False
        names |= {t.id for t in stmt.targets}
    return bool(body) and names <= {"DEVICE", "SEED", "FAST"} and len(names) >= 2
