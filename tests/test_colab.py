"""The Colab path: every released notebook opens itself in Colab and installs this release there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader import cells, project
from grader.prepare import release

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
BADGE_RE = re.compile(r"^\[!\[Open In Colab\]\((?P<img>[^)]+)\)\]\((?P<url>[^)]+)\)")
RELEASED = sorted((ROOT / "notebooks").glob("*/*.ipynb"))


@pytest.fixture(scope="module")
def mini_release(tmp_path_factory) -> Path:
    """The mini course released into a temporary repository root (always checked)."""
    root = tmp_path_factory.mktemp("repo")
    (path,) = release.main(["00_mini"], solutions_dir=MINI, notebooks_dir=root / "notebooks")
    return path


def released(request, which: str) -> tuple[Path, Path]:
    """(notebook path, the repository root its badge's path is relative to)."""
    if which == "mini":
        path = request.getfixturevalue("mini_release")
        return path, path.parent.parent.parent
    return ROOT / which, ROOT


CASES = ["mini"] + [str(p.relative_to(ROOT)) for p in RELEASED]


def test_the_repository_is_on_github():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", project.repository_url()), project.repository_url()


@pytest.mark.parametrize("which", CASES)
def test_first_cell_has_an_open_in_colab_badge_for_this_very_notebook(request, which):
    path, root = released(request, which)
    nb = release.read(path)
    first = nb.cells[0]
    assert first.cell_type == "markdown", "the first cell must be the markdown cell with the badge"
    match = BADGE_RE.match(cells.source_text(first))
    assert match, f"{path}: the first cell does not start with an Open In Colab badge"
    owner_repo = project.repository_url().removeprefix("https://github.com/")
    relative = path.relative_to(root).as_posix()  # notebooks/<chapter>/<file>
    assert relative.startswith("notebooks/")
    assert match["url"] == f"https://colab.research.google.com/github/{owner_repo}/blob/main/{relative}"
    assert match["img"] == "https://colab.research.google.com/assets/colab-badge.svg"
    text = "\n".join(cells.source_text(c) for c in nb.cells)
    assert text.count("colab.research.google.com/github/") == 1, "one badge per notebook"


@pytest.mark.parametrize("which", [c for c in CASES if c != "mini"])
def test_on_colab_the_release_installs_the_tagged_course(request, which):
    path, _ = released(request, which)
    nb = release.read(path)
    setup = cells.source_text(nb.cells[cells.parameters_cell_index(nb) + 1])
    pin = f"pytorch-foundations @ git+{project.repository_url()}@v{project.version()}"
    assert 'if "google.colab" in sys.modules' in setup and pin in setup
