"""One observation of the learner's against the reference's: None when it matches, else why not.

:func:`compare` is the comparison :mod:`grader.verdict.judge` makes at every check of a test cell.
Every argument of the check other than the learner's value comes from the reference (decoded
once per batch, :mod:`grader.verdict.expectations`); the reason is written here, from the two values
and the test's own wording, never from text the learner's process sent.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch

from course_utils import checks, wording
from grader.verdict import expectations
from grader.verdict.expectations import Expectation, Known
from grader.verdict.instrument import Message
from grader.verdict.library_messages import library_words
from grader.verdict.observations import IDENT, Elsewhere, Malformed, Opaque, Raised, decode


def _answer_error(fn, *args, **kwargs) -> str | None:
    try:
        fn(*args, **kwargs)
    except checks.AnswerError as exc:
        return str(exc)
    return None


#: Kinds of check whose verdict depends on nothing of the learner's observation but its value.
_BY_VALUE = ("begin", "end", "phase", "tensor", "value", "shape", "raises")


def compare(got: dict, ref: dict, asserts: dict[int, Message], *, hidden: bool = False) -> str | None:
    """None when the learner's observation ``got`` matches the reference's ``ref``, else why not.

    An answer that sends the very data the solution's run sent at this check gets the verdict
    worked out once for that data (see :class:`grader.verdict.expectations.Known`); any other answer is
    decoded and compared. On a ``hidden`` input the reason says what differs -- the kind, shape,
    dtype or device, how many values and where, the learner's own value -- and never the
    solution's value: hidden inputs repeat across submissions, so a value shown is an answer given.
    """
    kind = ref["kind"]
    if not isinstance(got, dict) or got.get("kind") != kind or got.get("line") != ref.get("line"):
        return "the test's checks did not run as they should (a check was skipped, repeated or added)"
    exp = expectations.of(ref)
    data = got.get("actual")
    known = exp.own_answer(_own_answer)
    if known is not None and known.matches(data) and (known.verdict is None or not hidden):
        return known.verdict
    actual = decode(data)
    why = _compare(actual, exp, got, asserts)
    if why is None or not hidden:
        return why
    return _hidden(actual, exp, why)


def _own_answer(exp: Expectation) -> Known | None:
    """The data the solution's run sent as its answer, with the verdict for an answer sending
    that very data; None where the verdict could depend on more than the data, or cannot be given."""
    ref = exp.ref
    try:
        if ref["kind"] not in _BY_VALUE or "actual" not in ref:
            return None
        return Known(ref["actual"], _compare(decode(ref["actual"]), exp, ref, {}))
    except Exception:  # the learner's answer takes the full comparison, and fails as it would
        return None


def _compare(actual: Any, exp: Expectation, got: dict, asserts: dict[int, Message]) -> str | None:
    """:func:`compare` for the decoded value ``actual`` of the learner's observation ``got``."""
    kind = exp.ref["kind"]
    if kind in ("begin", "end", "phase"):
        return None if actual == exp.actual() else "the test did not run as it should"
    name = exp.param("name", "your answer")
    if isinstance(actual, Opaque) and kind in ("tensor", "value", "shape"):
        what = "a value too large to compare" if actual.kind == "too large" else f"an object of type {actual.kind}"
        wanted = "a plain torch.Tensor" if kind != "value" else "a number, a tensor or a plain Python value"
        return f"{name} should be {wanted}, but it is {what}."
    if kind == "tensor":
        expected = exp.expected()
        if isinstance(expected, Elsewhere) or isinstance(actual, Elsewhere):
            return _elsewhere(actual, expected, name)
        return _answer_error(
            checks.check_tensor, actual, expected, name=name, rtol=exp.param("rtol", 1e-5),
            atol=exp.param("atol", 1e-8), check_device=exp.param("check_device", True),
        )
    if kind == "value":
        expected = exp.expected()
        if isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
            return _arrays(actual, expected, name, exp.param("rel_tol", 1e-6), exp.param("abs_tol", 1e-9))
        return _answer_error(
            checks.check_value, actual, expected, name=name,
            rel_tol=exp.param("rel_tol", 1e-6), abs_tol=exp.param("abs_tol", 1e-9),
        )
    if kind == "shape":
        return _answer_error(checks.check_shape, actual, exp.param("shape", ()), name=name)
    if kind == "raises":
        return _raised(actual, exp.param("types", []), exp.param("match", None))
    if kind == "assert":
        if actual is True:
            return None
        return site_message(got, asserts)
    return "the test sent an observation of an unknown kind"


def _hidden(actual: Any, exp: Expectation, why: str) -> str:
    """``why`` rewritten for a hidden input: everything it says but the solution's value."""
    kind, name = exp.ref["kind"], exp.param("name", "your answer")
    expected = exp.expected() if kind in ("tensor", "value") else None
    if kind == "raises":
        wanted = " or ".join(t.rsplit(".", 1)[-1] for t in exp.param("types", [])) or "an error"
        return why if "does not match" not in why else f"{wanted} was raised as expected, but not with the message expected."
    if kind == "tensor" or isinstance(expected, torch.Tensor):
        return _hidden_tensor(actual, expected, name, why)
    if kind == "value":
        return _hidden_value(actual, expected, name, exp.param("rel_tol", 1e-6), exp.param("abs_tol", 1e-9)) or why
    return why


def _hidden_tensor(actual: Any, expected: Any, name: str, why: str) -> str:
    if isinstance(actual, Elsewhere):
        actual = actual.tensor
    if isinstance(expected, Elsewhere):
        expected = expected.tensor
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)) or "values differ" not in why:
        return why  # its kind, shape, dtype or device differs: the reason names no value
    a, e = actual.detach().cpu(), expected.detach().cpu()
    try:
        ok = torch.isclose(a, e, equal_nan=True) if a.is_floating_point() or a.is_complex() else a == e
        bad = torch.nonzero(~ok)
    except Exception:  # values the grader cannot line up: say no more than that they differ
        return f"{name} has the right shape, dtype and device, but its values differ from the solution's on this hidden input."
    if not len(bad):
        return f"{name} has the right shape, dtype and device, but some values are not within the tolerance."
    first = tuple(int(i) for i in bad[0]) if a.ndim else ()
    where = f" at index {checks._index_str(first)}" if a.ndim else ""
    return (f"{name} has the right shape, dtype and device, but {len(bad)} of {a.numel()} values differ from the"
            f" solution's on this hidden input. First difference{where}: yours is {_short(checks._element(a[first]))}.")


def _kind_of(value: Any) -> str:
    """What sort of value ``value`` is, without the value."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {checks._fmt_shape(value.shape)} and dtype {value.dtype}"
    if value is None:
        return "None"
    kind = checks._tensor_type(value).__name__
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _hidden_value(actual: Any, expected: Any, name: str, rel_tol: float, abs_tol: float) -> str | None:
    """The first difference between ``actual`` and ``expected``, told without ``expected``'s value."""
    if _answer_error(checks.check_value, actual, expected, name=name, rel_tol=rel_tol, abs_tol=abs_tol) is None:
        return None
    if isinstance(expected, tuple | list | torch.Size) and isinstance(actual, tuple | list | torch.Size):
        kind = checks.sequence_kind(actual, expected, name)  # names the learner's value only
        if kind is not None:
            return kind
        if len(actual) != len(expected):
            return f"{name} is {_short(list(actual))}, {len(actual)} items, but expected {len(expected)}."
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            why = _hidden_value(a, e, checks.item_name(name, i), rel_tol, abs_tol)
            if why is not None:
                return why
        return f"{name} differs from the solution's value on this hidden input."
    if isinstance(expected, torch.Tensor):
        why = _answer_error(checks.check_tensor, actual, expected, name=name)
        return _hidden_tensor(actual, expected, name, why or "")
    same_sort = (checks._tensor_type(actual) is checks._tensor_type(expected)
                 or (isinstance(expected, float) and checks._tensor_type(actual) is int))
    if not same_sort:
        return f"{name} should be {_kind_of(expected)}, but it is {checks._describe(actual)}."
    return f"{name} is {_short(actual)}, which is not the solution's value on this hidden input."


def _short(value: Any, limit: int = 40) -> str:
    """A learner's value as a reason quotes it: its repr, capped."""
    text = repr(wording.tidy(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arrays(actual: Any, expected: Any, name: str, rel_tol: float, abs_tol: float) -> str | None:
    """NumPy arrays compared as check_tensor compares tensors: kind, shape, dtype, then values."""
    if not isinstance(actual, np.ndarray):
        return f"{name} should be a NumPy array, but it is {checks._describe(actual)}."
    if not isinstance(expected, np.ndarray):
        return f"{name} should be {checks._describe(expected)}, but it is a NumPy array."
    if actual.shape != expected.shape:
        return f"{name} has shape {checks._fmt_shape(actual.shape)} but expected {checks._fmt_shape(expected.shape)}."
    if actual.dtype != expected.dtype:
        return f"{name} has dtype {actual.dtype} but expected {expected.dtype}."
    if actual.dtype.kind in "fc":
        ok = np.isclose(actual, expected, rtol=rel_tol, atol=abs_tol, equal_nan=True)
    else:
        ok = actual == expected
    if bool(np.all(ok)):
        return None
    return f"{name} has the right shape and dtype, but {int(np.size(ok) - np.count_nonzero(ok))} of {actual.size} values differ."


def _elsewhere(actual: Any, expected: Any, name: str) -> str | None:
    a = actual.device if isinstance(actual, Elsewhere) else getattr(actual, "device", None)
    e = expected.device if isinstance(expected, Elsewhere) else expected.device
    if a != e:
        return f"{name} is on device '{a}' but expected '{e}'."
    at = actual.tensor if isinstance(actual, Elsewhere) else actual
    et = expected.tensor if isinstance(expected, Elsewhere) else expected
    return _answer_error(checks.check_tensor, at, et, name=name, check_device=False)


def _raised(actual: Any, types: list[str], match: str | None) -> str | None:
    wanted = " or ".join(t.rsplit(".", 1)[-1] for t in types) or "an error"
    if not isinstance(actual, Raised):
        return "the test's checks did not run as they should"
    if actual.type is None:
        return f"expected {wanted} to be raised, but the code ran without error."
    if not set(types) & set(actual.mro):
        return f"expected {wanted} to be raised, but the code raised {exception_name(actual.type)}."
    if match is not None and not re.search(match, actual.message):
        return f"{wanted} was raised as expected, but its message does not match {match!r}."
    return None


#: Modules whose exception classes a reason may name: Python's and the libraries' a chapter uses.
LIBRARIES = ("builtins", "torch", "numpy", "course_utils", "IPython", "math", "json", "re")


def exception_name(qualified: str) -> str:
    """How a reason names the exception class ``module.Class`` the learner's code raised: by its
    name when Python or a library defines it, else without it (a class the notebook defined can
    carry any text in its name)."""
    module, _, name = str(qualified).rpartition(".")
    if IDENT.match(str(qualified)) and module.split(".")[0] in LIBRARIES and len(name) <= 40:
        return name
    return "an exception of a class defined in the notebook"


def site_message(obs: dict, asserts: dict[int, Message]) -> str:
    """The test's own message for a failed assert or ``raise AnswerError``, values written in
    as the test formats them where they are plain data (see :func:`_plain`)."""
    site = obs.get("line")
    message = asserts.get(site) if type(site) is int else None
    if message is None or not message.parts:
        return "a check of the test failed"
    params = obs.get("params")
    raw = params.get("values") if isinstance(params, dict) else None
    try:
        decoded = decode(raw) if raw is not None else ()
    except (Malformed, TypeError):
        decoded = ()
    values = list(decoded) if type(decoded) in (list, tuple) else []  # never a tensor's items one by one
    formats = list(message.formats)
    out = []
    for part in message.parts:
        if part is not None:
            out.append(part)
            continue
        fmt = formats.pop(0) if formats else ("", "")
        out.append(_plain(values.pop(0), message.visible, *fmt) if values else "…")
    return "".join(out)


#: A string a test's message writes in although the visible test does not hold it: a name, a
#: device, a dtype, a type's dotted name (never prose: that is learner text).
_TOKEN = re.compile(r"[A-Za-z_][\w.:]{0,39}")
_NP_DTYPE = re.compile(r"dtype\('([a-z]+[0-9]*)'\)")
_NUMBERS = (bool, int, float, complex)


def _data(value: Any, depth: int = 0) -> Any:
    """``value`` as plain data the grader built itself (numbers, bools, None, strings, dtypes,
    devices, NumPy scalars and dtypes, and lists and tuples of those), or ``_NOT_PLAIN``."""
    if value is None or type(value) in (*_NUMBERS, str) or isinstance(value, torch.dtype | torch.device):
        return value
    if isinstance(value, np.bool_ | np.number):
        return value
    if isinstance(value, Opaque) and value.kind.startswith("numpy.") and _NP_DTYPE.fullmatch(value.text):
        try:
            return np.dtype(_NP_DTYPE.fullmatch(value.text)[1])
        except TypeError:
            return _NOT_PLAIN
    if isinstance(value, torch.Size):
        return value
    if type(value) in (list, tuple) and depth < 3:
        items = [_data(v, depth + 1) for v in value]
        return _NOT_PLAIN if any(v is _NOT_PLAIN for v in items) else type(value)(items)
    return _NOT_PLAIN


_NOT_PLAIN = object()


def _plain(value: Any, visible: str, conversion: str = "", spec: str = "") -> str:
    """A value written into a test's message as the test formats it (``{x!r}``, ``{x:.3f}``),
    cut to :data:`MAX_QUOTED` characters; "…" when it is no plain data.

    Every value is rebuilt by the grader from the observation (:func:`grader.verdict.observations.decode`),
    so what is formatted is the grader's own object: numbers, strings, dtypes, devices, NumPy
    scalars and dtypes, lists and tuples of those. A string the visible test holds is written
    as the test formats it; any other string only where it is a name (``'mps'``, ``'numpy.bool'``)
    or an error message of Python's or torch's (its template's words, :mod:`grader.verdict.library_messages`),
    quoted as Python's repr quotes it."""
    if isinstance(value, torch.Tensor):
        return _capped(f"a tensor of shape {checks._fmt_shape(value.shape)} and dtype {value.dtype}")
    data = _data(value)
    if data is _NOT_PLAIN:
        return "…"
    if type(data) is str:
        if data and data in visible and data.isprintable():
            return repr(data) if conversion in ("r", "a") else data
        if _TOKEN.fullmatch(data):  # a name, a device, a dtype: a value, not prose
            return repr(data)
        words = library_words(data)  # an error message of Python's or torch's: its own words only
        return repr(words) if words else "…"
    data = wording.tidy(data)
    if conversion in ("r", "a"):
        return _capped(repr(data))
    try:
        return _capped(format(data, spec))
    except (TypeError, ValueError):
        return _capped(str(data))


#: Characters of a value the learner's process sent that a reason may quote.
MAX_QUOTED = 40


def _capped(text: str) -> str:
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 1] + "…"
