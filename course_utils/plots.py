"""Pictures of small tensors: an annotated grid of values (headless-safe)."""

from __future__ import annotations

from typing import Any

import torch


def show_grid(
    t: torch.Tensor,
    title: str | None = None,
    *,
    ax: Any = None,
    fmt: str | None = None,
    cmap: str = "viridis",
) -> Any:
    """Draw a 0-, 1- or 2-D tensor as a grid of coloured cells with each value written in.

    Args:
        t: the tensor (any dtype, any device; it is copied to the CPU for drawing).
        title: a title above the grid; defaults to the shape and dtype.
        ax: a matplotlib Axes to draw on; a new figure is made when omitted.
        fmt: a format for the numbers, e.g. ``"{:.2f}"``; chosen from the dtype by default.
        cmap: matplotlib colour map for the cells.

    Returns:
        The matplotlib Axes drawn on.
    """
    import matplotlib.pyplot as plt

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"show_grid draws a torch.Tensor, not a {type(t).__name__}")
    if t.ndim > 2:
        raise ValueError(
            f"show_grid draws tensors with at most 2 dims; this one has shape {tuple(t.shape)}."
            " Pick a slice, e.g. t[0]."
        )
    if t.device.type == "meta":
        raise ValueError("a tensor on the 'meta' device has no values to draw")
    data = t.detach().cpu()
    grid = data.reshape(1, -1) if data.ndim < 2 else data
    values = grid.to(torch.float64) if not grid.dtype.is_complex else grid.abs().to(torch.float64)
    if fmt is None:
        fmt = "{:.2f}" if data.dtype.is_floating_point else "{}"
    rows, cols = grid.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(max(2.0, 0.6 * cols + 1), max(1.2, 0.6 * rows + 0.6)))
    ax.imshow(values.numpy(), cmap=cmap, aspect="equal")
    lo, hi = (float(values.min()), float(values.max())) if values.numel() else (0.0, 0.0)
    mid = (lo + hi) / 2
    for i in range(rows):
        for j in range(cols):
            v = grid[i, j].item()
            colour = "black" if float(values[i, j]) > mid else "white"
            ax.text(j, i, fmt.format(v), ha="center", va="center", color=colour, fontsize=9)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.set_title(title if title is not None else f"shape {tuple(t.shape)}, {t.dtype}")
    return ax
