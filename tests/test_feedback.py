"""Feedback pages: inert (no script, markup or SVG from a notebook), offline (nothing fetched), lean."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import pytest

from grader import cells, project
from grader.pages import feedback
from grader.pages import markup as pages
from grader.prepare import release

MINI = Path(__file__).parent / "fixtures" / "course" / "solutions"
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8ffff3f0005fe02fea7d6a4a20000000049454e44ae426082")).decode()


def result(nb: dict, chapter: str = "00_mini", student: str = "bob") -> dict:
    tests = [{"grade_id": cells.grade_id(c), "points": 0.0, "max_points": cells.points(c), "status": "failed",
              "reason": "NotImplementedError: not answered yet", "note": ""} for c in nb["cells"] if cells.is_test(c)]
    return {"student": student, "chapter": chapter, "status": "graded", "score": 0.0,
            "max_score": sum(t["max_points"] for t in tests), "message": "", "tests": tests}


def hostile_notebook() -> dict:
    """The mini release, with everything a learner could put in a notebook to run code in a page."""
    nb = json.loads(release.dumps(release.build_release("00_mini", MINI / "00_mini" / "mini.ipynb")))
    md = ("# mine <script>alert(1)</script> <img src=x onerror=alert(2)> ![t](https://evil.example/t.png) "
          "<svg onload=alert(3)></svg> [x](javascript:alert(4)) $e^w$ <iframe src=https://evil.example></iframe>")
    outputs = [
        {"output_type": "display_data", "metadata": {}, "data": {
            "text/html": "<script>alert(5)</script>", "application/javascript": "alert(6)",
            "image/svg+xml": "<svg onload=alert(7)></svg>", "text/plain": "<Figure>"}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": PNG}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": "not base64 \" onerror=alert(8)"}},
        {"output_type": "stream", "name": "stdout", "text": "x" * 300_000},
        {"output_type": "error", "ename": "ValueError", "evalue": "<b>", "traceback": ["\x1b[31mValueError\x1b[0m: <b>"]},
    ]
    nb["cells"] = [
        {"cell_type": "markdown", "metadata": {}, "source": md},
        {"cell_type": "code", "metadata": {}, "source": "print('<script>')", "outputs": outputs, "execution_count": 1},
    ] + nb["cells"]
    return nb


def page_of(nb: dict, tmp_path: Path) -> str:
    dest = tmp_path / "course-feedback" / "bob" / "00_mini" / "mini.html"
    visible = feedback.visible_tests("00_mini", MINI / "00_mini" / "mini.ipynb")
    src = tmp_path / "autograded.ipynb"
    src.write_text(json.dumps(nb), encoding="utf-8")
    feedback.render((result(nb), str(src), visible, str(dest)))
    return dest.read_text(encoding="utf-8")


def test_nothing_a_learner_wrote_becomes_markup_or_script(tmp_path):
    page = page_of(hostile_notebook(), tmp_path)
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"html", "head", "meta", "title", "link", "body", "header", "main", "h1", "h2", "p", "div", "pre",
                    "code", "table", "thead", "tbody", "tr", "th", "td", "span", "img", "a", "ul", "li", "strong",
                    "em"}, tags
    assert "<script" not in page and "<svg" not in page and "<iframe" not in page
    assert not re.search(r"<[^>]+\son[a-z]+=", page), "no event handler attribute"
    assert "javascript:" not in re.sub(r"&lt;.*?&gt;", "", page).split("</header>")[1].replace("[x](javascript", "")
    assert re.findall(r'<img src="([^"]{0,40})', page) == [f"data:image/png;base64,{PNG[:18]}"], "only the valid PNG"
    assert "300000" not in page and "more characters not shown" in page and len(page) < 100_000
    assert "\x1b" not in page and "ValueError: &lt;b&gt;" in page


def test_a_page_loads_nothing_from_a_network(tmp_path):
    page = page_of(hostile_notebook(), tmp_path)
    assert "Content-Security-Policy" in page and "img-src data:" in page and "script-src" not in page
    assert '<link rel="stylesheet" href="../../feedback.css">' in page
    assert not re.search(r'(src|href)="(https?:)?//', page), re.findall(r'(?:src|href)="[^"]*"', page)
    assert "mathjax" not in page.lower() and "colab-badge" not in page
    assert '<code class="math">$e^w$</code>' in page, "math stays as its TeX source"


def autograded_chapter(chapter: str, tmp_path: Path) -> tuple[dict, Path, dict]:
    """A chapter's release as autograde leaves it (hidden tests inside), written to ``tmp_path``:
    (the notebook, its path, its test cells by grade_id)."""
    source = project.source_notebook(chapter)
    nb = json.loads(release.dumps(release.build_release(chapter, source)))
    graded = json.loads(source.read_text(encoding="utf-8"))
    by_id = {cells.grade_id(c): c for c in graded["cells"] if cells.is_test(c)}
    nb["cells"] = [by_id.get(cells.grade_id(c), c) if cells.is_test(c) else c for c in nb["cells"]]
    src = tmp_path / "autograded.ipynb"
    src.write_text(json.dumps(nb), encoding="utf-8")
    return nb, src, by_id


@pytest.mark.parametrize("chapter", project.chapters())
def test_a_chapter_page_is_lean_and_shows_no_hidden_test(chapter, tmp_path, monkeypatch):
    """A page is built from its result and one read of its notebook: no release is built and no
    notebook parsed per page (the visible tests come once per chapter), so its cost is the page's
    own; what it costs in milliseconds is ``benchmarks/feedback.py``'s figure, not a timed test."""
    source = project.source_notebook(chapter)
    nb, src, by_id = autograded_chapter(chapter, tmp_path)
    visible = feedback.visible_tests(chapter, source)
    dest = tmp_path / "page.html"
    opened: list[str] = []
    real_open = open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def refused(*args, **kwargs):
        raise AssertionError("a page built a release or parsed a notebook")

    with monkeypatch.context() as m:
        m.setattr(release, "build_release", refused)
        m.setattr(feedback, "visible_tests", refused)
        m.setattr("nbformat.read", refused)
        m.setattr("builtins.open", counting_open)
        size = feedback.render((result(nb, chapter), str(src), visible, str(dest)))
    assert opened == [str(src)], f"a page read {opened}, not its notebook once"
    assert size == dest.stat().st_size <= 100_000, f"{size / 1024:.0f} KB"
    page = dest.read_text(encoding="utf-8")
    assert feedback.render((result(nb, chapter), str(src), visible, str(tmp_path / "again.html"))) == size
    assert (tmp_path / "again.html").read_text(encoding="utf-8") == page, "a page is a function of its inputs"
    public = release.dumps(release.build_release(chapter, source))
    hidden = [line.strip() for c in by_id.values() for line in cells.split_hidden(cells.source_text(c))[1].splitlines()
              if len(line.strip()) > 25 and json.dumps(line.strip())[1:-1] not in public]
    assert hidden and not [line for line in hidden if pages.html.escape(line) in page]


def test_pages_built_in_parallel_equal_pages_built_in_one_process(tmp_path, monkeypatch):
    nb = json.loads(release.dumps(release.build_release("00_mini", MINI / "00_mini" / "mini.ipynb")))
    work = tmp_path / "work"
    for k in range(12):
        student = f"s{k:02d}"
        path = work / "results" / student / "00_mini.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(result(nb, student=student)), encoding="utf-8")
        nb_path = work / "autograded" / student / "00_mini" / "mini.ipynb"
        nb_path.parent.mkdir(parents=True)
        nb_path.write_text(json.dumps(nb), encoding="utf-8")
    one = {p: p.read_bytes() for p in feedback.main(work, solutions_dir=MINI, jobs=1)}
    monkeypatch.setattr(feedback, "MIN_PAGES_PER_WORKER", 1)
    for p in one:
        p.unlink()
    two = {p: p.read_bytes() for p in feedback.main(work, solutions_dir=MINI, jobs=3)}
    assert one == two and len(one) == 12
    assert (work / "course-feedback" / "feedback.css").read_bytes() == pages.STYLESHEET.read_bytes()
    assert (work / "nbgrader_config.py").is_file()


def test_observations_are_never_shown_and_pages_need_no_torch():
    from course_utils.observe import MIME

    assert MIME.startswith(feedback.OBSERVATION_PREFIX)
    observation = {"output_type": "display_data", "metadata": {}, "data": {MIME: {"seq": 0}, "text/plain": "<observation 0>"}}
    assert feedback.inert([observation]) == []
    import subprocess
    import sys

    code = "import sys, grader.pages.feedback; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_a_reasons_hint_is_on_a_line_of_its_own_and_escaped():
    from grader.escaping import html_text
    from grader.pages.feedback import _why

    cell = _why("f(x) is <b>1</b> but expected 2. What to try: compare <i>by hand</i>.", html_text)
    assert cell == ("f(x) is &lt;b&gt;1&lt;/b&gt; but expected 2.<br><span class=\"hint\"><strong>What to try:</strong>"
                    " compare &lt;i&gt;by hand&lt;/i&gt;.</span>")
    assert _why("not answered yet", html_text) == "not answered yet"


@pytest.mark.parametrize("status", ["graded", "unreadable", "missing", "wrong chapter"])
def test_a_learners_page_is_headed_with_their_name_and_a_status_in_their_words(status):
    notes = "graded tensors-1.ipynb (the latest of 2 uploads, expected tensors.ipynb); not graded: tensors.ipynb"
    mine = {"student": "canvas-1003", "name": "<b>Zoë</b>" + "x" * 200, "chapter": "01_tensors", "status": status,
            "score": 100.0 if status == "graded" else 0.0, "max_score": 100.0, "message": notes, "tests": [],
            "file": "tensors-1.ipynb", "superseded": ["tensors.ipynb"], "late": True}
    head = feedback.summary_html(mine)
    assert "<h1>Feedback — 01_tensors — &lt;b&gt;Zoë&lt;/b&gt;xxx" in head and "canvas-1003" not in head
    assert len(feedback.title(mine)) < 120, "a name is capped"
    assert "not graded" not in head and "expected tensors.ipynb" not in head, "no instructor's note"
    assert "Handed in late." in head
    if status == "graded":
        assert "Score: 100 / 100</p>" in head and "Graded: tensors-1.ipynb (your latest upload)." in head
    else:
        assert html.escape(feedback.STATUS_WORDS[status]) in head and "Graded:" not in head
