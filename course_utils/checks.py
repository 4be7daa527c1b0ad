"""Friendly checks for the visible tests: exact comparisons, messages a beginner can act on."""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from course_utils import observe as _observe
from course_utils import tracebacks as _tracebacks
from course_utils.wording import MAX_SHOWN, _element, _fmt_shape, _index_str, _shape_hint, _show  # noqa: F401

_MISSING: Any = object()  # `expected` left out: the grader's run of the solution is the oracle

# Bound once at import, so that a learner's cell that monkey-patches torch (or the names
# below) cannot change what the checks compute.
_Tensor = torch.Tensor
_isclose = torch.isclose
_isnan = torch.isnan
_nonzero = torch.nonzero
_logical_not = torch.logical_not
_logical_and = torch.logical_and
_equal = torch.eq
_tensor_type = type


class AnswerError(AssertionError):
    """A learner's answer differs from what the exercise expects.

    It subclasses ``AssertionError`` so that graders and ``pytest`` treat it as a failed
    test; its message is meant to be read by the learner. IPython shows it with the learner's
    frames only (see :mod:`course_utils.tracebacks`): the checks' own code is not the
    learner's to read.
    """

    def _render_traceback_(self) -> list[str]:
        return _tracebacks.render(self)


def _describe(obj: Any) -> str:
    if isinstance(obj, _Tensor):
        return f"a tensor of shape {_fmt_shape(obj.shape)} and dtype {obj.dtype}"
    if obj is None:
        return "None (did the function forget to `return` its result?)"
    kind = _tensor_type(obj).__name__
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} ({_show(obj)})"


def check_shape(actual: Any, shape: Sequence[int], *, name: str = "your answer") -> None:
    """Check that ``actual`` is a plain tensor of exactly ``shape``.

    Raises:
        AnswerError: naming the shape that came and what to try.
    """
    __tracebackhide__ = True  # pytest and IPython: not the learner's frame
    if _observe.active():
        _observe.emit("shape", actual, params={"name": name, "shape": tuple(int(d) for d in shape)})
        return
    _check_type(actual, name)
    got = tuple(actual.shape)
    want = tuple(int(d) for d in shape)
    if got != want:
        raise AnswerError(
            f"{name} has shape {_fmt_shape(got)} but expected {_fmt_shape(want)}."
            + _shape_hint(got, want)
        )


def _check_type(actual: Any, name: str) -> None:
    __tracebackhide__ = True
    if _tensor_type(actual) is _Tensor:
        return
    if isinstance(actual, _Tensor):
        raise AnswerError(
            f"{name} is a {_tensor_type(actual).__name__}, a subclass of torch.Tensor; "
            "return a plain torch.Tensor."
        )
    hint = ""
    if isinstance(actual, int | float | bool | complex):
        hint = (" Return the tensor itself: `.item()`, `float(...)` or `int(...)` turn a tensor into a Python"
                " number, which has no dtype or device (wrapping it again with torch.tensor(...) does not"
                " bring them back).")
    elif isinstance(actual, list | tuple):
        hint = " Wrap it with torch.tensor(...), or join tensors with torch.stack(...)."
    elif _tensor_type(actual).__module__.startswith("numpy"):
        hint = " Convert it with torch.from_numpy(...) or torch.as_tensor(...)."
    raise AnswerError(f"{name} should be a torch.Tensor, but it is {_describe(actual)}.{hint}")


def check_tensor(
    actual: Any,
    expected: torch.Tensor = _MISSING,
    *,
    name: str = "your answer",
    rtol: float = 1e-5,
    atol: float = 1e-8,
    check_device: bool = True,
) -> None:
    """Compare a learner's tensor with the expected one, strictly.

    Checks, in order: exact type (``torch.Tensor``, not a subclass), shape, dtype,
    device, then values (floats within ``|a - e| <= atol + rtol * |e|``, NaN equal to NaN;
    integers and booleans exactly). Nothing is broadcast or cast to make the answer fit.
    Values on the ``meta`` device have no data, so only the metadata is compared there.

    In a grading run the value is observed instead (see :mod:`course_utils.observe`), and
    ``expected`` may be left out in hidden tests: the solution's own value is then expected.

    Raises:
        AnswerError: naming the first property that differs and what to try.
    """
    __tracebackhide__ = True  # pytest and IPython: not the learner's frame
    if _observe.active():
        params = {"name": name, "rtol": rtol, "atol": atol, "check_device": check_device}
        _observe.emit("tensor", actual, expected=expected, has_expected=expected is not _MISSING, params=params)
        return
    _check_type(actual, name)
    if expected is _MISSING:  # a hidden test outside a grading run: only the kind is checked
        return
    if not isinstance(expected, _Tensor):
        raise TypeError("check_tensor: `expected` must be a tensor")
    check_shape(actual, tuple(expected.shape), name=name)
    if actual.dtype != expected.dtype:
        cast = {
            torch.float32: ".float()",
            torch.float64: ".double()",
            torch.int64: ".long()",
            torch.int32: ".int()",
            torch.bool: ".bool()",
            torch.float16: ".half()",
        }.get(expected.dtype, f".to({expected.dtype})")
        raise AnswerError(
            f"{name} has dtype {actual.dtype} but expected {expected.dtype}. Check the dtype of the"
            f" tensors you start from, or cast with `{cast}`."
        )
    if check_device and actual.device != expected.device:
        raise AnswerError(
            f"{name} is on device '{actual.device}' but expected '{expected.device}'. Create new"
            " tensors on the device the call asks for: `device=device` when the function takes a"
            " `device` argument, else the input's (`device=x.device`, `torch.zeros_like(x)`); never"
            " DEVICE or a fixed device."
        )
    if actual.device.type == "meta" or expected.device.type == "meta":
        return
    a = actual.detach().cpu()
    e = expected.detach().cpu()
    if a.dtype.is_floating_point or a.dtype.is_complex:
        ok = _isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        tol = f" (tolerance: atol={atol:g}, rtol={rtol:g})"
    else:
        ok = _equal(a, e)
        tol = ""
    if bool(ok.all()):
        return
    bad = _nonzero(_logical_not(ok))
    first = tuple(int(i) for i in bad[0]) if a.ndim else ()
    got_v = _element(a[first] if a.ndim else a)
    want_v = _element(e[first] if e.ndim else e)
    where = f" at index {_index_str(first)}" if a.ndim else ""
    raise AnswerError(
        f"{name} has the right shape, dtype and device, but {bad.shape[0]} of {a.numel()} values"
        f" differ{tol}. First difference{where}: got {_show(got_v)}, expected {_show(want_v)}."
    )


def check_value(
    actual: Any,
    expected: Any = _MISSING,
    *,
    name: str = "your answer",
    rel_tol: float = 1e-6,
    abs_tol: float = 1e-9,
) -> None:
    """Compare a plain Python value (number, string, dtype, tuple, ...) with the expected one.

    Floats are compared with ``math.isclose(rel_tol, abs_tol)``; everything else exactly,
    and only values of the exact expected type count (no subclass, no object whose ``==``
    always says yes).
    A 0-d tensor where a number was expected is refused with a hint to use ``.item()``.

    In a grading run the value is observed instead (see :mod:`course_utils.observe`), and
    ``expected`` may be left out in hidden tests: the solution's own value is then expected.

    Raises:
        AnswerError: naming what came, what was expected and what to try.
    """
    __tracebackhide__ = True  # pytest and IPython: not the learner's frame
    if _observe.active():
        params = {"name": name, "rel_tol": rel_tol, "abs_tol": abs_tol}
        _observe.emit("value", actual, expected=expected, has_expected=expected is not _MISSING, params=params)
        return
    if expected is _MISSING:  # a hidden test outside a grading run: nothing to compare with
        return
    if isinstance(expected, _Tensor):
        check_tensor(actual, expected, name=name)
        return
    if isinstance(actual, _Tensor) and not isinstance(expected, _Tensor):
        hint = " Use `.item()` to get a Python number." if actual.numel() == 1 else ""
        raise AnswerError(f"{name} should be {_describe(expected)}, but it is {_describe(actual)}.{hint}")
    if isinstance(expected, bool) or expected is None:
        if actual is not expected:
            raise AnswerError(f"{name} is {_show(actual)} but expected {_show(expected)}.")
        return
    if isinstance(expected, float):
        if _tensor_type(actual) not in (int, float):
            raise AnswerError(f"{name} should be a number, but it is {_describe(actual)}.")
        if not math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol):
            raise AnswerError(f"{name} is {_show(actual)} but expected {_show(expected)} (rel_tol={rel_tol:g}).")
        return
    if isinstance(expected, int):
        if _tensor_type(actual) is not int:
            raise AnswerError(f"{name} should be an int, but it is {_describe(actual)}.")
        if actual != expected:
            raise AnswerError(f"{name} is {_show(actual, str)} but expected {_show(expected, str)}.")
        return
    if isinstance(expected, tuple | list | torch.Size):
        why = sequence_kind(actual, expected, name)
        if why is not None:
            raise AnswerError(why)
        if len(actual) != len(expected):
            raise AnswerError(f"{name} is {_show(list(actual))}, {len(actual)} items, but expected {len(expected)}:"
                              f" {_show(list(expected))}.")
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            check_value(a, e, name=item_name(name, i), rel_tol=rel_tol, abs_tol=abs_tol)
        return
    # Same exact type, so that no subclass of the learner's can answer `==` in our place.
    if _tensor_type(actual) is not _tensor_type(expected) or not bool(expected == actual):
        raise AnswerError(f"{name} is {_show(actual)} but expected {_show(expected)}.")


#: Sequence types that stand for one another: a torch.Size *is* a tuple (a subclass), so a
#: shape returned where a tuple is asked for counts, and a tuple where a shape is asked for.
_TUPLES = (tuple, torch.Size)
_ITEM = re.compile(r"(?s)item ((?:\[\d+\])+) of (.*)")
_EXPRESSION = re.compile(r"[A-Za-z_][\w.]*(\([^()]*\))?(\[\d+\])*")


def sequence_kind(actual: Any, expected: Any, name: str) -> str | None:
    """Why ``actual`` is not the kind of sequence ``expected`` is (None when it is): a list where
    the exercise asks for a tuple is refused, as the statement's words are; a torch.Size stands
    for a tuple and the reverse."""
    kind, want = _tensor_type(actual), _tensor_type(expected)
    if kind is want or (kind in _TUPLES and want in _TUPLES):
        return None
    wanted = "a tuple" if want in _TUPLES else f"a {want.__name__}"
    if kind in (list, *_TUPLES):
        fix = ("return a tuple (`return a, b`, or `tuple(...)`)" if want in _TUPLES
               else "return a list (`[a, b]`, or `list(...)`)")
        return f"{name} should be {wanted}, but it is {_describe(actual)}: {fix}."
    return f"{name} should be {wanted}, but it is {_describe(actual)}."


def item_name(name: str, index: int) -> str:
    """How a message names item ``index`` of the value called ``name``: ``f(x)[1]`` after an
    expression, ``item [2][1] of <name>`` after words."""
    m = _ITEM.fullmatch(name)
    if m:
        return f"item {m[1]}[{index}] of {m[2]}"
    if _EXPRESSION.fullmatch(name):
        return f"{name}[{index}]"
    return f"item [{index}] of {name}"


class RaisesInfo:
    """What :func:`raises` caught: the exception is in ``.value`` once the block exits."""

    value: BaseException | None = None


@contextlib.contextmanager
def raises(exc_type: type[BaseException], match: str | None = None) -> Iterator[RaisesInfo]:
    """Assert that the block raises ``exc_type`` (and, if given, a message matching ``match``).

    Used by the demos to show a trap by running it::

        with raises(RuntimeError, match="view size is not compatible"):
            x.T.view(-1)

    Raises:
        AnswerError: when nothing was raised, or the message did not match.
    """
    __tracebackhide__ = True  # pytest and IPython: not the learner's frame
    info = RaisesInfo()
    if _observe.active():
        types = exc_type if isinstance(exc_type, tuple) else (exc_type,)
        params = {"types": [f"{t.__module__}.{t.__qualname__}" for t in types], "match": match}
        try:
            yield info
        except Exception as exc:  # observed, not judged: the grader compares
            info.value = exc
            _observe.emit("raises", exc, params=params)
            return
        _observe.emit("raises", _observe.NO_EXCEPTION, params=params)
        return
    try:
        yield info
    except exc_type as exc:
        info.value = exc
        if match is not None and not re.search(match, str(exc)):
            raise AnswerError(
                f"{exc_type.__name__} was raised as expected, but its message {str(exc)!r}"
                f" does not match {match!r}."
            ) from exc
        return
    raise AnswerError(f"expected {exc_type.__name__} to be raised, but the code ran without error.")
