"""course_utils.data: the digits load offline, split reproducibly, and keep every sample once."""

import numpy as np
import pytest
import torch

from course_utils.data import Split, load_digits


def _sorted_rows(a: np.ndarray) -> np.ndarray:
    """Rows of ``a`` in lexicographic order, so two arrays can be compared as multisets of rows."""
    return a[np.lexsort(a.T[::-1])]


def test_default_split_has_the_documented_shapes_dtypes_and_ranges():
    split = load_digits()
    assert isinstance(split, Split)
    X_train, y_train, X_test, y_test = split
    assert X_train.shape == (1348, 64) and X_test.shape == (449, 64)
    assert y_train.shape == (1348,) and y_test.shape == (449,)
    assert X_train.dtype == X_test.dtype == torch.float32
    assert y_train.dtype == y_test.dtype == torch.int64
    assert X_train.min() >= 0 and X_train.max() == 1.0
    assert set(torch.cat([y_train, y_test]).unique().tolist()) == set(range(10))
    assert X_train.device.type == "cpu"


def test_pixels_are_the_sklearn_values_divided_by_16():
    X_train, _, X_test, _ = load_digits()
    levels = torch.cat([X_train, X_test]) * 16
    assert torch.equal(levels, levels.round())  # the original 0..16 intensity levels


def test_train_and_test_together_are_exactly_the_sklearn_dataset():
    from sklearn.datasets import load_digits as sklearn_load_digits

    bunch = sklearn_load_digits()
    X_train, y_train, X_test, y_test = load_digits(seed=3)
    ours = torch.cat(
        [torch.cat([X_train, X_test]) * 16, torch.cat([y_train, y_test]).unsqueeze(1)], dim=1
    )
    theirs = np.concatenate([bunch.data, bunch.target[:, None]], axis=1)
    np.testing.assert_array_equal(
        _sorted_rows(ours.double().numpy()), _sorted_rows(theirs.astype(np.float64))
    )


def test_same_seed_gives_the_same_split_and_another_seed_another():
    a, b, c = load_digits(seed=5), load_digits(seed=5), load_digits(seed=6)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a.y_test, c.y_test)


def test_the_global_rng_is_left_untouched():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    load_digits(seed=0)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(("fraction", "n_test"), [(0.1, 180), (0.5, 898), (0.9, 1617)])
def test_test_fraction_sets_the_size_of_the_test_part(fraction, n_test):
    split = load_digits(fraction)
    assert len(split.y_test) == len(split.X_test) == n_test
    assert len(split.y_train) == len(split.X_train) == 1797 - n_test


@pytest.mark.parametrize("fraction", [0.0, 1.0, 1e-6, -0.5, 2.0])
def test_a_fraction_that_empties_one_part_is_refused(fraction):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        load_digits(fraction)


def test_tensors_are_created_on_the_requested_device():
    split = load_digits(device="meta")
    assert all(t.device.type == "meta" for t in split)
    assert split.X_train.shape == (1348, 64)
