"""What the solution's run expects at each check, decoded once per batch rather than per learner.

A reference observation (a check of the chapter's solution run, see :mod:`grader.verdict.reference`)
is the same object for every submission of a batch. :func:`of` gives its
:class:`Expectation`: its expected value and parameters, each decoded the first time a
comparison asks for it, and the verdict for an answer that sends the very data the
solution's run sent at that check (see :func:`grader.verdict.comparison.compare`). A reference that
cannot be decoded is decoded again at every use, so that it fails as it always did.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from grader.verdict.observations import decode

#: How much is remembered: reference observations, and text in the data of those decoded (a
#: batch holds a few thousand observations; past either cap the memo starts again, so that a
#: long-lived process does not keep the references of batches long gone).
MAX_REMEMBERED = 20_000
MAX_REMEMBERED_TEXT = 256 * 1024 * 1024

#: Characters a number equal to another may take beyond that other's spelling (an int equal to
#: a float has at most 309 digits and a sign).
NUMBER_TEXT = 330

_UNSET = object()  # not worked out yet


class Expectation:
    """A reference observation ``ref``, its parts decoded once (``ref`` must not change)."""

    __slots__ = ("ref", "_values", "_own", "_text_bound")

    def __init__(self, ref: dict):
        self.ref = ref
        self._values: dict[str, Any] = {}
        self._own: Any = _UNSET
        self._text_bound: Any = _UNSET

    def _decoded(self, slot: str, raw: Callable[[], Any]) -> Any:
        value = self._values.get(slot, _UNSET)
        if value is _UNSET:
            data = raw()
            value = self._values[slot] = decode(data)  # not kept when it raises: it raises every time
            _held[0] += _text(data)
        return value

    def expected(self) -> Any:
        """The value the learner's answer is compared with (``expected`` when the check had one)."""
        ref = self.ref
        return self._decoded("expected", lambda: ref["expected"] if "expected" in ref else ref["actual"])

    def actual(self) -> Any:
        """The value the solution's run observed."""
        return self._decoded("actual", lambda: self.ref["actual"])

    def param(self, key: str, default: Any) -> Any:
        """The check's parameter ``key`` as the solution's run gave it, else ``default``."""
        params = self.ref.get("params", {})
        if key not in params:
            return default
        return self._decoded("." + key, lambda: params[key])

    def own_answer(self, work_out: Callable[[Expectation], Known | None]) -> Known | None:
        """The data the solution's run sent as its answer here, with the verdict for an answer
        sending that very data (``work_out`` gives it, the first time); None where there is none."""
        if self._own is _UNSET:
            self._own = work_out(self)
        return self._own

    def text_bound(self) -> int | None:
        """The most ``len(str(obs))`` can be for an observation ``obs == ref``; None when unknown.

        Such an observation differs from ``ref`` at most in how its numbers are spelled
        (``1``, ``1.0``, ``True``; a float equal to an int of up to 309 digits), and no number
        is spelled in more than :data:`NUMBER_TEXT` characters beyond ``ref``'s own spelling."""
        if self._text_bound is _UNSET:
            numbers = _numbers(self.ref)
            self._text_bound = None if numbers is None else len(str(self.ref)) + NUMBER_TEXT * len(numbers)
        return self._text_bound


_known: dict[int, Expectation] = {}
_held = [0]  # characters of text in the reference data decoded by the remembered expectations


def of(ref: dict) -> Expectation:
    """The :class:`Expectation` of the reference observation ``ref`` (the same one for the same object)."""
    exp = _known.get(id(ref))
    if exp is not None and exp.ref is ref:  # it holds ``ref``: no other object can have its id meanwhile
        return exp
    if len(_known) >= MAX_REMEMBERED or _held[0] > MAX_REMEMBERED_TEXT:
        _known.clear()
        _held[0] = 0
    exp = _known[id(ref)] = Expectation(ref)
    return exp


def _text(data: Any, depth: int = 0) -> int:
    """Characters of text in JSON ``data`` (a tensor's data is text): what decoding it may hold."""
    if type(data) is str:
        return len(data)
    if depth > 20:
        return 0
    if isinstance(data, dict):
        return sum(_text(v, depth + 1) for v in data.values())
    if isinstance(data, list):
        return sum(_text(v, depth + 1) for v in data)
    return 0


class Known:
    """Data a learner's process may send, and the verdict worked out once for that very data.

    :meth:`matches` is exact: the same JSON data all the way down, so that the learner's
    observation decodes to the same value and gets the same verdict. ``data`` must be JSON
    data (dicts with text keys, lists, text, numbers, booleans, None).
    """

    __slots__ = ("data", "verdict", "_numbers")

    def __init__(self, data: Any, verdict: str | None):
        self.data, self.verdict = data, verdict
        self._numbers = _numbers(data)
        if self._numbers is None:
            raise TypeError("not JSON data")

    def matches(self, data: Any) -> bool:
        """Whether ``data`` is the same JSON data: what ``==`` says, and more where it is loose
        (True is not 1, 1 is not 1.0, -0.0 is not 0.0): the same kind of number at each place."""
        if not data == self.data:
            return False
        for path, number in self._numbers:  # same structure: ``==`` held
            found = data
            for key in path:
                found = found[key]
            if type(found) is not type(number) or (
                type(number) is float and math.copysign(1.0, found) != math.copysign(1.0, number)
            ):
                return False
        return True


def _numbers(data: Any, path: tuple = ()) -> list[tuple[tuple, Any]] | None:
    """(path, value) of every number and boolean in JSON ``data``; None when it is not JSON data."""
    kind = type(data)
    if kind is str or data is None:
        return []
    if kind is int or kind is float or kind is bool:
        return [(path, data)]
    if isinstance(data, dict):
        items = data.items()
        if not all(type(k) is str for k in data):
            return None
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return None
    found: list[tuple[tuple, Any]] = []
    for key, value in items:
        inner = _numbers(value, path + (key,)) if len(path) < 40 else None
        if inner is None:
            return None
        found += inner
    return found
