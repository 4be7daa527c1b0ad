"""A class that misbehaves in every way we know: runaway code, broken files, editors that drop
metadata, learners who move cells, and cheats. One batch; each fixture's status and score.

Every fixture is the mini course's release (tests/fixtures/course) with exercise 2 solved
and exercise 1 answered by the behaviour under test, unless it says otherwise. Exercise 1
is worth 4 points, exercise 2 six, so "6" below means "exercise 1 lost, the rest scored".
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from grader import cells, grade, samples
from grader.pages import report
from grader.prepare.release import build_release, dumps

pytestmark = pytest.mark.slow

CH = "00_mini"
S = samples.SOLUTION
T1, T2 = "test_ex1_double", "test_ex2_row_sums"


def body(code: str) -> str:
    return "import sys\nimport torch\n\ndef double(x):\n" + "\n".join("    " + line for line in code.splitlines())


#: name -> (exercise-1 answer, expected score, expected status of test 1, reason pattern)
BEHAVIOURS = {
    "loop": (body("while True:\n    pass"), 6, "timed out", "longer than 3 s"),
    "stubborn_loop": (
        body("while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass"),
        6, "timed out", "stopped",
    ),
    "memory_bomb": (body("hog = torch.empty(10**11)\nreturn x * 2"), 6, "memory limit", "more memory"),
    "list_bomb": (body("hog = [0] * 10**10\nreturn x * 2"), 6, "memory limit", "MemoryError"),
    "sys_exit": (body("sys.exit(0)"), 6, "failed", "SystemExit"),
    "os_exit": (body("import os\nos._exit(1)"), 6, "kernel died", "kernel died"),
    "segfault": (body("import ctypes\nctypes.string_at(0)"), 6, "kernel died", "kernel died"),
    "input": (body("n = input('factor? ')\nreturn x * int(n)"), 6, "failed", "input\\(\\) is not available"),
    "secret_env": (
        "import os\nLEAK = os.environ.get('COURSE_TEST_SECRET')\n\ndef double(x):\n"
        "    assert LEAK is None, 'the grader leaked a secret'\n    return x * 2",
        10, "passed", "",
    ),
    # tricks: points come only from the values the tests observe (grader.verdict.judge); what the
    # static scan or the in-process guard notices is a note for a reviewer, never a score
    "patch_checks": ("import course_utils as cu\ncu.check_tensor = lambda *a, **k: None\n\ndef double(x):\n    return x", 0, "failed", "did not run as they should"),
    "redefine_check": ("def check_tensor(*args, **kwargs):\n    pass\n\ndef double(x):\n    return x", 6, "failed", "values differ"),
    "patch_allclose": ("import torch\ntorch.allclose = lambda *a, **k: True\n\ndef double(x):\n    return x", 6, "failed", "values differ"),
    # this patch hangs the kernel itself: the cell times out, a fresh kernel runs the rest
    "patch_builtins": ("import builtins\nbuiltins.isinstance = lambda *a: True\n\ndef double(x):\n    return x", 6, "failed", "name 'double' is not defined"),
    "hidden_patch": (
        "import importlib\n_m = importlib.import_module('course_utils.checks')\n"
        "vars(_m)['check_tensor'] = lambda *a, **k: None\n\ndef double(x):\n    return x",
        0, "failed", "values differ",
    ),
    "subclass": ("import torch\nclass Mine(torch.Tensor):\n    pass\n\ndef double(x):\n    return (x * 2).as_subclass(Mine)", 6, "failed", "a subclass of torch.Tensor"),
    "eq_always_true": ("class Yes:\n    def __eq__(self, other):\n        return True\n\ndef double(x):\n    return Yes()", 6, "failed", "an object of type __main__.Yes"),
    "reads_files": ("def double(x):\n    open('/work/main/solutions/00_mini/mini.ipynb').read()\n    return x * 2", 6, "failed", "FileNotFoundError"),
}


#: what a reviewer is told about each trick (the note on the first test after it)
NOTES = {
    "patch_checks": "replaces a course_utils checking helper",
    "redefine_check": "redefines a checking helper",
    "patch_allclose": "assigns to an attribute of torch",
    "patch_builtins": "touches builtins",
    "hidden_patch": "replaced course_utils.checks.check_tensor",
    "subclass": "tensor subclass",
    "eq_always_true": "overrides equality",
    "reads_files": "path outside",
}


def put(root: Path, student: str, content, chapter: str = CH, name: str = "mini.ipynb") -> Path:
    path = root / student / chapter / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else dumps(content))
    return path


def micro_chapter(solutions: Path) -> None:
    """A second chapter (00_micro) with its own grade ids, for the wrong-chapter fixture."""
    nb = nbformat.read(str(solutions / CH / "mini.ipynb"), as_version=4)
    for c in nb.cells:
        meta = cells.nbgrader_meta(c)
        if meta.get("grade_id"):
            meta["grade_id"] = "m_" + meta["grade_id"]
        c.id = "m" + c.id
    (solutions / "00_micro").mkdir()
    nbformat.write(nb, str(solutions / "00_micro" / "micro.ipynb"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    solutions = tmp / "solutions"
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", solutions)
    micro_chapter(solutions)
    make = lambda answers: samples.make_submission(CH, answers, solutions_dir=solutions)  # noqa: E731
    solved = make({"ex1_double": S, "ex2_row_sums": S})
    subs = tmp / "subs"

    for name, (answer, *_rest) in BEHAVIOURS.items():
        put(subs, name, make({"ex1_double": answer, "ex2_row_sums": S}))
    # a kernel that dies outside any test: while defining the second answer
    put(subs, "dies_midway", make({"ex1_double": S, "ex2_row_sums": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"}))

    # broken files
    put(subs, "empty", b"")
    put(subs, "not_json", b"{\"cells\": [")
    put(subs, "not_a_notebook", json.dumps({"hello": "world"}))
    put(subs, "binary", b"\x89PNG\r\n\x1a\n\x00\x00")
    put(subs, "old_nbformat", nbformat.writes(nbformat.convert(copy.deepcopy(solved), 3)))
    put(subs, "wrong_chapter", build_release("00_micro", solutions / "00_micro" / "micro.ipynb"))
    put(subs, "renamed", solved, name="mini (2).ipynb")
    put(subs, "extra_files", solved)
    (subs / "extra_files" / CH / "scratch.py").write_text("print('hi')\n")
    (subs / "no_chapter_folder").mkdir()
    (subs / "empty_chapter" / CH).mkdir(parents=True)

    # editors and learners
    colab = json.loads(dumps(solved))
    colab["nbformat_minor"] = 0
    colab["metadata"] = {"colab": {"provenance": [], "name": "mini.ipynb"}, "kernelspec": {"name": "python3", "display_name": "Python 3"}, "accelerator": "GPU"}
    for k, c in enumerate(colab["cells"]):
        c["metadata"] = {"id": c.pop("id", f"c{k}"), "colab": {"base_uri": "https://localhost:8080/"}}
        if c["cell_type"] == "code":
            c["metadata"]["outputId"] = f"out{k}"
            c["execution_count"] = k
            c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["old output\n"]}]
    put(subs, "colab", json.dumps(colab))
    vscode = json.loads(dumps(solved))
    vscode["metadata"]["vscode"] = {"interpreter": {"hash": "0" * 16}}
    for c in vscode["cells"]:
        c["metadata"].pop("editable", None)
        c["metadata"].pop("deletable", None)
        if c["cell_type"] == "code":
            c["metadata"]["vscode"] = {"languageId": "python"}
    put(subs, "vscode", json.dumps(vscode))

    def rearranged(edit):
        nb = copy.deepcopy(solved)
        edit(nb)
        return nb

    def find(nb, gid):
        return next(i for i, c in enumerate(nb.cells) if cells.grade_id(c) == gid)

    def duplicate_answer(nb):  # the later copy is the one that counts
        i = find(nb, "ex1_double")
        wrong = copy.deepcopy(nb.cells[i])
        wrong.source = cells.marker_line("answer", "ex1_double") + "\ndef double(x):\n    return x"
        wrong.id = "dup"
        nb.cells.insert(i + 1, wrong)

    def split_answer(nb):
        i = find(nb, "ex1_double")
        second = copy.deepcopy(nb.cells[i])
        second.metadata = {}
        second.id = "split"
        second.source = "def double(x):\n    return x * 2"
        nb.cells[i].source = cells.marker_line("answer", "ex1_double") + "\nimport torch"
        nb.cells.insert(i + 1, second)

    def move_test_above_answer(nb):
        t = nb.cells.pop(find(nb, T2))
        nb.cells.insert(find(nb, "ex2_row_sums"), t)

    def strip_marker_keep_id(nb):
        i = find(nb, "ex1_double")
        nb.cells[i].metadata = {}
        nb.cells[i].source = "def double(x):\n    return x * 2"

    put(subs, "duplicate_answer", rearranged(duplicate_answer))
    put(subs, "split_answer", rearranged(split_answer))
    put(subs, "moved_test", rearranged(move_test_above_answer))
    put(subs, "marker_deleted", rearranged(strip_marker_keep_id))

    os.environ["COURSE_TEST_SECRET"] = "hunter2"
    try:
        reports = grade.main(subs, tmp / "work", jobs=2, cell_timeout=3, solutions_dir=solutions)
    finally:
        del os.environ["COURSE_TEST_SECRET"]
    return {"reports": {r.student: r for r in reports}, "work": tmp / "work", "tmp": tmp}


def verdict(report, grade_id):
    return next(t for t in report.tests if t["grade_id"] == grade_id)


@pytest.mark.parametrize("name", list(BEHAVIOURS))
def test_behaviour_costs_its_exercise_and_nothing_else(corpus, name):
    _, score, status, pattern = BEHAVIOURS[name]
    r = corpus["reports"][name]
    v = verdict(r, T1)
    import re

    assert (r.status, v["status"]) == ("graded", status), v
    assert re.search(pattern, v["reason"]), v["reason"]
    assert r.score == score, [(t["grade_id"], t["status"], t["reason"]) for t in r.tests]
    if name in NOTES:
        assert re.search(NOTES[name], v["note"]), v
    else:
        assert not any(t["note"] for t in r.tests), r.tests


def test_a_kernel_killed_while_defining_an_answer_costs_that_answer(corpus):
    r = corpus["reports"]["dies_midway"]
    assert verdict(r, T1)["status"] == "passed"
    assert verdict(r, T2)["status"] == "failed" and "row_sums" in verdict(r, T2)["reason"]
    assert r.score == 4


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("empty", "unreadable", "the file is empty"),
        ("not_json", "unreadable", "not valid JSON"),
        ("not_a_notebook", "unreadable", "JSON but not a Jupyter notebook"),
        ("binary", "unreadable", "not UTF-8|not valid JSON"),
        ("wrong_chapter", "wrong chapter", "notebook of chapter 00_micro"),
        ("no_chapter_folder", "missing", "the folder is empty"),
        ("empty_chapter", "missing", "no notebook: expected mini.ipynb"),
    ],
)
def test_a_broken_submission_gets_a_clear_status_and_zero(corpus, name, status, message):
    import re

    r = corpus["reports"][name]
    assert r.status == status and re.search(message, r.message), (r.status, r.message)
    assert r.score == 0


@pytest.mark.parametrize(
    ("name", "note"),
    [("old_nbformat", ""), ("renamed", "graded mini (2).ipynb"), ("extra_files", "ignored 1 other file(s): scratch.py"),
     ("colab", ""), ("vscode", ""), ("split_answer", ""), ("moved_test", ""), ("marker_deleted", "")],
)
def test_a_solved_notebook_scores_full_however_it_was_saved_or_rearranged(corpus, name, note):
    r = corpus["reports"][name]
    assert r.score == 10, [(t["grade_id"], t["status"], t["reason"]) for t in r.tests]
    assert note in r.message


def test_a_duplicated_answer_cell_is_scored_by_its_last_copy(corpus):
    r = corpus["reports"]["duplicate_answer"]
    assert verdict(r, T1)["status"] == "failed" and r.score == 6


def test_the_report_puts_the_hardest_test_first_and_lists_flags(corpus):
    path = report.main(corpus["work"])
    text = path.read_text()
    table = text.split("## Hardest first")[1]
    assert table.index(T1) < table.index(T2)
    review = text.split("## Needs review")[1]
    assert "patch_allclose" in review and "secret_env" not in review
    for chapter in {r.chapter for r in corpus["reports"].values()}:
        svg = (path.parent / f"{chapter}.svg").read_text()
        assert svg.startswith("<svg ") and f"{chapter}: scores of" in svg and T1 in svg
    assert "patch_allclose" in (path.parent / "report.html").read_text().split('id="needs-review"')[1]
