"""course_utils.checks: strict comparisons whose messages name the mistake."""

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
    assert "item 1 of shape" in message(check_value, (2, 4), (2, 3), name="shape")


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
