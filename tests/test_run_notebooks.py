"""ci/run_notebooks.py on the mini course: it proves solutions pass and every test can fail."""

from __future__ import annotations

import json

import pytest
import run_notebooks as runner

from grader import cells
from grader.prepare.release import dumps, read

pytestmark = pytest.mark.slow
CH = "00_mini"


def edit(solutions, fn):
    path = solutions / CH / "mini.ipynb"
    nb = read(path)
    fn(nb)
    path.write_text(dumps(nb))


def run(solutions, modes=("solution", "release"), tmp_path=None):
    return runner.run([CH], list(modes), fast=True, solutions_dir=solutions, report_dir=tmp_path)


def test_solution_runs_clean_and_release_fails_every_test_part(mini_solutions, tmp_path):
    results = run(mini_solutions, tmp_path=tmp_path)
    assert [(r.mode, r.ok, r.failures) for r in results] == [("solution", True, []), ("release", True, [])]
    assert all(r.code_cells_run > 0 for r in results)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["mode"] for r in summary["results"]] == ["solution", "release"]
    assert (tmp_path / f"{CH}.release.json").exists() and "| 00_mini | release |" in (tmp_path / "summary.md").read_text()


def test_a_hidden_test_that_passes_on_the_stub_is_vacuous(mini_solutions):
    def weaken(nb):
        for c in nb.cells:
            if cells.grade_id(c) == "test_ex2_row_sums":
                visible, _ = cells.split_hidden(cells.source_text(c))
                c.source = visible + "### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS"

    edit(mini_solutions, weaken)
    (result,) = run(mini_solutions, modes=("release",))
    assert not result.ok
    assert result.failures == [
        "notebooks/00_mini/mini.ipynb: test_ex2_row_sums (hidden) passes on the unsolved stub: the test is vacuous"
    ]


def test_a_failing_solution_is_reported_with_its_error(mini_solutions):
    def break_it(nb):
        nb.cells[4].source = "assert 1 == 2, 'the demo lies'"

    edit(mini_solutions, break_it)
    (result,) = run(mini_solutions, modes=("solution",))
    assert not result.ok and "AssertionError: the demo lies" in result.failures[0]


def test_a_demo_that_calls_an_exercise_fails_the_release(mini_solutions):
    def call_exercise(nb):
        nb.cells[-1].cell_type = "code"
        nb.cells[-1].source = "double(torch.ones(1))"
        nb.cells[-1].outputs = []
        nb.cells[-1].execution_count = None

    edit(mini_solutions, call_exercise)
    (result,) = run(mini_solutions, modes=("release",))
    assert not result.ok and "is not an exercise but raised NotImplementedError" in result.failures[0]


def test_a_notebook_without_parameters_cell_is_an_error(mini_solutions):
    edit(mini_solutions, lambda nb: nb.cells[1].metadata.pop("tags"))
    (result,) = run(mini_solutions, modes=("solution",))
    assert result.failures == [f"{mini_solutions}/00_mini/mini.ipynb: no cell tagged 'parameters'"]


def test_tests_that_never_ran_are_reported_as_not_run_not_as_vacuous(mini_solutions):
    edit(mini_solutions, lambda nb: setattr(nb.cells[4], "source", "raise ValueError('the demo broke')"))
    (result,) = run(mini_solutions, modes=("release",))
    assert not result.ok
    assert "is not an exercise but raised ValueError: the demo broke" in result.failures[0]
    assert result.failures[1:] == [
        "notebooks/00_mini/mini.ipynb: execution stopped before 4 test part(s) ran (test_ex1_double (visible),"
        " test_ex1_double (hidden), test_ex2_row_sums (visible), test_ex2_row_sums (hidden)): fix the error"
        " above, then they are checked"
    ]
