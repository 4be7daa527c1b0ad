"""Observations: in a grading run, checks report the learner's values as plain data.

The grader decides nothing inside the process that runs a learner's code. While a test cell
runs in a grading run, :mod:`course_utils.checks` does not compare: it *observes* — it turns
the value it was given into plain, size-capped JSON data (schema below) and sends it out as a
``display_data`` output of type :data:`MIME`. The grader runs the same test cells against the
chapter's solution in a process of its own and compares the two streams of observations.
In a learner's own kernel nothing here is active and the checks compare as usual.

Schema (version 1) of an encoded value, always a JSON object with a type tag ``t``:

- ``{"t": "none"}``, ``{"t": "bool", "v": true}``, ``{"t": "int", "v": "123"}`` (decimal
  text, any size), ``{"t": "float", "v": 1.5}`` (``"nan"``, ``"inf"``, ``"-inf"`` as text),
  ``{"t": "complex", "re": .., "im": ..}``, ``{"t": "str", "v": "..."}``;
- ``{"t": "list" | "tuple", "items": [...]}``, ``{"t": "dict", "items": [[key, value], ...]}``;
- ``{"t": "tensor", "dtype": "float32", "shape": [2, 3], "device": "cpu", "data": base64}``
  (raw little-endian bytes, C order; no data on the ``meta`` device);
- ``{"t": "ndarray", "dtype": "<f8", "shape": [...], "data": base64}``, ``{"t": "npscalar", ...}``;
- ``{"t": "dtype", "v": "float32"}``, ``{"t": "size", "items": [...]}``, ``{"t": "device", "v": "cpu"}``;
- ``{"t": "exception", "type": "builtins.ValueError", "mro": [...], "message": "..."}``,
  ``{"t": "no exception"}``;
- ``{"t": "object", "type": "module.Class", "repr": "..."}`` for anything else (it never
  matches a value of another kind).

Nothing is pickled. A value too large to send is replaced by ``{"t": "too large", ...}``.
"""

from __future__ import annotations

import base64
import math
import sys
from typing import Any

SCHEMA = 1
MIME = "application/vnd.course.observation.v1+json"
#: Largest raw payload one observation may carry (the grader enforces its own caps too).
MAX_BYTES = 4 * 1024 * 1024
MAX_ITEMS = 10_000
MAX_DEPTH = 8
MAX_TEXT = 100_000

class _NoException:
    """Stands for "the block raised nothing" in a ``raises`` observation."""

    def __repr__(self) -> str:
        return "no exception"


NO_EXCEPTION = _NoException()

_state: dict[str, Any] = {"test": None, "seq": 0, "size": 0}


def active() -> bool:
    """True while a test cell of a grading run is running (between :func:`begin` and :func:`end`)."""
    return _state["test"] is not None


def begin(test: str, seed: int = 0) -> None:
    """Start a test cell: reseed every RNG and put torch's global modes back to their defaults,
    so that both runs build the same inputs and compute alike, and observe its start.

    A learner's notebook may change those modes on the way -- ``torch.set_default_dtype(
    torch.float64)`` for precision, anomaly detection to debug a backward, grad disabled for
    a demo --, and its own visible tests, which build their expected values under the same
    modes, pass. The solution's run used the defaults, so each graded test cell starts there.
    """
    import random

    import numpy as np
    import torch

    _state.update(test=str(test), seq=0, size=0)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float32)
    torch.set_default_device(None)
    torch.set_grad_enabled(True)
    torch.autograd.set_detect_anomaly(False)
    torch.set_float32_matmul_precision("highest")
    emit("begin", None)


def phase(name: str) -> None:
    """Mark where the hidden part of a test cell starts."""
    emit("phase", name)


def end() -> None:
    """The test cell ran to its last line."""
    emit("end", None)
    _state["test"] = None


def assert_(condition: Any, site: int, values: Any = None) -> None:
    """A test's plain ``assert``, rewritten by the grader: observe whether it held (and, when it
    did not, the values its message formats in)."""
    try:
        held = bool(condition)
    except Exception as exc:  # e.g. the truth value of a tensor with several elements
        emit("assert", exc, site=site)
        return
    params = {}
    if not held and values is not None:
        try:
            params["values"] = tuple(values())
        except Exception:
            pass
    emit("assert", held, site=site, params=params)


def fail(site: int, values: tuple = ()) -> None:
    """A test's own ``raise AnswerError(...)`` is about to fire (rewritten by the grader)."""
    emit("fail", None, site=site, params={"values": tuple(values)})


def observe(value: Any, *, name: str = "your answer", **params: Any) -> None:
    """A bare observation: the grader compares ``value`` with the solution's value here."""
    emit("value", value, params={"name": name, **params})


def _caller_line() -> int:
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith("course_utils") or module == "contextlib"):
            return frame.f_lineno
        frame = frame.f_back
    return 0


def emit(kind: str, actual: Any, *, expected: Any = None, has_expected: bool = False,
         params: dict[str, Any] | None = None, site: int | None = None) -> None:
    """Send one observation out of the process (a ``display_data`` output)."""
    if not active() and kind != "begin":
        return
    _state["seq"] += 1
    record: dict[str, Any] = {
        "v": SCHEMA,
        "test": _state["test"],
        "seq": _state["seq"],
        "kind": kind,
        "line": _caller_line() if site is None else int(site),
        "actual": encode(actual),
        "params": {k: encode(v) for k, v in (params or {}).items()},
    }
    if has_expected:
        record["expected"] = encode(expected)
    try:
        from IPython.display import publish_display_data
    except ImportError:  # not in IPython: nothing to send to
        return
    publish_display_data({MIME: record, "text/plain": f"<observation {record['seq']}>"})


def encode(value: Any, depth: int = 0) -> dict[str, Any]:
    """``value`` as schema data (see the module docstring)."""
    import numpy as np
    import torch

    if depth > MAX_DEPTH:
        return {"t": "too large", "why": "nested too deeply"}
    kind = type(value)
    if value is None:
        return {"t": "none"}
    if kind is bool:
        return {"t": "bool", "v": value}
    if kind is int:
        return {"t": "int", "v": str(value)}
    if kind is float:
        return {"t": "float", "v": value if math.isfinite(value) else repr(value)}
    if kind is complex:
        return {"t": "complex", "re": encode(value.real)["v"], "im": encode(value.imag)["v"]}
    if kind is str:
        return {"t": "str", "v": value[:MAX_TEXT]} if len(value) <= MAX_TEXT else {"t": "too large", "why": "text"}
    if kind is torch.Size:
        return {"t": "size", "items": [str(int(d)) for d in value]}
    if kind in (list, tuple):
        if len(value) > MAX_ITEMS:
            return {"t": "too large", "why": f"{len(value)} items"}
        return {"t": kind.__name__, "items": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        if len(value) > MAX_ITEMS:
            return {"t": "too large", "why": f"{len(value)} items"}
        return {"t": "dict", "items": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is torch.dtype:
        return {"t": "dtype", "v": str(value).removeprefix("torch.")}
    if kind is torch.device:
        return {"t": "device", "v": str(value)}
    if kind is torch.Tensor:
        return _encode_tensor(value)
    if kind is np.ndarray:
        if value.dtype.hasobject:
            return {"t": "object", "type": "numpy.ndarray[object]", "repr": repr(value)[:200]}
        if value.nbytes > MAX_BYTES:
            return {"t": "too large", "why": f"{value.nbytes} bytes"}
        data = np.ascontiguousarray(value).tobytes()
        return {"t": "ndarray", "dtype": value.dtype.str, "shape": list(value.shape), "data": _b64(data)}
    if isinstance(value, np.generic) and kind.__module__ == "numpy":
        arr = np.asarray(value)
        return {"t": "npscalar", "dtype": arr.dtype.str, "data": _b64(arr.tobytes())}
    if value is NO_EXCEPTION:
        return {"t": "no exception"}
    if isinstance(value, BaseException):
        mro = [f"{c.__module__}.{c.__qualname__}" for c in kind.__mro__]
        try:
            message = str(value)[:2000]
        except Exception:
            message = ""
        return {"t": "exception", "type": mro[0], "mro": mro, "message": message}
    if isinstance(value, torch.Tensor):  # a subclass: never compared as a tensor
        return {"t": "object", "type": f"{kind.__module__}.{kind.__qualname__} (a subclass of torch.Tensor)", "repr": ""}
    try:
        text = repr(value)[:200]
    except Exception:
        text = ""
    return {"t": "object", "type": f"{kind.__module__}.{kind.__qualname__}", "repr": text}


def _encode_tensor(t: Any) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {
        "t": "tensor",
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": [int(d) for d in t.shape],
        "device": str(t.device),
    }
    if t.device.type == "meta":
        return out
    if t.layout != torch.strided:
        return {"t": "object", "type": f"torch.Tensor[{t.layout}]", "repr": ""}
    nbytes = t.numel() * t.element_size()
    if nbytes > MAX_BYTES:
        return {"t": "too large", "why": f"a tensor of {nbytes} bytes"}
    # a fresh row-major copy: a one-element view keeps any stride through contiguous() and reshape()
    flat = t.detach().resolve_conj().resolve_neg().to("cpu").reshape(-1).clone(memory_format=torch.contiguous_format)
    if flat.dtype.is_complex:
        flat = torch.view_as_real(flat).reshape(-1).clone(memory_format=torch.contiguous_format)
    raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
    out["data"] = _b64(raw.numpy().tobytes())
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
