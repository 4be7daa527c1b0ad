"""A reference is checked before it is trusted: each exercise's fixed expectations, and a wrong solution grades nobody."""

from __future__ import annotations

import ast
import json
import shutil

import nbformat
import pytest

from grader import grade, project, samples
from grader.verdict import fixed

CHAPTERS = sorted(project.sources(project.SOLUTIONS))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_of_every_chapter_has_a_fixed_expectation(chapter):
    checks = fixed.load(project.SOLUTIONS / chapter)
    exercises = samples.answer_ids(chapter)
    assert sorted({c.exercise for c in checks}) == sorted(exercises), f"{chapter}: one or more per answer cell"
    for check in checks:
        ast.parse(check.expr, mode="eval")  # an expression, run in the solution's namespace
        assert check.why, f"{chapter} {check.exercise}: say where the expectation comes from"


def test_what_the_expectations_cell_printed_is_compared_in_the_coordinator():
    checks = [fixed.Fixed("ex1", "f(2)", 4), fixed.Fixed("ex1", "g()", [1.0, 2.0], tol=1e-3),
              fixed.Fixed("ex2", "h()"), fixed.Fixed("ex2", "k()", "torch.int8")]
    cell = fixed.cell(checks)
    printed = [{"value": 4}, {"value": [1.0001, 2.0]}, {"value": False}, {"raised": "NameError: k"}]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=fixed.MARK + json.dumps(printed) + "\n")]
    nb = nbformat.v4.new_notebook(cells=[cell])
    assert fixed.failures(nb, checks) == ["ex2: h() gave false, expected True", "ex2: k() raised NameError: k"]
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{fixed.MARK}[{{\"value\": 4}}]\n")]
    assert fixed.failures(nb, checks) == ["ex1: the expectations' cell printed nothing readable"]
    assert fixed.same(True, 1, 0.1) is False and fixed.same([float("nan")], [float("nan")], 0) is True


@pytest.mark.slow
def test_a_solution_returning_a_wrong_value_is_not_graded_against(tmp_path):
    """ch02 ex1's solution changed to `return -1`: the chapter is not graded (a status, no score,
    the cause in the log), rather than every correct learner losing the exercise."""
    chapter = "02_dtypes"
    solutions = tmp_path / "solutions"
    shutil.copytree(project.SOLUTIONS / chapter, solutions / chapter)
    source = solutions / chapter / "dtypes.ipynb"
    right = "return torch.Size(shape).numel() * dtype.itemsize"
    assert right in source.read_text()
    source.write_text(source.read_text().replace(right, "return -1"))
    perfect = samples.make_submission(chapter, dict.fromkeys(samples.answer_ids(chapter), samples.SOLUTION))
    (tmp_path / "subs" / "ann" / chapter).mkdir(parents=True)
    nbformat.write(perfect, str(tmp_path / "subs" / "ann" / chapter / "dtypes.ipynb"))
    work = tmp_path / "work"
    (report,) = grade.main(tmp_path / "subs", work, jobs=1, engine="fork", solutions_dir=solutions)
    assert report.status == "error" and "not graded in full" in report.message
    assert all(t["status"] == "no reference" for t in report.tests), "no test judged against a wrong solution"
    log = (work / "grader.log").read_text()
    assert "fails its fixed expectation ex1_tensor_bytes: tensor_bytes((1000, 1000), torch.float32) gave -1" in log
