"""course_utils.bits reads a float's own bits and draws them as sign, exponent and mantissa."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless, as under CI and papermill

import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils.bits import LAYOUTS, float_bits, show_bits  # noqa: E402


def row_bits(ax) -> str:
    """The bits one row of the picture shows, in drawing order (left to right)."""
    return "".join(t.get_text() for t in ax.texts if t.get_gid() in ("sign", "exponent", "mantissa"))


def test_the_bits_of_a_tenth_are_the_ieee_patterns_of_each_format():
    """0.1 is 0x3DCCCCCD in float32, 0x2E66 in float16 and 0x3DCD in bfloat16 (rounded up from 0x3DCC)."""
    tenth = torch.tensor(0.1)
    assert float_bits(tenth) == ("0", "01111011", "10011001100110011001101")
    assert "".join(float_bits(tenth)) == format(0x3DCCCCCD, "032b")
    assert "".join(float_bits(tenth.half())) == format(0x2E66, "016b")
    assert "".join(float_bits(tenth.bfloat16())) == format(0x3DCD, "016b")


@pytest.mark.parametrize("dtype", list(LAYOUTS))
@pytest.mark.parametrize("value", [1.0, -2.0, 0.1, 3.140625, -65504.0, 1e-3, 0.0, -0.0])
def test_the_fields_have_the_format_widths_and_give_back_the_value(dtype, value):
    x = torch.tensor(value, dtype=dtype)
    sign, exponent, mantissa = float_bits(x)
    exp_bits, man_bits, _ = LAYOUTS[dtype]
    assert (len(sign), len(exponent), len(mantissa)) == (1, exp_bits, man_bits)
    assert sign == ("1" if str(x.item()).startswith("-") else "0")  # -0.0 has its sign bit set
    e, m, bias = int(exponent, 2), int(mantissa, 2), 2 ** (exp_bits - 1) - 1
    magnitude = (m / 2**man_bits) * 2.0 ** (1 - bias) if e == 0 else (1 + m / 2**man_bits) * 2.0 ** (e - bias)
    assert (-magnitude if sign == "1" else magnitude) == x.item()


def test_a_negative_16_bit_float_is_read_without_the_integer_sign_extension():
    """-1.5 in float16 is 0xBE00: viewed as int16 it is negative, but the fields are its 16 bits."""
    assert "".join(float_bits(torch.tensor(-1.5).half())) == format(0xBE00, "016b")
    assert float_bits(torch.tensor([float("-inf")]).bfloat16()) == ("1", "11111111", "0000000")


def test_float_bits_refuses_what_it_cannot_read_with_a_hint():
    with pytest.raises(ValueError, match="cast first"):
        float_bits(torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(ValueError, match="cast first"):
        float_bits(torch.tensor(1))
    with pytest.raises(ValueError, match=r"x\[0\]"):
        float_bits(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="real device"):
        float_bits(torch.tensor(1.0, device="meta"))
    with pytest.raises(TypeError, match="torch.Tensor"):
        float_bits(0.1)


def test_each_row_of_the_picture_shows_the_tensors_own_bits_and_value():
    tenth = torch.tensor(0.1)
    values = [tenth, tenth.half(), tenth.bfloat16()]
    fig = show_bits(*values, title="0.1")
    assert len(fig.axes) == 3
    for ax, x in zip(fig.axes, values, strict=True):
        assert row_bits(ax) == "".join(float_bits(x))
        title = ax.get_title(loc="left")
        assert title.startswith(str(x.dtype).removeprefix("torch.")) and repr(x.double().item()) in title
    labels = [t.get_text() for t in fig.axes[1].texts if t.get_gid() == "exponent-label"]
    assert labels == ["exponent (5 bits)\n11 − 15 = −4"]  # float16's 0.1 is 1.6 × 2^-4
    mantissa = [t.get_text() for t in fig.axes[2].texts if t.get_gid() == "mantissa-label"]
    assert mantissa[0].startswith("mantissa (7 bits)\n1 + 77/2")
    fig.canvas.draw()  # renders with Agg without a display


def test_special_values_are_named_not_decoded():
    fig = show_bits(torch.tensor(float("inf")).half(), torch.tensor(1e-6).half())
    inf_row, tiny_row = fig.axes
    assert " = " not in inf_row.get_title(loc="left")
    assert any("inf or nan" in t.get_text() for t in inf_row.texts)
    assert any("subnormal" in t.get_text() for t in tiny_row.texts)  # 1e-6 is below float16's tiny
    with pytest.raises(ValueError, match="at least one"):
        show_bits()
