"""course_utils.arrows: each arrow of gather and scatter runs from the element torch moves to where it lands."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless, as under CI and papermill

import pytest  # noqa: E402
import torch  # noqa: E402
from figures import patches, texts  # noqa: E402

from course_utils.arrows import index_arrows, show_gather, show_scatter  # noqa: E402

PROBS = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25], [0.05, 0.05, 0.9], [0.3, 0.3, 0.4]])
LABELS = torch.tensor([1, 0, 2, 0])


def arrow_ends(fig) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """(start, end) of each arrow's drawn path, in data coordinates, in drawing order."""
    lines = [ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == "arrow"]
    return [((ln.get_xdata()[0], ln.get_ydata()[0]), (ln.get_xdata()[-1], ln.get_ydata()[-1])) for ln in lines]


def centre_x(patch) -> float:
    return patch.get_x() + patch.get_width() / 2


def centre_y(patch) -> float:
    return patch.get_y() + patch.get_height() / 2


def test_gather_arrows_start_at_the_label_column_and_end_in_the_row():
    arrows = index_arrows("gather", 1, LABELS.unsqueeze(1))
    assert arrows == [((0, 1), (0, 0)), ((1, 0), (1, 0)), ((2, 2), (2, 0)), ((3, 0), (3, 0))]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_every_gather_arrow_agrees_with_torch_gather(dim):
    src = torch.arange(20.0).reshape(4, 5)
    g = torch.Generator().manual_seed(dim % 2)
    index = torch.randint(0, src.shape[dim], (3, 4), generator=g)
    out = torch.gather(src, dim, index)
    arrows = index_arrows("gather", dim, index)
    assert len(arrows) == index.numel()
    assert all(out[to] == src[frm] for frm, to in arrows)


@pytest.mark.parametrize("dim", [0, 1])
def test_every_scatter_arrow_agrees_with_torch_scatter_where_no_two_meet(dim):
    src = torch.arange(1.0, 13.0).reshape(3, 4)
    index = torch.stack([torch.randperm(3, generator=torch.Generator().manual_seed(k)) for k in range(4)], 1)
    index = index if dim == 0 else torch.stack([torch.randperm(4, generator=torch.Generator().manual_seed(k))
                                                for k in range(3)])
    out = torch.zeros(3, 4).scatter(dim, index, src)
    arrows = index_arrows("scatter", dim, index)
    assert len({to for _, to in arrows}) == 12  # a permutation along dim: every cell written once
    assert all(out[to] == src[frm] for frm, to in arrows)


def test_a_1d_index_moves_along_its_only_dim():
    assert index_arrows("gather", 0, torch.tensor([2, 0])) == [((2,), (0,)), ((0,), (1,))]
    assert index_arrows("scatter", 0, torch.tensor([2, 0])) == [((0,), (2,)), ((1,), (0,))]


def test_the_gather_picture_draws_torchs_result_and_an_arrow_from_each_picked_element():
    index = LABELS.unsqueeze(1)
    fig = show_gather(PROBS, 1, index)
    assert texts(fig, "out") == [f"{v:.3g}" for v in torch.gather(PROBS, 1, index).flatten().tolist()]
    assert texts(fig, "index") == ["1", "0", "2", "0"]
    src_cells, out_cells = patches(fig, "src"), patches(fig, "out")
    ends = arrow_ends(fig)
    assert len(ends) == 4
    for (frm, to), (start, end) in zip(index_arrows("gather", 1, index), ends, strict=True):
        source, target = src_cells[frm[0] * 3 + frm[1]], out_cells[to[0]]
        assert start == (centre_x(source), source.get_y())  # leaves the picked element from below
        assert end[0] == centre_x(target)  # and runs to the column of its cell in the result
    picked = {3 * r + c for (r, c), _ in index_arrows("gather", 1, index)}
    grey = [k for k, p in enumerate(src_cells) if matplotlib.colors.to_hex(p.get_facecolor()) == "#e6e6e6"]
    assert sorted(grey) == sorted(set(range(12)) - picked)  # what nothing picks is grey
    assert "out[i, j] = src[i, index[i, j]]" in fig.axes[0].get_title()


def test_the_gather_picture_along_dim_0_runs_down_the_columns():
    index = torch.tensor([[3, 0, 2]])
    fig = show_gather(PROBS, 0, index)
    assert texts(fig, "out") == ["0.3", "0.7", "0.9"]
    src_cells = patches(fig, "src")
    for ((r, c), _), (start, _) in zip(index_arrows("gather", 0, index), arrow_ends(fig), strict=True):
        cell = src_cells[r * 3 + c]
        assert start == (cell.get_x() + cell.get_width(), centre_y(cell))  # leaves from the right side
    assert "src[index[i, j], j]" in fig.axes[0].get_title()


def test_the_scatter_picture_marks_two_writes_to_one_cell_and_leaves_the_rest_grey():
    src = torch.tensor([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])
    index = torch.tensor([[2, 0], [1, 1], [3, 0]])
    fig = show_scatter(torch.zeros(3, 4), 1, index, src)
    out = torch.zeros(3, 4).scatter(1, index, src)
    assert texts(fig, "out") == [f"{v:.3g}" for v in out.flatten().tolist()]
    assert texts(fig, "clash") == ["×2"]
    assert len(arrow_ends(fig)) == 6
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in patches(fig, "out")]
    assert colours.count("#e6e6e6") == 12 - 5 and colours[4 + 1] == "#ea9999"  # out[1, 1] is red


def test_a_1d_gather_is_drawn_as_one_row():
    fig = show_gather(torch.tensor([5, 6, 7]), 0, torch.tensor([2, 2, 0]))
    assert texts(fig, "out") == ["7", "7", "5"]
    assert len(arrow_ends(fig)) == 3


def test_the_arrow_pictures_refuse_what_they_cannot_draw():
    with pytest.raises(ValueError, match="'gather' or 'scatter'"):
        index_arrows("index_select", 0, torch.tensor([0]))
    with pytest.raises(ValueError, match="int64"):
        index_arrows("gather", 0, torch.tensor([0], dtype=torch.int32))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        show_gather(torch.zeros(2, 2, 2), 0, torch.zeros(1, 1, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="meta"):
        show_gather(torch.zeros(2, device="meta"), 0, torch.tensor([0], device="meta"))


def test_the_picture_names_its_tensors_as_the_chapter_does():
    fig = show_gather(PROBS, 1, LABELS.unsqueeze(1), names=("probs", "picked"))
    title = fig.axes[0].get_title()
    assert title.startswith("picked = probs.gather(1, index)") and "picked[i, j] = probs[i, index[i, j]]" in title
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() is None]
    assert "probs\n(4, 3)" in labels and "picked\n(4, 1)" in labels
