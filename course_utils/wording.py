"""How the checks' messages write values: shapes, indexes, one element, a quoted value.

Bound at import like the checks themselves (:mod:`course_utils.checks`), so that a learner's
cell that patches torch or builtins later changes nothing here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

_tensor_type = type


def _fmt_shape(shape: Sequence[int]) -> str:
    dims = tuple(int(d) for d in shape)
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


#: Characters of a value a message quotes (a number of 300 digits or a long string says no more).
MAX_SHOWN = 40


def _show(value: Any, spell: Any = repr) -> str:
    """``value`` as a message quotes it: its repr (or ``spell``), cut to :data:`MAX_SHOWN` characters."""
    try:
        text = spell(tidy(value))
    except Exception:  # noqa: BLE001 - an object whose repr fails is still described
        text = f"<{_tensor_type(value).__name__}>"
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN - 12]}…({len(text)} chars)"


def _shape_hint(actual: tuple[int, ...], expected: tuple[int, ...]) -> str:
    a_numel = math.prod(actual)
    e_numel = math.prod(expected)
    if expected and actual == tuple(expected) + (expected[-1],):
        return (
            " An extra trailing dim equal to the last one often comes from a silent broadcast"
            " of (N,) with (N, 1) giving (N, N): check the shapes of the operands."
        )
    if a_numel == e_numel:
        squeezed_a = tuple(d for d in actual if d != 1)
        squeezed_e = tuple(d for d in expected if d != 1)
        if squeezed_a == squeezed_e:
            return " Same elements, different size-1 dims: try `unsqueeze` or `squeeze`."
        if sorted(actual) == sorted(expected):
            return " Same sizes in another order: try `permute` or `transpose`."
        return " Same number of elements: try `reshape` or `view`."
    if a_numel == 0:
        return " Your tensor is empty: check the sizes you passed in."
    return ""


def _index_str(index: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(i)) for i in index) + ")" if len(index) != 1 else f"[{int(index[0])}]"


def _element(t: torch.Tensor) -> Any:
    """One element as a message quotes it: a float16 as float16 writes it (``0.1``, not
    ``0.0999755859375``); a float32 or bfloat16 is written short by :func:`tidy` when quoted."""
    value = t.item()
    if t.dtype == torch.float16 and math.isfinite(value):
        import numpy as np  # noqa: PLC0415 - only for a value that differs

        short = float(str(np.float16(value)))
        if float(np.float16(short)) == value:
            return short
    return value


def tidy(value: Any, depth: int = 0) -> Any:
    """``value`` as a message writes it: a float that is exactly a float32 (a tensor's element made
    a Python number by ``.item()`` or ``.tolist()``) as float32 writes it, ``0.45`` rather than
    ``0.44999998807907104``; inside lists and tuples too. Two different float32 values never
    read the same."""
    if _tensor_type(value) is float and math.isfinite(value):
        import numpy as np  # noqa: PLC0415 - only for a value a message quotes

        narrow = np.float32(value)
        if float(narrow) == value:
            short = float(str(narrow))
            if len(repr(short)) < len(repr(value)):
                return short
        return value
    if _tensor_type(value) in (list, tuple) and depth < 3 and len(value) <= 64:
        return _tensor_type(value)(tidy(v, depth + 1) for v in value)
    return value
