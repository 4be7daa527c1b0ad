"""course_utils.pictures draws what the tensor really is: offsets, stretched dims, picked elements."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")  # headless, as under CI and papermill

import pytest  # noqa: E402
import torch  # noqa: E402
from figures import patches, texts  # noqa: E402

from course_utils.pictures import show_broadcast, show_mask, show_strides  # noqa: E402


def element_offsets(fig) -> list[int]:
    return [int(re.search(r"@(\d+)$", s).group(1)) for s in texts(fig, "element")]


def expected_offsets(t: torch.Tensor) -> list[int]:
    """Storage offset of each element, row-major, computed independently of the picture."""
    index = torch.arange(t.untyped_storage().nbytes() // t.element_size())
    return torch.as_strided(index, t.shape, t.stride(), t.storage_offset()).reshape(-1).tolist()


def suptitle(fig) -> str:
    return fig._suptitle.get_text().replace("\n", " ")


# --- show_strides -------------------------------------------------------------------------


def test_show_strides_returns_a_figure_drawn_headless():
    fig = show_strides(torch.arange(6).reshape(2, 3))
    assert isinstance(fig, matplotlib.figure.Figure)
    fig.canvas.draw()  # renders with Agg without a display


def test_contiguous_tensor_walks_storage_in_order():
    """A fresh (3, 4) tensor: stride (4, 1), element k lives at offset k, all storage used."""
    x = torch.arange(12).reshape(3, 4)
    fig = show_strides(x)
    assert element_offsets(fig) == list(range(12))
    assert texts(fig, "storage") == [str(v) for v in range(12)]
    assert patches(fig, "unused") == []
    title = suptitle(fig)
    assert "stride (4, 1)" in title and "(contiguous)" in title


def test_transposed_tensor_shows_the_jumps_through_storage():
    """x.T reads the same 12 cells, but row by row its offsets jump by 4: 0, 4, 8, 1, ..."""
    x = torch.arange(12).reshape(3, 4)
    fig = show_strides(x.T)
    assert element_offsets(fig) == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    assert element_offsets(fig) == expected_offsets(x.T)
    title = suptitle(fig)
    assert "stride (1, 4)" in title and "NOT contiguous" in title
    # the values written in each element are the tensor's values, in its own order
    values = [int(s.split("\n")[0]) for s in texts(fig, "element")]
    assert values == x.T.reshape(-1).tolist()


def test_expanded_tensor_marks_storage_cells_read_many_times():
    """expand gives stride 0: 4 rows read the same 3 storage cells, each marked ×4."""
    e = torch.tensor([1, 2, 3]).expand(4, 3)
    fig = show_strides(e)
    assert len(texts(fig, "storage")) == 3
    assert element_offsets(fig) == [0, 1, 2] * 4
    assert texts(fig, "shared") == ["×4", "×4", "×4"]
    assert "stride (0, 1)" in suptitle(fig)


def test_slice_shows_offset_and_unused_storage():
    """x[1:, ::2] starts at offset 4 and skips cells; the skipped cells are drawn as unused."""
    x = torch.arange(12).reshape(3, 4)
    s = x[1:, ::2]
    fig = show_strides(s)
    assert element_offsets(fig) == [4, 6, 8, 10]
    used = set(element_offsets(fig))
    assert len(patches(fig, "unused")) == 12 - len(used)
    assert "storage_offset 4" in suptitle(fig)


@pytest.mark.parametrize(
    "t",
    [
        torch.tensor(7.5),
        torch.arange(5.0),
        torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1),
        torch.arange(6).reshape(2, 3)[:, 1],
        torch.tensor([True, False, True]),
        torch.zeros(3, 1).expand(3, 5),
        torch.ones(2, 3, requires_grad=True).T,
    ],
    ids=["0-d", "1-d", "permuted-3d", "column", "bool", "expand", "requires-grad"],
)
def test_offsets_match_as_strided_for_any_layout(t):
    fig = show_strides(t)
    assert element_offsets(fig) == expected_offsets(t)
    assert len(texts(fig, "element")) == t.numel()


def test_show_strides_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="at most"):
        show_strides(torch.zeros(100))
    with pytest.raises(ValueError, match="at most"):
        show_strides(torch.zeros(100)[:3])  # the storage, not the view, is what is drawn
    with pytest.raises(ValueError, match="meta"):
        show_strides(torch.zeros(3, device="meta"))
    with pytest.raises(TypeError, match="torch.Tensor"):
        show_strides([1, 2, 3])


# --- show_broadcast -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [((3, 1), (4,)), ((2, 3), (3,)), ((8, 1, 6, 1), (7, 1, 5)), ((), (2, 2)), ((5,), (5,)),
     ((0,), (1,)), ((1,), (1, 1))],
)
def test_broadcast_result_row_matches_torch(a, b):
    fig = show_broadcast(a, b)
    want = torch.broadcast_shapes(a, b)
    assert [int(s) for s in texts(fig, "result")] == list(want)
    assert "broadcasts to" in fig.axes[0].get_title()


def test_broadcast_marks_the_stretched_dims():
    """(3, 1) with (4,): a's last dim stretches 1→4, b's missing first dim stretches (1)→3."""
    fig = show_broadcast((3, 1), (4,))
    assert texts(fig, "a") == ["3", "1→4"]
    assert texts(fig, "b") == ["(1)→3", "4"]
    stretched = [p for p in patches(fig, "a") + patches(fig, "b")
                 if matplotlib.colors.to_hex(p.get_facecolor()) == "#f9cb9c"]
    assert len(stretched) == 2


def test_broadcast_accepts_tensors_and_leaves_missing_size_one_dims_alone():
    fig = show_broadcast(torch.zeros(1, 3), torch.zeros(3))
    assert texts(fig, "a") == ["1", "3"]  # size 1 but nothing to stretch to: not orange
    assert texts(fig, "b") == ["(1)", "3"]
    assert texts(fig, "result") == ["1", "3"]


@pytest.mark.parametrize("a, b, dim", [((2, 3), (2,), -1), ((4, 3, 2), (5, 1, 2), -3)])
def test_incompatible_shapes_give_an_error_picture(a, b, dim):
    with pytest.raises(RuntimeError):
        torch.broadcast_shapes(a, b)  # torch agrees that these do not broadcast
    fig = show_broadcast(a, b)  # the picture does not raise: it explains
    title = fig.axes[0].get_title().replace("\n", " ")
    assert title.startswith("cannot broadcast")
    assert f"at dim {dim}" in title and "neither is 1" in title
    assert texts(fig, "result").count("✗") == 1
    assert sum("≠" in s for s in texts(fig, "a") + texts(fig, "b")) == 2


# --- show_mask ----------------------------------------------------------------------------


def test_mask_result_row_is_t_of_mask_in_row_major_order():
    x = torch.arange(12).reshape(3, 4)
    mask = x % 3 == 0
    fig = show_mask(x, mask)
    assert texts(fig, "picked") == [str(v) for v in x[mask].tolist()] == ["0", "3", "6", "9"]
    assert texts(fig, "selected") == ["0", "3", "6", "9"]
    assert len(texts(fig, "unselected")) == 12 - 4
    assert "(4,)" in " ".join(ax.get_title(loc="left") for ax in fig.axes)


def test_mask_on_floats_and_an_empty_selection():
    x = torch.tensor([[0.5, -1.25], [2.0, 3.0]])
    fig = show_mask(x, x < 0)
    assert texts(fig, "picked") == ["-1.25"]
    fig = show_mask(x, torch.zeros_like(x, dtype=torch.bool))
    assert texts(fig, "picked") == []
    assert "picks 0 of 4" in suptitle(fig)


def test_show_mask_refuses_bad_masks_with_a_hint():
    x = torch.arange(6).reshape(2, 3)
    with pytest.raises(ValueError, match="boolean"):
        show_mask(x, (x > 2).long())
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        show_mask(x, torch.tensor([True, False, True]))
    with pytest.raises(ValueError, match="at most 2 dims"):
        show_mask(torch.zeros(2, 2, 2), torch.zeros(2, 2, 2, dtype=torch.bool))
