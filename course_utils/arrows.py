"""Pictures with arrows: where gather and scatter move each element of a tensor."""

from __future__ import annotations

import itertools
from typing import Any

import torch

from course_utils.pictures import (
    _GREY,
    _RED,
    MAX_CELLS,
    _cell,
    _check_tensor,
    _fmt_shape,
    _fmt_value,
    _palette,
    _wrap,
)

Position = tuple[int, ...]

_LANE = 0.22  # the depth of one lane of arrows in the gap under a row


def index_arrows(kind: str, dim: int, index: torch.Tensor) -> list[tuple[Position, Position]]:
    """Which element goes where in ``gather`` or ``scatter`` along ``dim``: a list of (from, to).

    For ``kind="gather"``, ``out[to] = src[from]``: ``to`` runs over every position of ``index``,
    and ``from`` is ``to`` with its ``dim`` entry replaced by ``index[to]``. For
    ``kind="scatter"``, ``out[to] = src[from]`` the other way round: ``from`` runs over every
    position of ``index``, and ``to`` is ``from`` with its ``dim`` entry replaced by ``index[from]``.

    Args:
        kind: ``"gather"`` or ``"scatter"``.
        dim: the dim the index runs along (negative counts from the end).
        index: an integer tensor, as given to ``torch.gather`` or ``Tensor.scatter_``.

    Returns:
        One ``(from, to)`` pair of positions (tuples of ints) per element of ``index``, row by row.
    """
    if kind not in ("gather", "scatter"):
        raise ValueError(f"index_arrows draws 'gather' or 'scatter', not {kind!r}")
    _check_tensor(index, "index_arrows")
    if index.dtype != torch.int64:
        raise ValueError(f"an index is int64, as torch.gather wants; this one is {index.dtype}")
    dim = dim % max(index.ndim, 1)
    values = index.detach().cpu().reshape(-1).tolist()
    arrows = []
    for pos, i in zip(itertools.product(*(range(n) for n in index.shape)), values, strict=True):
        moved = pos[:dim] + (int(i),) + pos[dim + 1 :]
        arrows.append((moved, pos) if kind == "gather" else (pos, moved))
    return arrows


def _as_2d(t: torch.Tensor, what: str) -> torch.Tensor:
    _check_tensor(t, what)
    if t.ndim not in (1, 2) or t.shape[-1] > MAX_CELLS:
        raise ValueError(f"{what} draws 1-D or 2-D tensors of at most {MAX_CELLS} columns, not shape"
                         f" {_fmt_shape(t.shape)}")
    return t.detach().cpu().reshape(-1, t.shape[-1])


class _Layout:
    """Cells placed by (u, v): u runs along the gathered dim, v across it (rows apart by a gap for
    the arrows). Drawn across (u → x) when the dim is the last one, down (u → y) when it is dim 0."""

    def __init__(self, ax: Any, across: bool, step: float) -> None:
        self.ax, self.across, self.step = ax, across, step

    def xy(self, u: float, v: float) -> tuple[float, float]:
        return (u, -v) if self.across else (v, -u)

    def cell(self, u: float, v: int, text: str, colour: Any, role: str, **kw: Any) -> None:
        corner = (u, v * self.step + 1) if self.across else (u + 1, v * self.step)  # lower left
        _cell(self.ax, *self.xy(*corner), text, colour, role, **kw)

    def grid(self, t: torch.Tensor, u0: float, colour_of: Any, role: str, label: str) -> None:
        """Draw 2-D ``t`` with (row, col) along (v, u) when across, (u, v) when down."""
        for r, c in itertools.product(range(t.shape[0]), range(t.shape[1])):
            u, v = (c, r) if self.across else (r, c)
            colour = colour_of((r, c))
            self.cell(u0 + u, v, _fmt_value(t[r, c].item()), colour, role,
                      color="black" if colour != _GREY else "gray")
        along = t.shape[1] if self.across else t.shape[0]
        if self.across:
            self.ax.text(u0 + along / 2, 0.15, label, ha="center", va="bottom", fontsize=9)
        else:
            self.ax.text(-0.25, -(u0 + along / 2), label, ha="right", va="center", fontsize=9)

    def arrow(self, u_from: float, u_to: float, v: int, lane: int, colour: str = "black") -> None:
        """From the middle of cell (u_from, v) into cell (u_to, v), through lane ``lane`` of the gap."""
        edge = v * self.step + 1
        depth = edge + _LANE * (lane + 1)
        path = [self.xy(u_from + 0.5, edge), self.xy(u_from + 0.5, depth), self.xy(u_to + 0.5, depth)]
        xs, ys = zip(*path, strict=True)
        self.ax.plot(xs, ys, color=colour, linewidth=1.1, solid_capstyle="round", gid="arrow")
        self.ax.annotate("", xy=self.xy(u_to + 0.5, edge), xytext=path[-1],
                         arrowprops={"arrowstyle": "-|>", "color": colour, "linewidth": 1.1,
                                     "shrinkA": 0, "shrinkB": 0})


def _index_picture(kind: str, src: torch.Tensor, dim: int, index: torch.Tensor, out: torch.Tensor,
                   title: str | None, names: tuple[str, str]) -> Any:
    import matplotlib.pyplot as plt

    s2, i2, o2 = _as_2d(src, f"show_{kind}"), _as_2d(index, f"show_{kind}"), _as_2d(out, f"show_{kind}")
    dim = dim % src.ndim
    across = src.ndim == 1 or dim == 1
    arrows = [(_pos2(a, src.ndim), _pos2(b, src.ndim)) for a, b in index_arrows(kind, dim, index)]
    per_row: dict[int, int] = {}
    lanes = []
    for a, _ in arrows:
        v = a[0] if across else a[1]
        lanes.append(per_row.get(v, 0))
        per_row[v] = lanes[-1] + 1
    step = 1 + _LANE * (max(per_row.values(), default=0) + 1.5)

    hits: dict[Position, int] = {}
    for _, b in arrows:
        hits[b] = hits.get(b, 0) + 1
    colour_src = {a: _palette(k) for k, a in enumerate(dict.fromkeys(a for a, _ in arrows))}
    colour_out = {b: (_RED if hits[b] > 1 else colour_src[a]) for a, b in arrows}
    along = 1 if across else 0
    u_src, u_mid = 0.0, s2.shape[along] + 1.6
    u_end = u_mid + (o2.shape[along] if kind == "gather" else i2.shape[along]) + 1.6

    cols = u_end + (i2.shape[along] if kind == "gather" else o2.shape[along])
    other = max(t.shape[1 - along] for t in (s2, i2, o2))
    size = (0.62 * cols + 1.4, 0.62 * other * step + 1.6)
    fig, ax = plt.subplots(figsize=size if across else (0.62 * other * step + 3.4, 0.62 * cols + 1.2))
    lay = _Layout(ax, across, step)
    sep = "\n" if across else " "
    src_name, out_name = names
    lay.grid(s2, u_src, lambda p: colour_src.get(p, _GREY), "src", f"{src_name}{sep}{_fmt_shape(src.shape)}")
    if kind == "gather":
        lay.grid(o2, u_mid, lambda p: colour_out[p], "out", f"{out_name}{sep}{_fmt_shape(out.shape)}")
        lay.grid(i2, u_end, lambda p: colour_out[p], "index", f"index{sep}{_fmt_shape(index.shape)}")
    else:
        lay.grid(i2, u_mid, lambda p: colour_src[p], "index", f"index{sep}{_fmt_shape(index.shape)}")
        lay.grid(o2, u_end, lambda p: colour_out.get(p, _GREY), "out", f"{out_name}{sep}{_fmt_shape(out.shape)}")
    u_to = u_mid if kind == "gather" else u_end
    for (a, b), lane in zip(arrows, lanes, strict=True):
        v = a[0] if across else a[1]
        lay.arrow(u_src + a[along], u_to + b[along], v, lane, "firebrick" if hits[b] > 1 else "black")
    for b, k in hits.items():
        if k > 1:
            x, y = lay.xy(u_to + b[along] + 0.5, (b[0] if across else b[1]) * step - 0.18)
            ax.text(x, y, f"×{k}", ha="center", va="bottom", fontsize=8, color="firebrick",
                    fontweight="bold", gid="clash")
    rule = {("gather", 1): "{o}[i, j] = {s}[i, index[i, j]]", ("gather", 0): "{o}[i, j] = {s}[index[i, j], j]",
            ("scatter", 1): "{o}[i, index[i, j]] = {s}[i, j]", ("scatter", 0): "{o}[index[i, j], j] = {s}[i, j]"}
    rule_text = (rule[(kind, dim)] if src.ndim == 2 else (
        "{o}[i] = {s}[index[i]]" if kind == "gather" else "{o}[index[i]] = {s}[i]")).format(s=src_name, o=out_name)
    note = "    ×k, red: k writes to one cell, one survives (scatter_add_ adds them)" if (
        kind == "scatter" and max(hits.values(), default=0) > 1) else ""
    call = (f"{out_name} = {src_name}.gather({dim}, index)" if kind == "gather" else
            f"{out_name} = {out_name}.scatter({dim}, index, {src_name})")
    ax.set_title(_wrap(title if title is not None else f"{call}:   {rule_text}", fig), fontsize=10)
    ax.text(0.0, 0.0, f"each arrow: one element of {src_name} and where it lands; one colour per element{note}",
            transform=ax.transAxes, ha="left", va="top", fontsize=7, color="dimgray")
    far = other * step - _LANE  # the last row's lanes end here
    lo, hi = lay.xy(-0.2, far), lay.xy(cols + 0.2, -1.1 if across else -0.2)
    ax.set_xlim(min(lo[0], hi[0]), max(lo[0], hi[0]))
    ax.set_ylim(min(lo[1], hi[1]), max(lo[1], hi[1]))
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig


def _pos2(pos: Position, ndim: int) -> Position:
    return (0, pos[0]) if ndim == 1 else pos


def show_gather(src: torch.Tensor, dim: int, index: torch.Tensor, title: str | None = None, *,
                names: tuple[str, str] = ("src", "out")) -> Any:
    """Draw ``torch.gather(src, dim, index)``: src, the result and the index, with one arrow per element
    from the element of src it picks to its place in the result.

    The result drawn is ``torch.gather``'s own; the arrows are :func:`index_arrows`. An element of
    src and the result cells it lands in share a colour; src elements nothing picks are grey.

    Args:
        src: a 1-D or 2-D tensor (at most ``MAX_CELLS`` columns).
        dim: the dim to pick along.
        index: an int64 tensor with src's number of dims, as ``torch.gather`` takes it.
        title: a title; defaults to the rule, e.g. ``out[i, j] = src[i, index[i, j]]``.
        names: what to call src and the result in the labels, e.g. ``("probs", "picked")``.

    Returns:
        The matplotlib Figure.
    """
    return _index_picture("gather", src, dim, index, torch.gather(src, dim, index), title, names)


def show_scatter(out: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor,
                 title: str | None = None, *, names: tuple[str, str] = ("src", "out")) -> Any:
    """Draw ``out.scatter(dim, index, src)``: src, the index and the result, with one arrow per element
    of src to the cell of the result it is written to.

    The result drawn is ``torch.scatter``'s own. Cells no arrow reaches keep ``out``'s value (grey);
    a cell reached by several arrows is red and marked ``×k``: one of the writes survives.

    Args:
        out: the 1-D or 2-D tensor written into (it is not changed: ``scatter`` returns a copy).
        dim: the dim to write along.
        index: an int64 tensor of src's shape (or smaller), as ``Tensor.scatter_`` takes it.
        src: the values to write.
        title: a title; defaults to the rule, e.g. ``out[i, index[i, j]] = src[i, j]``.
        names: what to call src and the result in the labels.

    Returns:
        The matplotlib Figure.
    """
    return _index_picture("scatter", src, dim, index, torch.scatter(out, dim, index, src), title, names)

