"""Committed notebooks carry no outputs, no execution counts and only allow-listed metadata."""

from __future__ import annotations

from pathlib import Path

import nbformat

from grader import project
from grader.prepare.preprocessors import StripMetadata
from grader.prepare.release import dumps

#: ``course``: the course's own cell notes (``claims_ok``, read by ci/claim_lint.py); the release drops it
ALLOWED_CELL_KEYS = ("nbgrader", "tags", "editable", "deletable", "course")
ALLOWED_NOTEBOOK_KEYS = ("kernelspec", "language_info", "course")  # course: what cu.submit() checks


def committed_notebooks(root: Path = project.ROOT) -> list[Path]:
    """The notebooks under solutions/ and notebooks/."""
    return sorted((root / "solutions").glob("*/*.ipynb")) + sorted((root / "notebooks").glob("*/*.ipynb"))


def problems(path: Path) -> list[str]:
    """What is wrong with one committed notebook (empty when it is clean)."""
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:
        return [f"{path}: not a readable notebook ({exc})"]
    found = []
    extra = sorted(set(nb.metadata) - set(ALLOWED_NOTEBOOK_KEYS))
    if extra:
        found.append(f"{path}: notebook metadata {extra} is not allowed")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.get("outputs"):
            found.append(f"{path}: cell {i} has outputs")
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            found.append(f"{path}: cell {i} has an execution count")
        extra = sorted(set(cell.get("metadata", {})) - set(ALLOWED_CELL_KEYS))
        if extra:
            found.append(f"{path}: cell {i} has metadata {extra}")
        if cell.get("attachments"):
            found.append(f"{path}: cell {i} has attachments")
    return found


def clean(path: Path) -> bool:
    """Strip outputs and stray metadata in place; returns whether the file changed."""
    before = path.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    nb, _ = StripMetadata(cell_keys=list(ALLOWED_CELL_KEYS), notebook_keys=list(ALLOWED_NOTEBOOK_KEYS)).preprocess(nb, {})
    after = dumps(nb)
    if after != before:
        path.write_text(after, encoding="utf-8")
        return True
    return False
