"""course_utils.checks: strict comparisons whose messages name the mistake."""

from pathlib import Path

import pytest
import torch

from course_utils import AnswerError, check_shape, check_tensor, check_value, raises


def message(fn, *args, **kwargs) -> str:
    with pytest.raises(AnswerError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_a_correct_tensor_passes():
    check_tensor(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]))


def test_a_list_is_refused_with_a_hint_to_wrap_it():
    msg = message(check_tensor, [1.0, 2.0], torch.tensor([1.0, 2.0]), name="scores")
    assert "scores should be a torch.Tensor" in msg and "torch.tensor(" in msg


def test_a_tensor_subclass_is_refused():
    class Sneaky(torch.Tensor):
        pass

    fake = torch.tensor([1.0]).as_subclass(Sneaky)
    assert "subclass of torch.Tensor" in message(check_tensor, fake, torch.tensor([1.0]))


def test_an_object_equal_to_everything_is_refused():
    class Always:
        def __eq__(self, other):
            return True

    assert "should be a torch.Tensor" in message(check_tensor, Always(), torch.tensor([1.0]))


def test_the_silent_n_by_n_broadcast_is_named():
    n = 4
    wrong = torch.arange(n).float() - torch.arange(n).float().unsqueeze(1)  # (N, N)
    msg = message(check_tensor, wrong, torch.zeros(n))
    assert "shape (4, 4) but expected (4,)" in msg and "broadcast" in msg


def test_a_missing_unit_dim_suggests_unsqueeze():
    msg = message(check_shape, torch.zeros(5), (5, 1))
    assert "shape (5,) but expected (5, 1)" in msg and "unsqueeze" in msg


def test_a_transposed_answer_suggests_permute():
    assert "permute" in message(check_tensor, torch.zeros(3, 2), torch.zeros(2, 3))


def test_values_right_dtype_wrong_names_the_dtype_and_the_cast():
    msg = message(check_tensor, torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([1.0, 2.0]))
    assert "dtype torch.float64 but expected torch.float32" in msg and ".float()" in msg


def test_no_cast_is_applied_to_integers():
    msg = message(check_tensor, torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))
    assert "torch.int64" in msg


def test_wrong_device_is_named():
    msg = message(check_tensor, torch.zeros(2, device="meta"), torch.zeros(2))
    assert "device 'meta' but expected 'cpu'" in msg


def test_meta_tensors_compare_metadata_only():
    check_tensor(torch.empty(2, 3, device="meta"), torch.empty(2, 3, device="meta"))


def test_wrong_values_report_the_first_difference_and_the_tolerance():
    msg = message(check_tensor, torch.tensor([[1.0, 2.0], [3.0, 5.0]]), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert "1 of 4 values differ" in msg and "index (1, 1)" in msg and "got 5.0, expected 4.0" in msg
    assert "atol=" in msg


def test_nan_matches_nan_only_in_the_same_place():
    nan = float("nan")
    check_tensor(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0]))
    assert "differ" in message(check_tensor, torch.tensor([1.0, nan]), torch.tensor([nan, 1.0]))


def test_checks_survive_a_patched_torch(monkeypatch):
    monkeypatch.setattr(torch, "isclose", lambda *a, **k: torch.ones(2, dtype=torch.bool))
    assert "differ" in message(check_tensor, torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))


def test_check_value_wants_item_for_a_0d_tensor():
    assert ".item()" in message(check_value, torch.tensor(3), 3)


def test_check_value_numbers_tuples_and_dtypes():
    check_value(0.1 + 0.2, 0.3)
    check_value((2, 3), torch.Size([2, 3]))
    check_value(torch.float32, torch.float32)
    assert "should be an int" in message(check_value, True, 1)
    assert "expected torch.float64" in message(check_value, torch.float32, torch.float64)
    assert "shape[1] is 4 but expected 3" in message(check_value, (2, 4), (2, 3), name="shape")


def test_a_list_where_the_exercise_asks_for_a_tuple_is_refused_and_a_shape_counts_as_one():
    """The statement's word decides: a list is not a tuple; a torch.Size is a tuple (a subclass)."""
    msg = message(check_value, [4, 0, 2], (4, 0, 2), name="where_is_max(A, B)")
    assert msg.startswith("where_is_max(A, B) should be a tuple, but it is a list ([4, 0, 2])")
    assert "`return a, b`" in msg
    assert "should be a list, but it is a tuple" in message(check_value, (1, 2), [1, 2])
    check_value(torch.Size([3, 4]), (3, 4))
    check_value((3, 4), torch.Size([3, 4]))
    assert "should be a tuple, but it is a str" in message(check_value, "ab", ("a", "b"))


def test_nested_items_are_named_as_python_indexes_them():
    assert message(check_value, ((1, 2), 3), ((1, 3), 3), name="f(x)").startswith("f(x)[0][1] is 2")
    words = message(check_value, [("Linear", 3, 5)], [("Linear", 3, 4)], name="the layers of make_mlp([3, 4])")
    assert words.startswith("item [0][2] of the layers of make_mlp([3, 4]) is 5 but expected 4")


def test_a_number_where_a_tensor_is_expected_is_told_to_keep_the_tensor():
    """`.item()` then torch.tensor(...) loses the dtype and the device: the hint says so, not "wrap it"."""
    msg = message(check_tensor, 0.98, torch.tensor(0.98, dtype=torch.float64), name="r2_score(y_hat, y)")
    assert "Return the tensor itself" in msg and "Wrap it" not in msg


def test_the_device_hint_fits_a_function_that_takes_a_device_argument():
    msg = message(check_tensor, torch.zeros(2), torch.zeros(2, device="meta"), name="checkerboard(1, 2, device='meta')")
    assert "`device=device`" in msg and "DEVICE" in msg


def test_raises_passes_on_the_right_error_and_keeps_it():
    with raises(ValueError, match="bad") as info:
        raise ValueError("bad input")
    assert isinstance(info.value, ValueError)


def test_raises_fails_when_nothing_is_raised_or_the_message_differs():
    with pytest.raises(AnswerError, match="ran without error"):
        with raises(ValueError):
            pass
    with pytest.raises(AnswerError, match="does not match"):
        with raises(ValueError, match="shape"):
            raise ValueError("dtype")


def test_check_value_refuses_subclasses_that_answer_equal_to_everything():
    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    class LiarStr(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    assert "should be an int" in message(check_value, Liar(1), 5)
    assert "expected 'b'" in message(check_value, LiarStr("a"), "b")


def test_learner_frames_drop_every_course_utils_frame():
    from course_utils.tracebacks import learner_frames

    try:
        check_tensor(torch.zeros(5), torch.zeros(5, 1))
    except AnswerError as exc:
        tb = exc.__traceback__
    kept = learner_frames(tb)
    names = []
    while kept is not None:
        names.append(kept.tb_frame.f_globals["__name__"])
        kept = kept.tb_next
    assert names == [__name__]  # this test's frame only; check_tensor and check_shape are gone


def test_a_failed_check_has_no_ipython_shell_to_render_with_and_says_its_message():
    try:
        check_value(2, 3, name="the count")
    except AnswerError as exc:
        assert exc._render_traceback_() == ["AnswerError: the count is 2 but expected 3."]


_FAILING_CELLS = {
    "check_tensor": ("answer = torch.zeros(5)\ncu.check_tensor(answer, torch.zeros(5, 1), name='the column')",
                     "the column has shape (5,) but expected (5, 1)"),
    "check_value": ("cu.check_value([1, 2.0], [1, 3.0], name='the pair')",
                    "item [1] of the pair is 2.0 but expected 3.0"),
    "check_shape": ("cu.check_shape(torch.zeros(2, 3), (3, 2), name='the grid')",
                    "the grid has shape (2, 3) but expected (3, 2)"),
    "raises": ("with cu.raises(ValueError, match='too big'):\n    int('7')",
               "expected ValueError to be raised, but the code ran without error"),
    "raises_match": ("with cu.raises(ValueError, match='too big'):\n    int('x')",
                     "does not match 'too big'"),
}


@pytest.fixture(scope="module")
def failed_cells():
    """A notebook whose checks fail, run in a real kernel: each cell's error output."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import torch\nimport course_utils as cu")]
    nb.cells += [nbformat.v4.new_code_cell(src) for src, _ in _FAILING_CELLS.values()]
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120).execute()
    errors = {}
    for key, cell in zip(_FAILING_CELLS, nb.cells[1:], strict=True):
        (error,) = [o for o in cell.outputs if o.output_type == "error"]
        errors[key] = error
    return errors


@pytest.mark.slow
@pytest.mark.parametrize("check", list(_FAILING_CELLS))
def test_a_failed_check_shows_the_learners_line_and_message_and_none_of_our_source(failed_cells, check):
    import re

    from course_utils import checks

    error = failed_cells[check]
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    source_lines = {line.strip() for line in Path(checks.__file__).read_text().splitlines() if len(line.strip()) > 12}
    assert "checks.py" not in shown and "contextlib" not in shown, shown
    assert not [line for line in shown.splitlines() if line.strip().lstrip("-> 0123456789") in source_lines], shown
    assert _FAILING_CELLS[check][1] in shown
    assert _FAILING_CELLS[check][0].splitlines()[-1].strip() in shown  # the learner's own line
    assert len(shown.splitlines()) < 25, shown
    # what the grader reads is unchanged
    assert error.ename == "AnswerError" and _FAILING_CELLS[check][1] in error.evalue


def test_a_float32_number_is_quoted_as_float32_writes_it_and_two_of_them_never_read_the_same():
    from course_utils.wording import tidy

    x = torch.tensor([0.45, 0.98], dtype=torch.float32).tolist()
    assert repr(tidy(x)) == "[0.45, 0.98]" and repr(tidy(1 / 3)) == repr(1 / 3)  # a float64 stays as it is
    a, b = torch.tensor([0.45, 0.45000002]).tolist()
    assert a != b and repr(tidy(a)) != repr(tidy(b))
