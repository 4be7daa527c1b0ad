"""grader.prepare.release: the student release is in sync, reproducible and leaks nothing."""

import json
from pathlib import Path

from grader import cells
from grader.prepare import publish, release
from grader.prepare.release import build_release, read


def do_release(solutions: Path, tmp_path: Path) -> Path:
    notebooks = tmp_path / "notebooks"
    release.main(None, solutions_dir=solutions, notebooks_dir=notebooks)
    return notebooks


def test_release_strips_solutions_and_hidden_tests_and_keeps_visible_ones(mini_solutions, tmp_path):
    notebooks = do_release(mini_solutions, tmp_path)
    text = (notebooks / "00_mini" / "mini.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "HIDDEN" not in text
    assert "return x * 2" not in text and "arange(5)" not in text
    assert 'raise NotImplementedError(\\"not solved yet: replace this line with your answer\\")' in text
    assert 'name=\\"double([1., 2.])\\"' in text
    assert release.check(solutions_dir=mini_solutions, notebooks_dir=notebooks) == []


def test_release_marks_answer_and_test_cells_and_adds_the_colab_badge(mini_solutions, tmp_path):
    nb = build_release("00_mini", mini_solutions / "00_mini" / "mini.ipynb")
    marked = [cells.marker(c) for c in nb.cells if cells.grade_id(c)]
    assert marked == [
        ("answer", "ex1_double"),
        ("tests", "test_ex1_double"),
        ("answer", "ex2_row_sums"),
        ("tests", "test_ex2_row_sums"),
    ]
    first = cells.source_text(nb.cells[0])
    assert first.startswith("[![Open In Colab]")
    pub = publish.current()
    assert pub.colab_url("notebooks/00_mini/mini.ipynb") in first


def test_release_is_reproducible(mini_solutions):
    src = mini_solutions / "00_mini" / "mini.ipynb"
    assert release.dumps(build_release("00_mini", src)) == release.dumps(build_release("00_mini", src))


def test_release_carries_no_outputs_or_stray_metadata(mini_solutions):
    nb = build_release("00_mini", mini_solutions / "00_mini" / "mini.ipynb")
    assert set(nb.metadata) <= {"kernelspec", "language_info", "course"}
    for c in nb.cells:
        assert set(c.metadata) <= {"nbgrader", "tags", "editable", "deletable"}
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None


def test_a_stale_release_is_reported(mini_solutions, tmp_path):
    notebooks = do_release(mini_solutions, tmp_path)
    src = mini_solutions / "00_mini" / "mini.ipynb"
    nb = read(src)
    nb.cells[3].source = "## A changed demo"
    src.write_text(release.dumps(nb))
    problems = release.check(solutions_dir=mini_solutions, notebooks_dir=notebooks)
    assert any("stale" in p for p in problems)


def test_a_leaked_solution_line_is_reported(mini_solutions, tmp_path):
    notebooks = do_release(mini_solutions, tmp_path)
    path = notebooks / "00_mini" / "mini.ipynb"
    data = json.loads(path.read_text())
    data["cells"][3]["source"] = ["return X.sum(dim=1, keepdim=True)\n"]
    path.write_text(json.dumps(data))
    problems = release.check(solutions_dir=mini_solutions, notebooks_dir=notebooks)
    assert any("leaks a line" in p and "keepdim=True" in p for p in problems)


def test_a_missing_or_orphan_release_is_reported(mini_solutions, tmp_path):
    notebooks = tmp_path / "notebooks"
    (notebooks / "99_gone").mkdir(parents=True)
    (notebooks / "99_gone" / "gone.ipynb").write_text("{}")
    problems = release.check(solutions_dir=mini_solutions, notebooks_dir=notebooks)
    assert any("missing" in p for p in problems)
    assert any("99_gone" in p and "no source" in p for p in problems)


def test_the_grader_does_not_pay_for_jsonschema_s_iri_grammar():
    """Importing the grader leaves out rfc3987_syntax (~0.8 s), and notebooks still validate."""
    import subprocess
    import sys

    code = ("import sys, grader.grade, nbformat; "
            "assert sys.modules.get('rfc3987_syntax') is None; "
            "nbformat.validate(nbformat.v4.new_notebook()); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


BUGGY_ROW_SUMS = '''def row_sums(X: torch.Tensor) -> torch.Tensor:
    """Sum of each row of a 2-D tensor, shape (N, 1)."""
    ### BEGIN SOLUTION
    return X.sum(dim=1, keepdim=True)
    ### END SOLUTION
    ### BEGIN STUB
    # total = X.sum(dim=0)
    #
    # for _ in range(1):
    #     total = total + 0
    # return total
    ### END STUB'''


def _with_stub(solutions: Path, source: str = BUGGY_ROW_SUMS) -> Path:
    src = solutions / "00_mini" / "mini.ipynb"
    nb = read(src)
    answer = next(c for c in nb.cells if cells.grade_id(c) == "ex2_row_sums")
    answer.source = source
    src.write_text(release.dumps(nb))
    return src


def test_a_debugging_exercise_releases_its_buggy_code_in_place_of_the_solution(mini_solutions, tmp_path):
    """The stub region, uncommented at its indentation, replaces the solution region; the markers,
    the solution and nbgrader's NotImplementedError line are gone; other answers keep that line."""
    src = _with_stub(mini_solutions)
    nb = build_release("00_mini", src)
    answer = next(c for c in nb.cells if cells.grade_id(c) == "ex2_row_sums")
    assert cells.source_text(answer) == (
        cells.marker_line("answer", "ex2_row_sums") + "\n"
        'def row_sums(X: torch.Tensor) -> torch.Tensor:\n    """Sum of each row of a 2-D tensor, shape (N, 1)."""\n'
        "    total = X.sum(dim=0)\n\n    for _ in range(1):\n        total = total + 0\n    return total"
    )
    other = next(c for c in nb.cells if cells.grade_id(c) == "ex1_double")
    assert cells.STUB_MESSAGE in cells.source_text(other)
    notebooks = do_release(mini_solutions, tmp_path)
    assert release.check(solutions_dir=mini_solutions, notebooks_dir=notebooks) == []


def test_a_line_the_stub_shares_with_the_solution_is_no_leak(mini_solutions, tmp_path):
    _with_stub(mini_solutions, BUGGY_ROW_SUMS.replace("# return total", "# return X.sum(dim=1, keepdim=True)"))
    notebooks = do_release(mini_solutions, tmp_path)
    assert release.check(solutions_dir=mini_solutions, notebooks_dir=notebooks) == []


def test_a_stub_outside_an_answer_or_before_its_solution_is_refused(mini_solutions):
    import pytest

    from grader.exceptions import SourceError

    misplaced = BUGGY_ROW_SUMS.replace("    ### END STUB", "").replace(
        "    ### BEGIN SOLUTION", "    ### BEGIN STUB\n    # return 0\n    ### END STUB\n    ### BEGIN SOLUTION")
    src = _with_stub(mini_solutions, misplaced.replace("    ### BEGIN STUB\n    # total", "    # total"))
    with pytest.raises(SourceError, match="not after the solution region"):
        build_release("00_mini", src)
    src = _with_stub(mini_solutions, BUGGY_ROW_SUMS.replace("    ### END STUB", ""))
    with pytest.raises(SourceError, match="has no '### END STUB'"):
        build_release("00_mini", src)


def test_the_solution_code_of_a_debugging_exercise_leaves_its_stub_out(mini_solutions):
    from grader import samples

    src = _with_stub(mini_solutions)
    answer = next(c for c in read(src).cells if cells.grade_id(c) == "ex2_row_sums")
    code = samples.solution_code(answer)
    assert "return X.sum(dim=1, keepdim=True)" in code and "total" not in code and "###" not in code


def _practice(solutions: Path, points: float = 0, tag: bool = True, gid: str = "ex2_row_sums") -> Path:
    """The mini chapter with exercise ``gid`` (its answer, test and heading) turned into a practice exercise."""
    src = solutions / "00_mini" / "mini.ipynb"
    nb = read(src)
    for c in nb.cells:
        if cells.grade_id(c) in (gid, "test_" + gid) or (c.cell_type == "markdown" and gid.split("_", 1)[1] in c.source):
            tags = [t for t in c.metadata.get("tags", []) if t != cells.OPTIONAL]
            c.metadata["tags"] = tags + [cells.OPTIONAL] if tag else tags
            if cells.is_test(c):
                c.metadata.nbgrader["points"] = points
    src.write_text(release.dumps(nb))
    return src


def test_a_practice_exercise_is_released_with_its_test_worth_no_points(mini_solutions):
    nb = build_release("00_mini", _practice(mini_solutions))
    test = next(c for c in nb.cells if cells.grade_id(c) == "test_ex2_row_sums")
    assert cells.is_practice(test) and cells.points(test) == 0
    assert not cells.is_practice(next(c for c in nb.cells if cells.grade_id(c) == "test_ex1_double"))


def test_a_practice_exercise_that_contradicts_its_points_or_place_is_refused(mini_solutions):
    """The source is the instructor's claim: a practice test worth points, a core test worth none,
    or a core exercise after a practice one is refused before anything is released, naming the cell."""
    import pytest

    from grader.exceptions import SourceError

    with pytest.raises(SourceError, match="test_ex2_row_sums.*a practice test .* is worth 6 points"):
        build_release("00_mini", _practice(mini_solutions, points=6))
    with pytest.raises(SourceError, match="test_ex2_row_sums.*a core test is worth 0 points"):
        build_release("00_mini", _practice(mini_solutions, tag=False))
    _practice(mini_solutions, points=6, tag=False)  # a core exercise again
    with pytest.raises(SourceError, match="ex2_row_sums.*a core exercise's cell comes after the practice exercise"):
        build_release("00_mini", _practice(mini_solutions, gid="ex1_double"))
