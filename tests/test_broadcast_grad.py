"""course_utils.broadcast_grad: an input's gradient is the incoming one summed over the dims it was stretched along."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless, as under CI and papermill

import pytest  # noqa: E402
import torch  # noqa: E402
from figures import texts  # noqa: E402

from course_utils.broadcast_grad import show_broadcast_grad, sum_expression  # noqa: E402


def backward(shape_a, shape_b):
    """a + b for leaves of these shapes, backward with grad = 0, 1, 2, ...; returns (grad, a, b)."""
    a = torch.ones(shape_a, requires_grad=True)
    b = torch.ones(shape_b, requires_grad=True)
    c = a + b
    grad = torch.arange(float(c.numel())).reshape(c.shape)
    c.backward(grad)
    return grad, a, b


@pytest.mark.parametrize("shape_a, shape_b", [((3, 1), (1, 4)), ((3, 4), (4,)), ((1, 4), (3, 1)),
                                              ((), (2, 3)), ((1,), (2, 3)), ((1, 1), (2, 3)),
                                              ((2, 3), (2, 3)), ((4,), (1, 4))])
def test_the_sum_expression_gives_autograds_gradient(shape_a, shape_b):
    grad, a, b = backward(shape_a, shape_b)
    for t in (a, b):
        expr = sum_expression(tuple(t.shape), tuple(grad.shape))
        assert torch.equal(eval(expr, {"grad": grad}), t.grad), expr  # torch is the oracle


def test_the_expressions_read_as_the_chapter_writes_them():
    assert sum_expression((3, 1), (3, 4)) == "grad.sum(dim=1, keepdim=True)"
    assert sum_expression((4,), (3, 4)) == "grad.sum(dim=0)"
    assert sum_expression((), (3, 4)) == "grad.sum(dim=(0, 1))"
    assert sum_expression((3, 4), (3, 4)) == "grad"


def test_the_picture_writes_the_real_gradients_beside_the_dims_they_sum():
    """(3, 1) + (1, 4): a.grad is the column of row sums, b.grad the row of column sums."""
    grad, a, b = backward((3, 1), (1, 4))
    fig = show_broadcast_grad(grad, a, b)
    assert texts(fig, "grad") == [f"{v:.3g}" for v in grad.flatten().tolist()]
    assert texts(fig, "a.grad") == ["6", "22", "38"] == [f"{v:.3g}" for v in a.grad.flatten().tolist()]
    assert texts(fig, "b.grad") == ["12", "15", "18", "21"]
    ax = fig.axes[0]
    assert sum(t.get_text() == "Σ" for t in ax.texts) == 3 + 4  # one sum per row of a, per column of b
    notes = " ".join(t.get_text() for t in ax.texts)
    assert "a.grad = grad.sum(dim=1, keepdim=True)" in notes and "b.grad = grad.sum(dim=0, keepdim=True)" in notes
    fig.canvas.draw()


def test_an_input_stretched_along_both_dims_sums_into_one_corner_cell():
    grad, a, b = backward((1,), (2, 3))
    fig = show_broadcast_grad(grad, a, b)
    assert texts(fig, "a.grad") == ["15"]  # 0 + 1 + ... + 5
    assert texts(fig, "b.grad") == []  # not stretched: nothing beside the grid
    assert any("b.grad = grad" in t.get_text() for t in fig.axes[0].texts)


def test_the_picture_refuses_inputs_before_backward_and_shapes_that_do_not_fit():
    a = torch.ones(3, 1, requires_grad=True)
    b = torch.ones(1, 4, requires_grad=True)
    with pytest.raises(ValueError, match="backward"):
        show_broadcast_grad(torch.ones(3, 4), a, b)
    grad, a, b = backward((3, 1), (1, 4))
    with pytest.raises(ValueError, match="does not broadcast"):
        show_broadcast_grad(torch.ones(3, 5), a, b)
    with pytest.raises(ValueError, match="2-D"):
        show_broadcast_grad(torch.ones(4), a, b)
