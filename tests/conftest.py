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


@pytest.fixture(autouse=True)
def _close_figures():
    """Each test's matplotlib figures are closed after it (pictures' tests draw many)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


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


@pytest.fixture(scope="session")
def grade_batch(tmp_path_factory):
    """``grade.main`` for the batches of real chapters, their reference runs shared by the session:
    a chapter's solution runs once per engine and options, not once per module. Each workspace
    starts with the references earlier batches of the same options made (the grader takes one
    only where its fingerprint matches: same source, options, engine, grader) and adds its own."""
    store = tmp_path_factory.mktemp("references")

    def run(submissions: Path, workdir: Path, **options):
        from grader import grade

        group = store / "-".join(f"{k}={v}" for k, v in sorted(options.items()) if k != "jobs").replace("/", "_")
        mine = Path(workdir) / "reference"
        if group.is_dir():
            shutil.copytree(group, mine, dirs_exist_ok=True)
        reports = grade.main(submissions, workdir, **options)
        if mine.is_dir():
            shutil.copytree(mine, group, dirs_exist_ok=True)
        return reports

    return run
