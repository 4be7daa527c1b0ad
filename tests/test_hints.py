"""The reviewed hint tables: every exercise has one, and a failing reason ends with its hint."""

from __future__ import annotations

import nbformat
import pytest

from grader import cells, project
from grader.prepare.release import read
from grader.verdict import hints

CHAPTERS = project.chapters()


def test_a_reason_is_told_by_its_kind_of_failure():
    assert hints.kind_of("f(x) has dtype torch.int32 but expected torch.int64. Check ...") == "dtype"
    assert hints.kind_of("f(x) has shape (3,) but expected (3, 1).") == "shape"
    assert hints.kind_of("f(x) is on device 'cpu' but expected 'meta'.") == "device"
    assert hints.kind_of("f(x) should be a tuple, but it is a list ([1, 2]).") == "type"
    assert hints.kind_of("f(2) is 3 but expected 4.") == "value"
    assert hints.kind_of("TypeError was raised with the message 'x' while checking f(2)") == "raised"
    assert hints.kind_of("expected ValueError to be raised, but the code ran without error.") == "raised"
    assert hints.kind_of("a check of the test failed") == "default"
    assert hints.kind_of("it uses torch.softmax", rule=True) == "rule"
    for status in ("not answered yet: ...", "your answer cell has a syntax error at line 2", "NameError: name 'f'",
                   "the cell ran longer than 30 s and was stopped", "not run"):
        assert hints.kind_of(status) is None


def test_the_hint_for_the_kind_comes_first_then_the_default_and_a_status_gets_none():
    table = {"dtype": "Cast with `.long()`.", "default": "Reread the statement."}
    assert hints.add("f(x) has dtype torch.int32 but expected torch.int64.", table).endswith(
        hints.LEAD + "Cast with `.long()`.")
    assert hints.add("f(2) is 3 but expected 4.", table).endswith(hints.LEAD + "Reread the statement.")
    assert hints.add("not answered yet", table) == "not answered yet"
    assert hints.add("f(2) is 3 but expected 4.", {}) == "f(2) is 3 but expected 4."


def test_a_long_reason_is_cut_so_that_its_hint_stays_whole():
    out = hints.add("f(x) is " + "9" * 600 + " but expected 4.", {"value": "Count again."}, limit=400)
    assert len(out) <= 400 and out.endswith(hints.LEAD + "Count again.")


def test_hints_reach_the_test_after_their_answer_cell():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("def f(): ...", metadata={"nbgrader": {"solution": True, "grade_id": "ex1"}}),
        nbformat.v4.new_code_cell("assert f()", metadata={"nbgrader": {"grade": True, "grade_id": "t1", "points": 1}}),
    ])
    assert hints.by_test({"ex1": {"value": "v"}}, nb) == {"t1": {"value": "v"}}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_has_a_reviewed_hint_table(chapter):
    """Each exercise's table says what to try for a wrong value and for anything else (``default``),
    in whole sentences; no key is one the grader does not know."""
    import tomllib

    folder = project.source_notebook(chapter).parent
    raw = tomllib.loads((folder / hints.FILE).read_text(encoding="utf-8"))
    answers = [cells.grade_id(c) for c in read(project.source_notebook(chapter)).cells
               if cells.is_solution(c) and c.cell_type == "code"]
    assert sorted(raw) == sorted(answers), f"{chapter}: tables for {sorted(raw)}, exercises {sorted(answers)}"
    for gid, table in raw.items():
        assert set(table) <= {*hints.KINDS, "default"}, f"{chapter}:{gid}: unknown keys {set(table) - {*hints.KINDS, 'default'}}"
        assert {"value", "default"} <= set(table), f"{chapter}:{gid}: needs at least `value` and `default`"
        for kind, text in table.items():
            assert text.strip().endswith((".", ")", "`")) and len(text) <= 200, f"{chapter}:{gid}.{kind}: {text!r}"


def test_every_general_advice_of_the_checks_is_one_the_hints_replace():
    """The checks' own advice is stripped by text where an exercise's hint replaces it: each advice
    the checks can give must still be found, or a changed sentence would sit beside the hint again."""
    import numpy as np
    import torch

    from course_utils import checks

    def advice(fn, *args):
        try:
            fn(*args)
        except checks.AnswerError as exc:
            return str(exc)
        raise AssertionError(f"{fn.__name__}{args} passed")

    t = torch.zeros(2, 3)
    reasons = [
        advice(checks.check_tensor, t.double(), t),  # dtype
        advice(checks.check_tensor, torch.zeros(2, 3, device="meta"), t),  # device
        advice(checks.check_shape, torch.zeros(3, 2), (2, 3)),  # another order
        advice(checks.check_shape, torch.zeros(6), (2, 3)),  # same numel
        advice(checks.check_shape, torch.zeros(1, 6), (6,)),  # size-1 dims
        advice(checks.check_shape, torch.zeros(3, 3), (3,)),  # the silent broadcast
        advice(checks.check_shape, torch.zeros(0), (3,)),  # empty
        advice(checks.check_tensor, 1.5, t),  # a number
        advice(checks.check_tensor, [1.0], t),  # a list
        advice(checks.check_tensor, np.zeros(3), t),  # an array
        advice(checks.check_value, torch.tensor(2), 2),  # a tensor for a number
    ]
    for reason in reasons:
        assert hints.GENERIC.search(reason), reason
        kept = hints.add(reason, {kind: "Mine." for kind in (*hints.KINDS, "default")})
        what, _, hint = kept.partition(hints.LEAD)
        assert hint == "Mine." and not hints.GENERIC.search(what), kept
