"""Test cells judged once per distinct data: the same observations against the same reference get the same verdict."""

from __future__ import annotations

import json
from typing import Any

import orjson

#: what orjson would write as JSON although it is none (a dataclass, a date) it refuses instead
_ONLY_JSON = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


class Verdicts:
    """A test cell's verdict, remembered by everything that decides it: the reference's observations
    and the test's assert messages (the very objects, held here so that no other can take their
    ids), how yes/no observations are read, and the learner's data written out as exact JSON text.

    Every correct answer of a batch sends the solution's observations again: judging them once
    spares comparing each of them with the reference for every submission. The learner's data is
    parsed JSON (every engine's outputs are), for which the text is exact: ``True`` is not ``1``,
    ``1`` is not ``1.0``, ``-0.0`` is not ``0.0``, and a key order of its own is another text. Data
    JSON cannot write exactly (``NaN``, ``Infinity``, an integer past 64 bits, a key that is no text,
    an object of another type) is judged every time.
    """

    def __init__(self, max_entries: int = 4096, max_chars: int = 64 << 20) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self._known: dict[tuple, tuple[Any, Any, tuple[str, str]]] = {}
        self._chars = 0

    @staticmethod
    def key(got: list[Any], error: dict | None) -> bytes | None:
        """The exact text of a cell's observations and of its first error (all of it but the
        traceback, which no verdict reads); None when it has none."""
        shown = [got] if error is None else [got, {k: v for k, v in error.items() if k != "traceback"}]
        try:
            text = orjson.dumps(shown, option=_ONLY_JSON)
        except (TypeError, orjson.JSONEncodeError):  # an integer past 64 bits, a key that is no text: not JSON's
            return None
        if b"null" not in text:
            return text
        try:  # orjson writes NaN and Infinity as null, as it writes None: json tells them apart (and refuses them)
            return b"J" + json.dumps(shown, allow_nan=False, separators=(",", ":")).encode()
        except (TypeError, ValueError, RecursionError):
            return None

    def get(self, refs: list[dict], asserts: Any, forge_yes_no: bool, text: bytes) -> tuple[str, str] | None:
        found = self._known.get((id(refs), id(asserts), forge_yes_no, text))
        if found is None or found[0] is not refs or found[1] is not asserts:
            return None
        return found[2]

    def put(self, refs: list[dict], asserts: Any, forge_yes_no: bool, text: bytes, verdict: tuple[str, str]) -> None:
        if len(self._known) >= self.max_entries or self._chars + len(text) > self.max_chars:
            self._known.clear()
            self._chars = 0
        self._known[(id(refs), id(asserts), forge_yes_no, text)] = (refs, asserts, verdict)
        self._chars += len(text)
