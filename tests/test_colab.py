"""The Colab path: every released notebook opens itself in Colab at the release tag and installs that
release there; a failed install stops the chapter in one line. pyproject's [tool.course] says where."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from grader import cells, project
from grader.prepare import publish, release

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
BADGE_RE = re.compile(r"^\[!\[Open In Colab\]\((?P<img>[^)]+)\)\]\((?P<url>[^)]+)\)")
RELEASED = sorted((ROOT / "notebooks").glob("*/*.ipynb"))
CHAPTER_01 = project.source_notebook("01_tensors")
GIT = ["git", "-c", "user.name=Course", "-c", "user.email=course@example.org", "-c", "init.defaultBranch=main"]


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


def test_where_the_course_is_published_is_one_github_repository_and_a_tag():
    pub = publish.current()
    assert publish.GITHUB_RE.fullmatch(pub.repository), pub.repository
    assert publish.TAG_RE.fullmatch(pub.tag), pub.tag
    text = "\n".join(p.read_text() for p in [ROOT / "CONTRIBUTING.md", *project.sources().values()])
    assert pub.tag not in text, "the tag is written by `course release`, never by hand in a source or the guide"


@pytest.mark.parametrize("which", CASES)
def test_first_cell_has_an_open_in_colab_badge_for_this_very_notebook_at_the_tag(request, which):
    path, root = released(request, which)
    nb = release.read(path)
    first = nb.cells[0]
    assert first.cell_type == "markdown", "the first cell must be the markdown cell with the badge"
    match = BADGE_RE.match(cells.source_text(first))
    assert match, f"{path}: the first cell does not start with an Open In Colab badge"
    relative = path.relative_to(root).as_posix()  # notebooks/<chapter>/<file>
    assert relative.startswith("notebooks/")
    assert match["url"] == publish.current().colab_url(relative)
    assert f"/blob/{publish.current().tag}/notebooks/" in match["url"]
    assert match["img"] == "https://colab.research.google.com/assets/colab-badge.svg"
    text = "\n".join(cells.source_text(c) for c in nb.cells)
    assert text.count("colab.research.google.com/github/") == 1, "one badge per notebook"


@pytest.mark.parametrize("which", [c for c in CASES if c != "mini"])
def test_on_colab_the_release_installs_the_tagged_course(request, which):
    path, _ = released(request, which)
    nb = release.read(path)
    setup = cells.source_text(nb.cells[cells.parameters_cell_index(nb) + 1])
    assert publish.install_block(publish.current()) in setup
    assert f'COURSE = "{publish.current().requirement}"' in setup


@pytest.mark.parametrize("repository, tag, says", [
    ("https://github.com/OWNER/REPO", "v0.1.0", "placeholder"),
    ("https://github.com/your-org/course", "v0.1.0", "placeholder"),
    ("https://gitlab.com/a/b", "v0.1.0", "not https://github.com/OWNER/REPO"),
    ("https://github.com/a/course", "vX.Y.Z", "placeholder"),
    ("https://github.com/a/course", "v9.9.9", "has no tag v9.9.9"),
])
def test_check_release_refuses_a_placeholder_and_a_tag_the_repository_lacks(tagged_repo, repository, tag, says):
    found = publish.problems(publish.Publication(repository, tag), [], root=tagged_repo)
    assert any(says in line for line in found), found


def test_a_tag_the_repository_has_with_every_released_notebook_passes(tagged_repo):
    pub = publish.Publication("https://github.com/a/course", "v0.1.0")
    assert publish.problems(pub, ["pyproject.toml"], root=tagged_repo) == []
    missing = publish.problems(pub, ["notebooks/09_new/new.ipynb"], root=tagged_repo)
    assert missing == ["notebooks/09_new/new.ipynb: not in tag v0.1.0, so its badge opens nothing"]


def test_the_tag_follows_the_version_of_the_course(tagged_repo):
    assert publish.current().tag == f"v{project.version()}" == f"v{publish.current().version}"
    pub = publish.Publication("https://github.com/a/course", "v0.1.0", version="0.2.0")
    assert publish.problems(pub, [], root=tagged_repo) == [
        "[tool.course] tag 'v0.1.0' is not v<version> (version 0.2.0): bump both together"]


def test_a_checkout_without_git_cannot_vouch_for_a_tag(tmp_path):
    pub = publish.Publication("https://github.com/a/course", "v0.1.0")
    (found,) = publish.problems(pub, [], root=tmp_path)
    assert "not a git checkout" in found


# ---------------------------------------------------------------------------- Colab, as far as here


@pytest.fixture(scope="module")
def tagged_repo(tmp_path_factory) -> Path:
    """A git repository holding this course's package at tag v0.1.0 (what a release publishes)."""
    repo = tmp_path_factory.mktemp("published") / "course"
    repo.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, repo / name)
    for package in ("course_utils", "grader"):
        shutil.copytree(ROOT / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release"], ["tag", "v0.1.0"]):
        subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True)
    return repo


@pytest.fixture(scope="module")
def colab_python(tmp_path_factory) -> Path:
    """A fresh virtualenv that looks like Colab to a setup cell: the marker module ``google.colab``,
    torch and the scientific stack already there (this venv's, linked), the course not installed."""
    venv = tmp_path_factory.mktemp("colab") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    ours = Path(sysconfig.get_path("purelib"))
    skip = re.compile(r"^(pytorch_foundations|__editable__|course_utils|grader)\b")
    for entry in ours.iterdir():
        if not skip.match(entry.name) and not (site / entry.name).exists():
            (site / entry.name).symlink_to(entry)
    marker = site / "google" / "colab"
    marker.mkdir(parents=True)
    (marker / "__init__.py").write_text('"""Stands for Colab\'s own module: the setup cell only looks for its name."""\n')
    return python


def run_cells(python: Path, sources: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run code cells one after another in an IPython shell of ``python``, as Colab's kernel would
    (``google.colab`` imported first); stops at the first cell that fails."""
    script = (
        "import google.colab, json, sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "import matplotlib; matplotlib.use('Agg')\n"
        "shell = InteractiveShell.instance()\n"
        f"for source in json.loads({json.dumps(json.dumps(sources))}):\n"
        "    if not shell.run_cell(source).success:\n"
        "        sys.exit(3)\n"
        "import course_utils; print('course_utils from', course_utils.__file__)\n"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    # offline: pip builds the course with the setuptools already there instead of fetching one
    environ.update({"PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "MPLBACKEND": "Agg",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1"}, **(env or {}))
    return subprocess.run([str(python), "-c", script], cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=300)


def first_cells(tagged_repo: Path, tag: str, count: int) -> list[str]:
    """Chapter 01's first ``count`` code cells as released for the local repository at ``tag`` (FAST)."""
    pub = publish.Publication(f"file://localhost{tagged_repo}", tag)  # a host: pip reads file:/// as a path
    nb = release.build_release("01_tensors", CHAPTER_01, publication=pub)
    code = [cells.source_text(c) for c in nb.cells if c.cell_type == "code"]
    return [*code[:1], "FAST = True", *code[1:count]]


@pytest.mark.slow
def test_in_a_colab_like_runtime_the_setup_cell_installs_the_tagged_course_and_the_chapter_runs(
        colab_python, tagged_repo, tmp_path):
    done = run_cells(colab_python, first_cells(tagged_repo, "v0.1.0", 4), tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^torch \S+ \| device: cpu \| seed: 0 \| Colab$", done.stdout, re.M), done.stdout
    installed = done.stdout.rsplit("course_utils from ", 1)[1].strip()
    assert installed.startswith(str(colab_python.parent.parent)), f"course_utils came from {installed}"


@pytest.mark.slow
def test_a_failed_colab_install_stops_the_chapter_in_one_line_without_a_traceback(
        colab_python, tagged_repo, tmp_path):
    done = run_cells(colab_python, first_cells(tagged_repo, "v9.9.9", 4), tmp_path)
    assert done.returncode == 3, "the chapter went on after the install failed"
    shown = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(shown) == 1, shown
    assert shown[0].startswith("Setup stopped: pip could not install the course helpers from git+file://localhost/")
    assert "@v9.9.9" in shown[0] and "Run all again" in shown[0] and "Traceback" not in shown[0]
    assert "(error: pathspec 'v9.9.9' did not match" in shown[0], "git's reason, not pip's closing note"
