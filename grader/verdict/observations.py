"""Observations as they come out of a test cell: found among its outputs and decoded strictly.

What a learner's process sent is untrusted data: every value is checked against the schema of
:mod:`course_utils.observe` (version 1) and rebuilt from plain parts (no pickle, no learner
classes); anything else is :class:`Malformed`. :mod:`grader.verdict.judge` compares what this returns.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from nbformat import NotebookNode

from course_utils.observe import MIME

#: Caps on what one test cell of a learner may send (larger: the test fails).
MAX_OBSERVATIONS = 5_000
MAX_CELL_BYTES = 64 * 1024 * 1024
MAX_DIGITS = 4_000
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,80}$")
#: Largest number of bytes a tensor or array may claim (meta tensors included): a size past it
#: overflows torch's and NumPy's own storage arithmetic.
MAX_NBYTES = 2**62
_INT = re.compile(rf"-?\d{{1,{MAX_DIGITS}}}", re.ASCII)
_DIM = re.compile(r"\d{1,19}", re.ASCII)
_DEVICE = re.compile(r"[a-z]{2,12}(:\d{1,3})?", re.ASCII)
#: NumPy dtype kinds an array may have: numbers, booleans, dates, durations, bytes and text.
_NP_KINDS = "biufcmMSU"
_INTEGERS = {f"{u}int{bits}" for u in ("", "u") for bits in (8, 16, 32, 64)}


class Malformed(ValueError):
    """An observation that does not follow the schema."""


def observations(cell: NotebookNode) -> list[Any]:
    """The observation records among a cell's outputs, in order (anything sent under our type)."""
    found = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "display_data" and MIME in out.get("data", {}):
            found.append(out["data"][MIME])
    return found


def first_error(cell: NotebookNode) -> dict | None:
    return next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)


class Opaque:
    """A value the schema has no kind for: equal only to the same kind and text."""

    def __init__(self, kind: str, text: str):
        self.kind, self.text = kind, text

    def __eq__(self, other: object) -> bool:
        return type(other) is Opaque and (self.kind, self.text) == (other.kind, other.text)

    def __hash__(self) -> int:
        return hash((self.kind, self.text))

    def __repr__(self) -> str:
        return f"<{self.kind}>"


@dataclass(frozen=True)
class Raised:
    """An exception the learner's code raised inside ``raises(...)`` (or None raised)."""

    type: str | None
    mro: tuple[str, ...] = ()
    message: str = ""


def _bytes(obs: dict) -> bytes:
    data = obs.get("data")
    if not isinstance(data, str):
        raise Malformed("tensor data is not text")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise Malformed("tensor data is not base64") from None


def _shape(obs: dict, itemsize: int) -> tuple[int, ...]:
    """The shape an observation claims, each dimension and the whole size within bounds."""
    shape = obs.get("shape")
    if not isinstance(shape, list) or len(shape) > 16 or not all(type(d) is int and 0 <= d < 2**40 for d in shape):
        raise Malformed("bad shape")
    if math.prod(shape) * itemsize >= MAX_NBYTES:
        raise Malformed("shape too large")
    return tuple(shape)


def _text(v: Any, cap: int) -> str:
    """A text field of the schema, cut at ``cap`` characters."""
    if not isinstance(v, str):
        raise Malformed("bad text")
    return v[:cap]


def _float(v: Any) -> float:
    if type(v) in (int, float) and type(v) is not bool:
        return float(v)
    if v in ("nan", "inf", "-inf"):
        return float(v)
    raise Malformed("bad float")


def decode(obs: Any) -> Any:
    """A schema value (see :mod:`course_utils.observe`) as a Python value, strictly checked.

    Raises:
        Malformed: ``obs`` is not a schema value, whatever it holds (this is the only exception
            it raises: a payload that trips torch or NumPy is malformed too).
    """
    try:
        return _decode(obs, 0)
    except Malformed:
        raise
    except Exception as exc:  # noqa: BLE001 -- data from a learner's process: nothing it holds may escape
        raise Malformed(f"undecodable value ({type(exc).__name__})") from None


def _decode(obs: Any, depth: int) -> Any:
    if not isinstance(obs, dict) or depth > 10:
        raise Malformed("not a schema value")
    t = obs.get("t")
    if t == "tensor":
        return _tensor(obs)
    if t == "none":
        return None
    if t == "bool":
        if type(obs.get("v")) is not bool:
            raise Malformed("bad bool")
        return obs["v"]
    if t == "int":
        v = obs.get("v")
        if not isinstance(v, str) or not _INT.fullmatch(v):
            raise Malformed("bad int")
        return int(v)
    if t == "float":
        return _float(obs.get("v"))
    if t == "complex":
        return complex(_float(obs.get("re")), _float(obs.get("im")))
    if t == "str":
        if not isinstance(obs.get("v"), str):
            raise Malformed("bad str")
        return obs["v"]
    if t in ("list", "tuple"):
        items = obs.get("items")
        if not isinstance(items, list):
            raise Malformed("bad items")
        values = [_decode(v, depth + 1) for v in items]
        return values if t == "list" else tuple(values)
    if t == "dict":
        items = obs.get("items")
        if not isinstance(items, list) or not all(isinstance(p, list) and len(p) == 2 for p in items):
            raise Malformed("bad dict")
        try:
            return {_decode(k, depth + 1): _decode(v, depth + 1) for k, v in items}
        except TypeError:
            raise Malformed("unhashable dict key") from None
    if t == "dtype":
        return _dtype(obs.get("v"))
    if t == "size":
        items = obs.get("items")
        if not isinstance(items, list) or len(items) > 64 or not all(
                isinstance(d, str) and _DIM.fullmatch(d) and int(d) < 2**63 for d in items):
            raise Malformed("bad size")
        return torch.Size(int(d) for d in items)
    if t == "device":
        return _device(obs.get("v"))
    if t == "ndarray":
        return _ndarray(obs)
    if t == "npscalar":
        return _ndarray({**obs, "shape": []})[()]
    if t == "exception":
        mro = obs.get("mro")
        if not isinstance(mro, list) or not all(isinstance(m, str) for m in mro) or not isinstance(obs.get("message"), str):
            raise Malformed("bad exception")
        return Raised(_text(obs.get("type"), 300), tuple(m[:300] for m in mro[:64]), obs["message"])
    if t == "no exception":
        return Raised(None)
    if t == "object":
        return Opaque(_text(obs.get("type"), 100), _text(obs.get("repr", ""), 200))
    if t == "too large":
        return Opaque("too large", _text(obs.get("why", ""), 100))
    raise Malformed(f"unknown kind {str(t)[:20]!r}")


#: Every dtype torch names (read from the module, never looked up by a learner's text), and the
#: devices already looked up (only names that resolve are kept).
_dtypes: dict[str, torch.dtype] = {n: v for n, v in vars(torch).items() if isinstance(v, torch.dtype)}
_devices: dict[str, torch.device] = {}


def _dtype(name: Any) -> torch.dtype:
    dtype = _dtypes.get(name) if type(name) is str else None
    if dtype is None:
        raise Malformed("bad dtype")
    return dtype


def _data_dtype(name: Any) -> torch.dtype:
    """A dtype a tensor's data may have: floats, complex numbers, booleans, whole bytes of integers
    (never a quantized, bit or sub-byte dtype, which torch cannot compare)."""
    dtype = _dtype(name)
    if not (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool or str(dtype)[6:] in _INTEGERS):
        raise Malformed("bad tensor dtype")
    return dtype


def _device(name: Any) -> torch.device:
    if type(name) is str and name in _devices:
        return _devices[name]
    if not isinstance(name, str) or not _DEVICE.fullmatch(name):
        raise Malformed("bad device")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise Malformed("bad device") from None
    if type(name) is str and len(_devices) < 1_000:
        _devices[name] = device
    return device


def _booleans(raw: bytes) -> bytes:
    if raw.translate(None, b"\x00\x01"):
        raise Malformed("boolean data other than 0 and 1")
    return raw


def _tensor(obs: dict) -> torch.Tensor:
    dtype = _data_dtype(obs.get("dtype"))
    itemsize = dtype.itemsize
    shape = _shape(obs, itemsize)
    device = _device(obs.get("device"))
    if device.type == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    raw = _bytes(obs)
    numel = math.prod(shape)
    if len(raw) != numel * itemsize:
        raise Malformed("tensor data does not match its shape and dtype")
    if dtype is torch.bool:
        _booleans(raw)
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    if dtype.is_complex:
        real = {torch.complex64: torch.float32, torch.complex128: torch.float64, torch.complex32: torch.float16}[dtype]
        t = torch.view_as_complex(flat.view(real).reshape(-1, 2)).reshape(shape) if numel else torch.empty(shape, dtype=dtype)
    else:
        t = flat.view(dtype).reshape(shape) if numel else torch.empty(shape, dtype=dtype)
    if device.type != "cpu":
        try:
            t = t.to(device)
        except Exception:  # noqa: BLE001 -- this machine lacks the device: say where it was
            t = Elsewhere(t, device)
    return t


class Elsewhere:
    """A tensor observed on a device this machine does not have."""

    def __init__(self, t: torch.Tensor, device: torch.device):
        self.tensor, self.device = t, device


def _ndarray(obs: dict) -> np.ndarray:
    """An array of plain items: its dtype as NumPy writes one (``dtype.str``), never an object,
    structured, sub-array or empty-item dtype."""
    text = obs.get("dtype")
    if type(text) is not str or len(text) > 24:
        raise Malformed("bad array dtype")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError, SyntaxError):
        raise Malformed("bad array dtype") from None
    if dtype.str != text or dtype.kind not in _NP_KINDS or dtype.itemsize == 0:
        raise Malformed("bad array dtype")
    shape = _shape(obs, dtype.itemsize)
    raw = _bytes(obs)
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise Malformed("array data does not match its shape and dtype")
    if dtype.kind == "b":
        _booleans(raw)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
