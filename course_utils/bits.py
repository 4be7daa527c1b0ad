"""Pictures of a float's bits: the sign, exponent and mantissa a float32, float16 or bfloat16 stores."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from course_utils.pictures import _BLUE, _ORANGE, _YELLOW, _cell, _wrap

#: Each float dtype drawn: (exponent bits, mantissa bits, the integer dtype of the same width).
LAYOUTS: dict[torch.dtype, tuple[int, int, torch.dtype]] = {
    torch.float32: (8, 23, torch.int32),
    torch.float16: (5, 10, torch.int16),
    torch.bfloat16: (8, 7, torch.int16),
}

_FIELD_COLOURS = {"sign": _YELLOW, "exponent": _ORANGE, "mantissa": _BLUE}


class FloatBits(NamedTuple):
    """The three fields of one float, each as a string of ``"0"`` and ``"1"``, most significant first."""

    sign: str
    exponent: str
    mantissa: str


def float_bits(x: torch.Tensor) -> FloatBits:
    """Read the sign, exponent and mantissa bits of a one-element float32, float16 or bfloat16 tensor.

    The bits are the tensor's own: its memory read as an integer of the same width
    (``x.view(torch.int32)`` for a float32), not recomputed from the value.

    Args:
        x: a tensor holding one element, of a dtype in ``LAYOUTS``, on any real device.

    Returns:
        A ``FloatBits(sign, exponent, mantissa)``: 1, then 8 and 23 bits for float32, 5 and 10
        for float16, 8 and 7 for bfloat16.

    Raises:
        TypeError: for something else than a tensor.
        ValueError: for another dtype, more than one element, or a tensor on the ``meta`` device.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"float_bits reads a torch.Tensor, not a {type(x).__name__}")
    if x.dtype not in LAYOUTS:
        names = ", ".join(str(d).removeprefix("torch.") for d in LAYOUTS)
        raise ValueError(f"float_bits reads {names}, not {x.dtype}; cast first, e.g. x.float()")
    if x.numel() != 1 or x.device.type == "meta":
        raise ValueError(
            "float_bits reads one number with its values: pick one element, e.g. x[0],"
            f" of a tensor on a real device (got shape {tuple(x.shape)} on {x.device.type})"
        )
    exp_bits, man_bits, as_int = LAYOUTS[x.dtype]
    width = 1 + exp_bits + man_bits
    raw = x.detach().reshape(1).cpu().view(as_int).item() & ((1 << width) - 1)  # two's complement off
    bits = format(raw, f"0{width}b")
    return FloatBits(bits[0], bits[1 : 1 + exp_bits], bits[1 + exp_bits :])


def _meaning(fields: FloatBits) -> tuple[str, str, str]:
    """What the exponent and mantissa fields say, and the value they make, as short texts."""
    e, m, width = int(fields.exponent, 2), int(fields.mantissa, 2), len(fields.mantissa)
    bias = 2 ** (len(fields.exponent) - 1) - 1
    sign = "−" if fields.sign == "1" else "+"
    if e == 2 ** len(fields.exponent) - 1:
        return "all ones: inf or nan", f"{m}: {'nan' if m else 'inf'}", ""
    lead, power = (0, 1 - bias) if e == 0 else (1, e - bias)
    fraction = lead + m / 2**width
    shown = str(power).replace("-", "−")
    exp_text = f"{e} − {bias} = {shown}" if e else f"0: subnormal, 2$^{{{power}}}$"
    man_text = f"{lead} + {m}/2$^{{{width}}}$ = {fraction:.10g}"
    return exp_text, man_text, f"{sign}{fraction:.10g} × 2$^{{{power}}}$"


def show_bits(*values: torch.Tensor, title: str | None = None) -> Any:
    """Draw the bits of one-element float tensors, one row each, split into sign, exponent and mantissa.

    Each bit is a cell holding 0 or 1, coloured by its field: the sign (yellow), the exponent
    (orange: it sets the range) and the mantissa (blue: it sets the precision). Under each field
    its width and what it says: the exponent minus the bias, ``1 + mantissa / 2^width``. A row's
    title gives the value the bits store. The rows start at the same left edge, so the sign and
    exponent of float32 and bfloat16 line up.

    Args:
        *values: one-element tensors of the dtypes in ``LAYOUTS`` (see :func:`float_bits`).
        title: a title above the rows; defaults to none.

    Returns:
        The matplotlib Figure (one Axes per row; each bit's text has its field as gid).
    """
    import matplotlib.pyplot as plt

    if not values:
        raise ValueError("show_bits draws at least one tensor, e.g. show_bits(torch.tensor(0.1))")
    rows = [(v, float_bits(v)) for v in values]
    width = max(len("".join(f)) for _, f in rows)
    fig, axes = plt.subplots(len(rows), 1, figsize=(max(0.36 * width + 1.6, 7.0), 1.3 * len(rows) + 0.5),
                             squeeze=False)
    for ax, (value, fields) in zip(axes[:, 0], rows, strict=True):
        exp_text, man_text, value_text = _meaning(fields)
        x = 0
        for name, bits, meaning in (("sign", fields.sign, "+" if fields.sign == "0" else "−"),
                                    ("exponent", fields.exponent, exp_text),
                                    ("mantissa", fields.mantissa, man_text)):
            for k, bit in enumerate(bits):
                _cell(ax, x + k, 0, bit, _FIELD_COLOURS[name], name)
            n = len(bits)
            ax.plot([x + 0.08, x + 0.08, x + n - 0.08, x + n - 0.08], [-0.12, -0.25, -0.25, -0.12],
                    color="dimgray", linewidth=1)
            label = name if name == "sign" else f"{name} ({n} bits)"
            ax.text(x + n / 2, -0.4, f"{label}\n{meaning}", ha="center", va="top", fontsize=8,
                    gid=f"{name}-label")
            x += n
        stored = value.detach().reshape(1).cpu().double().item()
        equals = f" = {value_text}" if value_text else ""
        ax.set_title(f"{str(value.dtype).removeprefix('torch.')}, {x} bits:  stores {stored!r}{equals}",
                     fontsize=9, loc="left")
        ax.set_xlim(-0.2, width + 0.2)
        ax.set_ylim(-1.45, 1.1)
        ax.set_aspect("equal")
        ax.axis("off")
    if title is not None:
        fig.suptitle(_wrap(title, fig), fontsize=10)
    fig.tight_layout()
    return fig
