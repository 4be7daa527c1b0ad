"""course_utils.plots: the annotated grid writes every value in its cell."""

import pytest
import torch

import course_utils as cu


def test_grid_annotates_every_value():
    ax = cu.show_grid(torch.tensor([[1, 2, 3], [4, 5, 6]]), title="t")
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["1", "2", "3", "4", "5", "6"]
    assert ax.get_title() == "t"


def test_grid_draws_a_1d_tensor_as_one_row_and_formats_floats():
    ax = cu.show_grid(torch.tensor([0.5, 1.25]))
    assert [t.get_text() for t in ax.texts] == ["0.50", "1.25"]
    assert "shape (2,)" in ax.get_title()


def test_grid_refuses_3d_and_meta_tensors_with_a_hint():
    with pytest.raises(ValueError, match="t\\[0\\]"):
        cu.show_grid(torch.zeros(2, 2, 2))
    with pytest.raises(ValueError, match="meta"):
        cu.show_grid(torch.zeros(2, device="meta"))
