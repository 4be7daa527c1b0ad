"""A picture of broadcasting's backward: an input's gradient sums over the dims it was stretched along."""

from __future__ import annotations

import itertools
from typing import Any

import torch

from course_utils.arrows import _as_2d
from course_utils.pictures import (
    _GREEN,
    _YELLOW,
    _cell,
    _check_tensor,
    _fmt_shape,
    _fmt_value,
    _wrap,
)


def _stretched(shape: tuple[int, ...], result: tuple[int, ...]) -> list[int]:
    """The dims of ``result`` (0 or 1) that an input of ``shape`` was stretched along."""
    padded = (1,) * (len(result) - len(shape)) + shape
    return [d for d, (n, m) in enumerate(zip(padded, result, strict=True)) if n == 1 and m != 1]


def sum_expression(shape: tuple[int, ...], result: tuple[int, ...]) -> str:
    """How the gradient of an input of ``shape`` broadcast to ``result`` comes from ``grad``, as code.

    The dims the input lacks are summed away; the dims where it has size 1 and ``result`` does not
    are summed with ``keepdim=True``. For example ``(3, 1)`` to ``(3, 4)`` gives
    ``grad.sum(dim=1, keepdim=True)`` and ``(4,)`` to ``(3, 4)`` gives ``grad.sum(dim=0)``.
    """
    missing = len(result) - len(shape)
    kept = [d - missing for d in _stretched(shape, result) if d >= missing]
    expr = "grad"
    if missing:
        expr += f".sum(dim={_dims(list(range(missing)))})"
    if kept:
        expr += f".sum(dim={_dims(kept)}, keepdim=True)"
    return expr


def _dims(dims: list[int]) -> str:
    return str(dims[0]) if len(dims) == 1 else "(" + ", ".join(map(str, dims)) + ")"


def show_broadcast_grad(grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor, title: str | None = None) -> Any:
    """Draw broadcasting's backward for ``c = a + b``: each input's ``.grad`` is ``grad`` summed over the
    dims that input was stretched along.

    ``grad`` (the gradient reaching ``c``, 2-D) is drawn in the middle. An input stretched along
    dim 1 gets its ``.grad`` as a column beside it, with one Σ arrow per row; one stretched along
    dim 0 as a row under (``a``) or over (``b``) it, one Σ arrow per column; one stretched along
    both as a single cell at a corner. The values drawn are ``a.grad`` and ``b.grad`` themselves.

    Args:
        grad: the gradient of ``c``, a 2-D tensor of the broadcast shape.
        a, b: the two inputs, after the backward pass (their ``.grad`` is drawn).
        title: a title; defaults to the shapes and the rule.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: when an input has no ``.grad`` yet, or the shapes do not broadcast to ``grad``'s.
    """
    import matplotlib.pyplot as plt

    g = _as_2d(grad, "show_broadcast_grad")
    if grad.ndim != 2:
        raise ValueError(f"show_broadcast_grad draws a 2-D grad, not shape {_fmt_shape(grad.shape)}")
    result = tuple(grad.shape)
    for name, t in (("a", a), ("b", b)):
        _check_tensor(t, "show_broadcast_grad")
        if t.grad is None:
            raise ValueError(f"{name}.grad is None: run the backward pass first, e.g. c.backward(grad)")
        if torch.broadcast_shapes(a.shape, b.shape) != grad.shape:
            raise ValueError(f"{_fmt_shape(a.shape)} with {_fmt_shape(b.shape)} does not broadcast to"
                             f" grad's {_fmt_shape(grad.shape)}")
    rows, cols = result
    dims = {"a": _stretched(tuple(a.shape), result), "b": _stretched(tuple(b.shape), result)}
    below, above = 0 in dims["a"], 0 in dims["b"]
    left, right = 1 in dims["a"], 1 in dims["b"]
    xlim = (-2.6 if left else -0.4, cols + (2.6 if right else 0.4))
    ylim = (-2.6 if below else -0.9, rows + (2.6 if above else 0.9))
    fig, ax = plt.subplots(figsize=(max(0.62 * (xlim[1] - xlim[0]) + 3.0, 7.0),
                                    0.62 * (ylim[1] - ylim[0]) + 1.4))
    for r, c in itertools.product(range(rows), range(cols)):
        _cell(ax, c, rows - 1 - r, _fmt_value(g[r, c].item()), _YELLOW, "grad")
    grad_label = f"grad of c = a + b {_fmt_shape(result)}"
    if not above:
        ax.text(cols / 2, rows + 0.2, grad_label, ha="center", va="bottom", fontsize=9)
    elif not below:
        ax.text(cols / 2, -0.2, grad_label, ha="center", va="top", fontsize=9)
    else:
        ax.text(cols + 0.2, rows / 2, grad_label, ha="left", va="center", fontsize=9)
    notes = []
    for name, t, side in (("a", a, -1), ("b", b, 1)):
        stretched = dims[name]
        values = t.grad.detach().cpu().reshape(-1).tolist()
        label = f"{name}.grad {_fmt_shape(t.shape)}"
        if stretched == [1]:  # a column beside the grid: each row sums into one cell
            x = -2.4 if side < 0 else cols + 1.4
            for r, v in enumerate(values):
                _cell(ax, x, rows - 1 - r, _fmt_value(v), _GREEN, f"{name}.grad")
                start, end = (0, x + 1) if side < 0 else (cols, x)
                ax.annotate("", xy=(end, rows - 0.5 - r), xytext=(start, rows - 0.5 - r),
                            arrowprops={"arrowstyle": "-|>", "color": "black", "shrinkA": 1, "shrinkB": 1})
                ax.text((start + end) / 2, rows - 0.42 - r, "Σ", ha="center", va="bottom", fontsize=9)
            ax.text(x + 0.5, rows + 0.25 if side < 0 else -0.3, label, ha="center",
                    va="bottom" if side < 0 else "top", fontsize=9)
        elif stretched == [0]:  # a row under (a) or over (b) the grid: each column sums into one cell
            y = -2.4 if side < 0 else rows + 1.4
            for c, v in enumerate(values):
                _cell(ax, c, y, _fmt_value(v), _GREEN, f"{name}.grad")
                start, end = (0, y + 1) if side < 0 else (rows, y)
                ax.annotate("", xy=(c + 0.5, end), xytext=(c + 0.5, start),
                            arrowprops={"arrowstyle": "-|>", "color": "black", "shrinkA": 1, "shrinkB": 1})
                ax.text(c + 0.58, (start + end) / 2, "Σ", ha="left", va="center", fontsize=9)
            ax.text(cols + 0.2, y + 0.5, label, ha="left", va="center", fontsize=9)
        elif stretched == [0, 1]:  # one cell at a corner: everything sums into it
            x, y = (-2.4, -2.4) if side < 0 else (cols + 1.4, rows + 1.4)
            _cell(ax, x, y, _fmt_value(values[0]), _GREEN, f"{name}.grad")
            corner = (0, 0) if side < 0 else (cols, rows)
            ax.annotate("", xy=(x + 1, y + 1) if side < 0 else (x, y), xytext=corner,
                        arrowprops={"arrowstyle": "-|>", "color": "black", "shrinkA": 1, "shrinkB": 1})
            ax.text(x + 1.2 if side < 0 else x - 0.2, y + 0.5, f"{label}: Σ of all",
                    ha="left" if side < 0 else "right", va="center", fontsize=9)
        how = f"{name}.grad = {sum_expression(tuple(t.shape), result)}"
        if stretched:
            notes.append(f"{name} {_fmt_shape(t.shape)} was stretched along dim"
                         f" {' and '.join(map(str, stretched))}: {how}")
        else:
            notes.append(f"{name} {_fmt_shape(t.shape)} was not stretched: {how}")
    ax.text(0.0, 0.0, "\n".join(notes), transform=ax.transAxes, ha="left", va="top", fontsize=8,
            color="dimgray")
    text = title if title is not None else (
        f"backward of {_fmt_shape(a.shape)} + {_fmt_shape(b.shape)} → {_fmt_shape(result)}:"
        " each input's grad is grad summed over the dims it was stretched along")
    ax.set_title(_wrap(text, fig), fontsize=10)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig
