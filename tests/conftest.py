"""Shared fixtures: a tiny two-exercise course the grader tests run on, and helpers."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
sys.path.insert(0, str(ROOT / "ci"))


@pytest.fixture
def mini_solutions(tmp_path: Path) -> Path:
    """A private copy of the mini course's solutions/ (tests may edit it)."""
    dest = tmp_path / "solutions"
    shutil.copytree(MINI, dest)
    return dest


@pytest.fixture
def subs(tmp_path: Path) -> Path:
    """A class of one for the CLI tests: alice's untouched mini chapter (nothing here ever runs it)."""
    import nbformat

    path = tmp_path / "subs" / "alice" / "00_mini" / "mini.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.read(str(MINI / "00_mini" / "mini.ipynb"), as_version=4), str(path))
    return tmp_path / "subs"
