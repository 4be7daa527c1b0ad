"""Predictions the learner commits to: ``guess = ...`` in one cell, ``reveal(guess, answer)`` in the next.

A prediction is never graded: ``reveal`` only prints whether the guess was right, and never
raises, so a notebook run with every guess left blank (``guess = ...``) runs to the end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def _normal(value: Any) -> Any:
    """A form of ``value`` that compares as a reader means it: shapes as tuples, words without case."""
    if isinstance(value, str):
        return " ".join(value.casefold().split()).removeprefix("torch.")
    if isinstance(value, bool):
        return value
    if hasattr(value, "tolist") and not isinstance(value, int | float):  # a tensor, an array, torch.Size
        value = value.tolist()
    if isinstance(value, list | tuple):
        return tuple(_normal(v) for v in value)
    if type(value).__name__ == "dtype":  # a torch.dtype, said as "float32" or "torch.float32"
        return str(value).removeprefix("torch.")
    return value


def same(guess: Any, answer: Any) -> bool:
    """Whether ``guess`` says what ``answer`` is: numbers to 1e-6, shapes as tuples, words without case."""
    g, a = _normal(guess), _normal(answer)
    if isinstance(g, tuple) and isinstance(a, tuple):
        return len(g) == len(a) and all(same(x, y) for x, y in zip(g, a, strict=True))
    if isinstance(g, bool) or isinstance(a, bool):  # True is no 1 here: a yes/no question wants a yes/no
        return type(g) is type(a) and g == a
    if isinstance(g, int | float) and isinstance(a, int | float):
        return math.isclose(g, a, rel_tol=1e-6, abs_tol=1e-9)
    try:
        return bool(g == a)
    except Exception:  # a comparison that does not give a yes or no (two tensors of other shapes)
        return False


def reveal(guess: Any, answer: Any, *, choices: Sequence[Any] | None = None) -> bool | None:
    """Say whether the learner's ``guess`` matches the ``answer`` the cell just computed.

    Args:
        guess: what the learner wrote in the cell above (``...`` while they have not).
        answer: the value the demo computed, never a literal: the run is the evidence.
        choices: the options the question offered, when it offered some.

    Returns:
        True or False for a guess, None for a blank one. Never raises: nothing here is graded.
    """
    if guess is Ellipsis or guess is None or (isinstance(guess, str) and not guess.strip()):
        print(f"No guess yet. The answer: {answer!r}. Next time, write your guess in the cell above first.")
        return None
    if choices is not None and not any(same(guess, c) for c in choices):
        print(f"{guess!r} is not one of the choices {', '.join(map(repr, choices))}. The answer: {answer!r}.")
        return False
    right = same(guess, answer)
    print(f"Right: {answer!r}." if right else f"Not quite: you guessed {guess!r}, the answer is {answer!r}.")
    return right
