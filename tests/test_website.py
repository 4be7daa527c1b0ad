"""ci/website.py (`make site`): the course as a static website, built offline from the executed release,
with every exercise's statement, the demos' pictures, an "Open in Colab" link per chapter, search, and
no line of a solution or hidden test anywhere in it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import website

from grader.prepare import publish, release

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
CACHE = ROOT / "build" / "site" / "executed"  # executions are reused across builds (keyed by content)


@pytest.fixture(scope="module")
def mini_site(tmp_path_factory) -> tuple[Path, Path]:
    """The mini course's site (its release executed FAST): (the html folder, its solutions)."""
    tmp = tmp_path_factory.mktemp("site")
    solutions = tmp / "solutions"
    shutil.copytree(MINI, solutions)
    notebooks = tmp / "notebooks"
    release.main(["00_mini"], solutions_dir=solutions, notebooks_dir=notebooks)
    html_dir = website.build(["00_mini"], fast=True, jobs=1, out=tmp / "site", solutions_dir=solutions,
                             notebooks_dir=notebooks, cache=tmp / "executed")
    return html_dir, solutions


def test_a_chapter_page_shows_its_statements_outputs_and_colab_link_and_the_site_has_search(mini_site):
    html_dir, _ = mini_site
    page = (html_dir / "00_mini.html").read_text()
    assert "Exercise 1 — double (4 points)" in page and "Exercise 2 — row sums (6 points)" in page
    assert "torch " in page and "| device: cpu | seed: 0 | local" in page, "the setup cell's output is shown"
    assert f'href="{publish.current().colab_url("notebooks/00_mini/mini.ipynb")}"' in page
    assert "Traceback" not in page, "an unsolved stub's error is no part of the page"
    assert "An Exception was encountered" not in page and "colab-badge.svg" not in page
    assert "injected-parameters" not in page and "FAST = True" not in page
    assert (html_dir / "search.html").is_file() and "00_mini" in (html_dir / "searchindex.js").read_text()
    assert "00_mini.html" in (html_dir / "index.html").read_text()


def test_the_leak_check_finds_a_solution_line_planted_in_a_page_or_any_file(mini_site):
    html_dir, solutions = mini_site
    sources = {"00_mini": solutions / "00_mini" / "mini.ipynb"}
    releases = {"00_mini": solutions.parent / "notebooks" / "00_mini" / "mini.ipynb"}
    assert website.leaks(html_dir, sources, releases) == []
    page = html_dir / "00_mini.html"
    kept = page.read_text()
    planted = html_dir / "_static" / "planted.js"
    try:
        page.write_text(kept + "<pre><span>return</span> <span>X.sum(dim=1, keepdim=True)</span></pre>\n")
        planted.write_text("var hidden = 1;\ncheck_tensor(double(torch.arange(5)), torch.arange(0, 10, 2), name=\"double(arange(5))\")\n")
        found = website.leaks(html_dir, sources, releases)
    finally:
        page.write_text(kept)
        planted.unlink()
    assert len(found) == 2 and found[0].startswith("00_mini.html: shows a line of a solution or hidden test")
    assert "keepdim=True" in found[0] and found[1].startswith("_static/planted.js: shows a line")


def test_chapter_01_s_page_has_its_pictures_and_exercises_and_leaks_nothing(tmp_path):
    html_dir = website.build(["01_tensors"], fast=True, jobs=1, out=tmp_path / "site", cache=CACHE)
    page = (html_dir / "01_tensors.html").read_text()
    assert page.count("<img") >= 2 and len(list((html_dir / "_images").glob("*.png"))) >= 2
    assert "Exercise 1 — Puzzle: a checkerboard (20 points)" in page
    assert website.leaks(html_dir, {"01_tensors": ROOT / "solutions" / "01_tensors" / "tensors.ipynb"},
                         {"01_tensors": ROOT / "notebooks" / "01_tensors" / "tensors.ipynb"}) == []
