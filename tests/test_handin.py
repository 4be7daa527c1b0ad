"""course_utils.handin (``cu.submit()``): a notebook is checked as the grader will read it before it is
sent, and what it writes grades exactly as the notebook it came from."""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pytest
from nbgrader.utils import compute_checksum

from course_utils import handin
from grader import cells, grade, project
from grader.prepare.release import dumps, read
from grader.samples import SOLUTION, make_submission

CH = "00_mini"
ROOT = Path(__file__).resolve().parent.parent


def learner(tmp_path: Path, name: str, nb) -> Path:
    path = tmp_path / "lab" / name / "mini.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(dumps(nb) if not isinstance(nb, dict) else json.dumps(nb))
    return path


def kernel_of(nb) -> dict:
    """The learner's kernel after Run All: every code cell run in order (a failing one skipped)."""
    ns: dict = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and not cells.is_test(cell):
            try:
                exec(cells.source_text(cell), ns)
            except Exception:  # noqa: BLE001 -- an unsolved stub raises, as in the learner's kernel
                pass
    return ns


def test_the_release_records_every_graded_cell_with_nbgrader_s_checksum():
    for path in sorted(glob.glob(str(ROOT / "notebooks" / "*" / "*.ipynb"))):
        nb = read(Path(path))
        graded = [c for c in nb.cells if cells.grade_id(c)]
        assert [m["grade_id"] for m in nb.metadata.course.cells] == [cells.grade_id(c) for c in graded]
        for cell, meta in zip(graded, nb.metadata.course.cells, strict=True):
            assert meta["checksum"] == compute_checksum(cell) == cells.checksum(cell.source, "code", meta)
        assert nb.metadata.course.chapter == Path(path).parent.name


@pytest.mark.parametrize("chapter", project.chapters())
def test_every_chapter_ends_with_cu_submit(chapter):
    last = read(project.source_notebook(chapter)).cells[-1]
    assert last.cell_type == "code" and cells.source_text(last).strip().endswith("cu.submit()")


def test_a_complete_notebook_is_ready_and_written_without_outputs_or_the_editor_s_user(tmp_path, mini_solutions, capsys):
    nb = make_submission(CH, {"ex1_double": SOLUTION, "ex2_row_sums": SOLUTION}, solutions_dir=mini_solutions)
    data = json.loads(dumps(nb))
    data["metadata"]["colab"] = {"provenance": [{"user": "Ada"}]}
    for cell in data["cells"]:
        if cell["cell_type"] == "code":
            cell["metadata"]["executionInfo"] = {"user": {"displayName": "Ada Lovelace"}}
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hello\n"}]
    path = learner(tmp_path, "ada", data)
    sub = handin.submit(path, namespace=kernel_of(nb))
    printed = capsys.readouterr().out
    assert sub.ready, printed
    assert re.fullmatch(r"00_mini-[0-9a-f]{8}\.ipynb", sub.path.name) and sub.path.parent == path.parent
    text = sub.path.read_text()
    assert "Ada" not in text and "hello" not in text
    assert printed.count("Hand-in check of 00_mini") == 1 and f"Ready: {sub.path.name}" in printed
    assert handin.submit(path, namespace=kernel_of(nb)).path == sub.path, "the same notebook, the same name"


def test_a_deleted_test_cell_a_changed_locked_cell_and_a_stub_are_told_before_sending(tmp_path, mini_solutions, capsys):
    nb = make_submission(CH, {"ex1_double": "def double(x):\n    return x + x"}, solutions_dir=mini_solutions)
    nb.cells = [c for c in nb.cells if cells.grade_id(c) != "test_ex1_double"]
    path = learner(tmp_path, "bo", nb)
    sub = handin.submit(path, namespace=kernel_of(nb))
    printed = capsys.readouterr().out
    assert not sub.ready
    assert "test cell test_ex1_double was deleted" in printed
    row = {e.answer: e for e in sub.exercises}
    assert (row["ex1_double"].test_state, row["ex2_row_sums"].answer_state) == ("deleted", "the stub")
    assert row["ex2_row_sums"].visible.startswith("failed: NotImplementedError: not solved yet")

    for cell in nb.cells:
        if cells.grade_id(cell) == "test_ex2_row_sums":
            cell.source += "\npass"
    sub = handin.check(json.loads(dumps(nb)))
    assert any("test_ex2_row_sums was changed" in p for e in sub.exercises for p in e.problems)


def test_a_failing_visible_test_is_shown_in_one_row_with_its_reason(tmp_path, mini_solutions, capsys):
    nb = make_submission(CH, {"ex1_double": "def double(x):\n    return x * 3", "ex2_row_sums": SOLUTION},
                         solutions_dir=mini_solutions)
    sub = handin.submit(learner(tmp_path, "cy", nb), namespace=kernel_of(nb))
    row = {e.answer: e for e in sub.exercises}
    assert row["ex1_double"].visible.startswith("failed: AnswerError") and row["ex2_row_sums"].visible == "passed"
    assert "Not ready yet (1 of 2 visible tests pass" in capsys.readouterr().out


def test_without_a_saved_notebook_or_in_a_grading_run_it_says_one_line_or_nothing(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert handin.submit(namespace={}) is None
    assert capsys.readouterr().out.count("\n") == 1
    monkeypatch.setenv("COURSE_GRADING", "1")
    assert handin.submit(namespace={}) is None and capsys.readouterr().out == ""


def test_in_jupyterlab_it_finds_the_notebook_by_its_session(tmp_path, mini_solutions, monkeypatch, capsys):
    nb = make_submission(CH, {}, solutions_dir=mini_solutions)
    path = learner(tmp_path, "di", nb)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))  # what JupyterLab gives the notebook's kernel
    sub = handin.submit(namespace={})
    assert sub.path.parent == path.parent and "Hand-in check of 00_mini" in capsys.readouterr().out


@pytest.mark.slow
def test_what_it_writes_grades_exactly_as_the_notebook_it_came_from(tmp_path, mini_solutions):
    answers = {
        "full": {"ex1_double": SOLUTION, "ex2_row_sums": SOLUTION},
        "half": {"ex1_double": "def double(x):\n    return 2 * x", "ex2_row_sums": "def row_sums(X):\n    return X.sum(1)"},
        "none": {},
    }
    subs = tmp_path / "subs"
    for student, given in answers.items():
        nb = make_submission(CH, given, solutions_dir=mini_solutions)
        path = learner(tmp_path, student, nb)
        sub = handin.submit(path, namespace=kernel_of(nb))
        for who, file in ((student, path), (f"{student}-handed-in", sub.path)):
            (subs / who / CH).mkdir(parents=True)
            (subs / who / CH / file.name).write_bytes(file.read_bytes())
    reports = {r.student: r for r in grade.main(subs, tmp_path / "work", jobs=2, engine="fork",
                                                 solutions_dir=mini_solutions)}
    for student in answers:
        mine, sent = reports[student], reports[f"{student}-handed-in"]
        assert (sent.status, sent.score, sent.max_score) == (mine.status, mine.score, mine.max_score)
        assert [(t["grade_id"], t["status"], t["reason"]) for t in sent.tests] == \
               [(t["grade_id"], t["status"], t["reason"]) for t in mine.tests]
        assert not sent.message or "expected" not in sent.message, sent.message
    assert [reports[s].score for s in answers] == [10.0, 4.0, 0.0]


def test_in_colab_it_reads_the_notebook_from_colab_and_downloads_the_file(tmp_path, mini_solutions, monkeypatch, capsys):
    import sys
    import types

    nb = make_submission(CH, {"ex1_double": SOLUTION, "ex2_row_sums": SOLUTION}, solutions_dir=mini_solutions)
    downloads, asked = [], []

    def blocking_request(kind, request="", timeout_sec=None):
        asked.append(kind)
        return {"ipynb": json.loads(dumps(nb))}

    colab = types.ModuleType("google.colab")
    colab._message = types.SimpleNamespace(blocking_request=blocking_request)
    colab.files = types.SimpleNamespace(download=downloads.append)
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.chdir(tmp_path)  # Colab's /content
    sub = handin.submit(namespace=kernel_of(nb))
    assert asked == ["get_ipynb"] and sub.ready
    assert downloads == [str(sub.path)] and sub.path.parent == tmp_path
    assert f"your browser downloads {sub.path.name}" in capsys.readouterr().out


def test_a_copy_whose_editor_dropped_the_notebook_metadata_is_still_checked_by_its_marker_lines(tmp_path, mini_solutions):
    nb = make_submission(CH, {"ex1_double": SOLUTION}, solutions_dir=mini_solutions)
    data = json.loads(dumps(nb))
    del data["metadata"]["course"]
    for cell in data["cells"]:
        cell["metadata"].pop("nbgrader", None)
    sub = handin.check(data, kernel_of(nb))
    assert [(e.answer, e.test, e.answer_state, e.visible) for e in sub.exercises] == [
        ("ex1_double", "test_ex1_double", "written", "passed"),
        ("ex2_row_sums", "test_ex2_row_sums", "the stub", sub.exercises[1].visible)]
    assert sub.exercises[1].visible.startswith("failed: NotImplementedError")
    assert sub.notes and "cannot be seen here" in sub.notes[0] and not sub.problems


def test_a_debugging_exercise_left_as_released_is_the_stub_and_its_fix_is_an_answer(tmp_path, mini_solutions):
    """A debugging exercise's stub runs (it is the buggy code): left as released it is still told
    as the stub, by the release's checksum, with its failing visible test; fixed, it is written."""
    src = mini_solutions / CH / "mini.ipynb"
    nb = read(src)
    answer = next(c for c in nb.cells if cells.grade_id(c) == "ex2_row_sums")
    answer.source = answer.source.replace("    ### END SOLUTION", "    ### END SOLUTION\n    ### BEGIN STUB\n"
                                          "    # return X.sum(dim=0, keepdim=True)\n    ### END STUB")
    src.write_text(dumps(nb))
    as_released = make_submission(CH, {"ex1_double": SOLUTION}, solutions_dir=mini_solutions)
    released = next(c for c in as_released.cells if cells.grade_id(c) == "ex2_row_sums")
    assert "X.sum(dim=0, keepdim=True)" in released.source and cells.STUB_MESSAGE not in released.source
    row = {e.answer: e for e in handin.check(json.loads(dumps(as_released)), kernel_of(as_released)).exercises}
    assert row["ex2_row_sums"].answer_state == "the stub"
    assert row["ex2_row_sums"].visible.startswith("failed: AnswerError: row_sums(ones(2, 3)) has shape (1, 3)")
    fixed = make_submission(CH, {"ex1_double": SOLUTION, "ex2_row_sums": SOLUTION}, solutions_dir=mini_solutions)
    row = {e.answer: e for e in handin.check(json.loads(dumps(fixed)), kernel_of(fixed)).exercises}
    assert (row["ex2_row_sums"].answer_state, row["ex2_row_sums"].visible) == ("written", "passed")
