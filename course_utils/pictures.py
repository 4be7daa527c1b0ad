"""Pictures of how tensors sit in memory: strides, broadcasting and boolean masks (headless-safe)."""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Sequence
from typing import Any

import torch

#: Pictures stay readable up to this many cells in a row; bigger tensors are refused.
MAX_CELLS = 48

_GREY = "#e6e6e6"
_BLUE = "#cfe2f3"
_ORANGE = "#f9cb9c"
_RED = "#ea9999"
_GREEN = "#b6d7a8"
_YELLOW = "#ffe599"


def _wrap(text: str, fig: Any) -> str:
    """Wrap a title to the figure's width (about 11 characters an inch at font size 10)."""
    return "\n".join(textwrap.wrap(text, max(40, int(fig.get_figwidth() * 11))))


def _palette(k: int) -> Any:
    """A light colour for storage cell ``k`` (19 distinct pastels, then they repeat)."""
    import matplotlib.pyplot as plt

    colours = list(plt.get_cmap("Set3").colors) + list(plt.get_cmap("Pastel1").colors)
    colours = [c for c in colours if max(c) - min(c) > 0.05]  # drop the greys: grey is "unused"
    return colours[k % len(colours)]


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, complex):
        return f"{v:.2g}"
    return str(v)


def _fmt_shape(shape: Sequence[int]) -> str:
    dims = tuple(int(d) for d in shape)
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


def _cell(
    ax: Any, x: float, y: float, text: str, colour: Any, role: str, **text_kw: Any
) -> None:
    """Draw one unit cell with its lower-left corner at (x, y) and ``text`` in its middle.

    The patch and the text get ``role`` as their gid, so a test can find, e.g., every
    ``"result"`` cell without relying on coordinates.
    """
    from matplotlib.patches import Rectangle

    ax.add_patch(Rectangle((x, y), 1, 1, facecolor=colour, edgecolor="black", linewidth=1,
                           gid=role))
    ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=9, gid=role, **text_kw)


def _finish(ax: Any, width: float, height: float) -> None:
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-0.6, height + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")


def _check_tensor(t: Any, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} draws a torch.Tensor, not a {type(t).__name__}")
    if t.device.type == "meta":
        raise ValueError(f"{what}: a tensor on the 'meta' device has no values to draw")


def _grid_rows(shape: Sequence[int]) -> tuple[int, int, list[tuple[int, ...]]]:
    """Lay out any-rank indices as rows (all dims but the last) by columns (the last dim)."""
    cols = shape[-1] if len(shape) else 1
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    indices = list(itertools.product(*(range(d) for d in shape)))
    return rows, cols, indices


def show_strides(t: torch.Tensor, title: str | None = None) -> Any:
    """Draw a tensor's storage as a row of cells, and each element with the offset it reads.

    The top row is the storage, the 1-D block of memory the tensor reads from, with each
    cell's index under it. Below it, the tensor's elements (the last dim across, all
    others down) show their value and ``@offset``, the storage index they live at:
    ``storage_offset + sum(index[d] * stride[d])``. An element and its storage cell share a
    colour. Storage cells no element reads are grey; cells read by several elements (a
    stride of 0, as after ``expand``) are marked ``×k``.

    Args:
        t: a small tensor (its storage at most ``MAX_CELLS`` elements), on any real device.
        title: a title; defaults to the shape, stride, storage offset and contiguity.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: for a tensor too big to draw, or one on the ``meta`` device.
    """
    import matplotlib.pyplot as plt

    _check_tensor(t, "show_strides")
    n_storage = t.untyped_storage().nbytes() // t.element_size()
    if n_storage > MAX_CELLS:
        raise ValueError(
            f"show_strides draws storages of at most {MAX_CELLS} elements; this tensor's storage"
            f" has {n_storage}. Try a smaller example, e.g. torch.arange(12).reshape(3, 4)."
        )
    storage = torch.as_strided(t.detach(), (n_storage,), (1,), 0).cpu().tolist()
    shape, stride, base = tuple(t.shape), t.stride(), t.storage_offset()
    rows, cols, indices = _grid_rows(shape)
    offsets = [base + sum(i * s for i, s in zip(idx, stride, strict=True)) for idx in indices]
    readers = {o: offsets.count(o) for o in set(offsets)}

    colour_of = {o: _palette(o) for o in readers}
    width = max(n_storage, cols + (1 if len(shape) > 1 else 0) + (3 if len(shape) == 2 else 0))
    fig, (ax_s, ax_t) = plt.subplots(
        2, 1, figsize=(max(0.6 * width + 1.2, 6.0), 0.6 * rows + 2.8),
        gridspec_kw={"height_ratios": [1.6, rows + 0.8]},
    )

    for i, v in enumerate(storage):
        used = i in readers
        _cell(ax_s, i, 0, _fmt_value(v), colour_of[i] if used else _GREY,
              "storage" if used else "unused", alpha=1.0 if used else 0.5)
        ax_s.text(i + 0.5, -0.35, str(i), ha="center", va="center", fontsize=7, color="dimgray")
        if readers.get(i, 0) > 1:
            ax_s.text(i + 0.5, 1.3, f"×{readers[i]}", ha="center", va="center", fontsize=8,
                      color="firebrick", fontweight="bold", gid="shared")
    ax_s.set_title("storage (the memory), with each cell's index", fontsize=9, loc="left")
    _finish(ax_s, width, 1.6)

    left = 1 if len(shape) > 1 else 0
    values = t.detach().cpu().reshape(-1).tolist() if t.numel() else []
    for k, (idx, off) in enumerate(zip(indices, offsets, strict=True)):
        r, c = divmod(k, cols)
        y = rows - 1 - r
        _cell(ax_t, left + c, y, f"{_fmt_value(values[k])}\n@{off}", colour_of[off], "element")
        if c == 0 and len(shape) > 1:
            label = "[" + ", ".join(map(str, idx[:-1])) + "]"
            ax_t.text(left - 0.1, y + 0.5, label, ha="right", va="center", fontsize=7)
    if len(shape) == 2 and t.numel():
        ax_t.text(left + cols + 0.2, rows - 0.5, f"→ next column: +{stride[1]}", ha="left",
                  va="center", fontsize=8)
        ax_t.text(left + cols + 0.2, rows - 1.5 if rows > 1 else rows - 0.9,
                  f"↓ next row: +{stride[0]}", ha="left", va="center", fontsize=8)
    walk = " + ".join(f"i{d}·{s}" for d, s in enumerate(stride)) or "0"
    ax_t.set_title(
        f"elements: value and @offset = {base} + {walk}", fontsize=9, loc="left"
    )
    _finish(ax_t, width, rows + 0.2)

    contiguous = "contiguous" if t.is_contiguous() else "NOT contiguous"
    fig.suptitle(
        _wrap(
            title if title is not None
            else f"shape {_fmt_shape(shape)}   stride {_fmt_shape(stride)}"
            f"   storage_offset {base}   ({contiguous})",
            fig,
        ),
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def _as_shape(x: Any) -> tuple[int, ...]:
    if isinstance(x, torch.Tensor):
        return tuple(x.shape)
    if isinstance(x, int):
        return (x,)
    return tuple(int(d) for d in x)


def show_broadcast(shape_a: Any, shape_b: Any) -> Any:
    """Draw two shapes right-aligned, the dims that stretch, and the broadcast result.

    Each column is one dim, counted from the right (``dim -1`` is the last). A missing
    dim shows as ``(1)``: it counts as 1. A size that stretches is drawn orange as
    ``1→n`` (or ``(1)→n``); sizes that cannot be broadcast (different, and neither is 1)
    are red and marked ``≠``, their result cell is a red ``✗``, and the title says why
    instead of giving a shape. Nothing is raised: the picture is the explanation.

    Args:
        shape_a: a shape (tuple, list, ``torch.Size``) or a tensor, whose shape is used.
        shape_b: the same for the second operand.

    Returns:
        The matplotlib Figure. Its title gives the result shape, or the error.
    """
    import matplotlib.pyplot as plt

    a, b = _as_shape(shape_a), _as_shape(shape_b)
    n = max(len(a), len(b))
    if n > MAX_CELLS:
        raise ValueError(f"show_broadcast draws at most {MAX_CELLS} dims, not {n}")
    pa: list[int | None] = [None] * (n - len(a)) + list(a)
    pb: list[int | None] = [None] * (n - len(b)) + list(b)
    result: list[int | None] = []
    bad: list[int] = []
    for k, (x, y) in enumerate(zip(pa, pb, strict=True)):
        sx, sy = 1 if x is None else x, 1 if y is None else y
        if sx == sy or sx == 1 or sy == 1:
            result.append(sy if sx == 1 else sx)
        else:
            result.append(None)
            bad.append(k)

    fig, ax = plt.subplots(figsize=(max(1.3 * n + 2.4, 6.0), 3.4))
    left, step = 1.6, 1.3
    for k in range(n):
        ax.text(left + step * k + 0.5, 3.75, f"dim {k - n}", ha="center", va="center",
                fontsize=8, color="dimgray")
    for row, (name, padded) in enumerate((("a", pa), ("b", pb))):
        y = 2.55 - 1.15 * row
        ax.text(left - 0.2, y + 0.5, name, ha="right", va="center", fontsize=10)
        for k, size in enumerate(padded):
            x = left + step * k
            stretches = result[k] is not None and result[k] != 1
            if k in bad:
                _cell(ax, x, y, f"{size} ≠", _RED, name)
            elif size is None:
                _cell(ax, x, y, f"(1)→{result[k]}" if stretches else "(1)",
                      _ORANGE if stretches else _GREY, name)
            elif size == 1 and stretches:
                _cell(ax, x, y, f"1→{result[k]}", _ORANGE, name)
            else:
                _cell(ax, x, y, str(size), _BLUE, name)
    ax.plot([left - 0.1, left + step * n - 0.2], [1.2, 1.2], color="black", linewidth=1)
    ax.text(left - 0.2, 0.5, "result", ha="right", va="center", fontsize=10)
    for k, size in enumerate(result):
        x = left + step * k
        if size is None:
            _cell(ax, x, 0, "✗", _RED, "result", color="darkred", fontweight="bold")
        else:
            _cell(ax, x, 0, str(size), _YELLOW if bad else _GREEN, "result")
    ax.text(0, -0.45, "(1): missing dim, counts as 1    1→n: stretches (stride 0, no copy)"
            "    ≠: sizes differ, neither is 1", ha="left", va="center", fontsize=7,
            color="dimgray")
    if bad:
        k = bad[-1]
        title = (
            f"cannot broadcast {_fmt_shape(a)} with {_fmt_shape(b)}: at dim {k - n} the sizes"
            f" {pa[k]} and {pb[k]} differ and neither is 1"
        )
    else:
        out = tuple(d for d in result if d is not None)
        title = f"{_fmt_shape(a)} with {_fmt_shape(b)} broadcasts to {_fmt_shape(out)}"
    ax.set_title(_wrap(title, fig), fontsize=10, color="darkred" if bad else "black")
    ax.set_xlim(-0.2, max(left + step * n + 0.2, 6.5))
    ax.set_ylim(-0.7, 4.0)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig


def show_mask(t: torch.Tensor, mask: torch.Tensor, title: str | None = None) -> Any:
    """Draw a tensor with the elements a boolean mask selects, and the 1-D result ``t[mask]``.

    Selected elements are highlighted and numbered in the order they land in the result
    (row by row); the result is drawn below as a single row, the shape indexing returns.

    Args:
        t: a tensor with at most 2 dims and at most ``MAX_CELLS`` columns.
        mask: a ``torch.bool`` tensor of the same shape as ``t``.
        title: a title; defaults to how many elements were picked.

    Returns:
        The matplotlib Figure.

    Raises:
        ValueError: when the mask is not boolean, or its shape differs from ``t``'s.
    """
    import matplotlib.pyplot as plt

    _check_tensor(t, "show_mask")
    _check_tensor(mask, "show_mask")
    if mask.dtype != torch.bool:
        raise ValueError(
            f"show_mask needs a boolean mask, not {mask.dtype}; build one with a comparison,"
            " e.g. t > 0."
        )
    if mask.shape != t.shape:
        raise ValueError(
            f"show_mask needs a mask of the tensor's shape {_fmt_shape(t.shape)}, not"
            f" {_fmt_shape(mask.shape)}."
        )
    if t.ndim > 2 or (t.shape[-1] if t.ndim else 1) > MAX_CELLS:
        raise ValueError(
            f"show_mask draws tensors of at most 2 dims and {MAX_CELLS} columns, not shape"
            f" {_fmt_shape(t.shape)}. Pick a slice, e.g. t[0]."
        )
    grid = t.detach().cpu().reshape(-1, t.shape[-1] if t.ndim else 1)
    keep = mask.detach().cpu().reshape(grid.shape)
    picked = t.detach().cpu()[mask.detach().cpu()].reshape(-1).tolist()
    rows, cols = grid.shape
    width = max(cols, len(picked), 1)

    fig, (ax_t, ax_r) = plt.subplots(
        2, 1, figsize=(max(0.6 * width + 1.2, 4.5), 0.6 * rows + 2.4),
        gridspec_kw={"height_ratios": [rows + 0.6, 1.6]},
    )
    order = 0
    for r in range(rows):
        for c in range(cols):
            y = rows - 1 - r
            text = _fmt_value(grid[r, c].item())
            if bool(keep[r, c]):
                _cell(ax_t, c, y, text, _ORANGE, "selected", fontweight="bold")
                ax_t.text(c + 0.92, y + 0.85, f"#{order}", ha="right", va="center",
                          fontsize=6, color="firebrick")
                order += 1
            else:
                _cell(ax_t, c, y, text, _GREY, "unselected", color="gray")
    ax_t.set_title(f"t, shape {_fmt_shape(t.shape)}: mask picks the orange cells",
                   fontsize=9, loc="left")
    _finish(ax_t, width, rows)

    for i, v in enumerate(picked):
        _cell(ax_r, i, 0, _fmt_value(v), _ORANGE, "picked")
        ax_r.text(i + 0.5, -0.35, f"#{i}", ha="center", va="center", fontsize=7,
                  color="firebrick")
    if not picked:
        ax_r.text(0, 0.5, "(empty: the mask picks nothing)", ha="left", va="center", fontsize=9)
    ax_r.set_title(f"t[mask], shape ({len(picked)},): always 1-D, a copy", fontsize=9, loc="left")
    _finish(ax_r, width, 1)

    fig.suptitle(
        _wrap(title if title is not None else f"mask picks {len(picked)} of {t.numel()} elements",
              fig),
        fontsize=10,
    )
    fig.tight_layout()
    return fig
