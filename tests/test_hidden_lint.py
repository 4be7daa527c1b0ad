"""Hidden tests observe and never compute expected values (ci/hidden_lint.py), in every chapter."""

from __future__ import annotations

import hidden_lint
import pytest

from grader import project


@pytest.mark.parametrize("chapter", project.chapters())
def test_no_hidden_test_computes_an_expected_value(chapter):
    assert hidden_lint.problems(project.source_notebook(chapter)) == []


@pytest.mark.parametrize(
    ("hidden", "problem"),
    [
        ("check_tensor(f(x), torch.ones(3), name='f')", "is given a computed expected value"),
        ("check_value(f(x), expected=n + 1)", "is given a computed expected value"),
        ("expected = x * 2\ncheck_tensor(f(x), name='f')", "`expected` holds an expected value"),
        ("assert torch.equal(f(x), x * 2), 'wrong'", "no value observation"),
        ("check_value(f(x), 3.0, abs_tol=0.1)", "no value observation"),
        ("def oops(:", "do not parse"),
    ],
)
def test_the_lint_catches_each_rule(hidden, problem):
    found = hidden_lint.problems_in("test_ex1", hidden)
    assert any(problem in p for p in found), found


def test_an_observing_hidden_test_passes_the_lint():
    hidden = (
        "from course_utils.checks import check_tensor\n"
        "X = torch.randn(3, generator=torch.Generator().manual_seed(1))\n"
        "before = X.clone()\n"
        "check_tensor(f(X), name='f(X)', atol=1e-6)\n"
        "assert torch.equal(X, before), 'f changed its input'\n"
        "check_value(g(X), 3.0, abs_tol=0.1, name='g(X)')\n"
    )
    assert hidden_lint.problems_in("test_ex1", hidden) == []
