"""Short tracebacks for a failed check: the learner's frames and the message, none of ours.

When a check of :mod:`course_utils.checks` fails in a learner's kernel, the interesting part
is the learner's line that called it and the message that says what to fix. IPython shows an
exception through its ``_render_traceback_`` method when it has one; :class:`AnswerError`
has one that calls :func:`render`, which formats the traceback as IPython would, without the
frames of ``course_utils``, ``contextlib`` (the ``raises`` context manager) and IPython's own.
The exception itself is unchanged: its type and message, which the grader reads, stay as
they were.
"""

from __future__ import annotations

import types
from typing import Any

#: Modules whose frames a learner never needs to read in a check's traceback.
HIDDEN_MODULES = ("course_utils", "contextlib", "IPython", "ipykernel")


def _hidden(frame: types.FrameType) -> bool:
    module = str(frame.f_globals.get("__name__", ""))
    return any(module == m or module.startswith(m + ".") for m in HIDDEN_MODULES)


def learner_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """A copy of the traceback chain ``tb`` without the frames of :data:`HIDDEN_MODULES`."""
    kept = []
    while tb is not None:
        if not _hidden(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, each once."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__]
    return seen


def render(exc: BaseException) -> list[str]:
    """The lines IPython shows for ``exc``: its usual traceback, with only the learner's frames.

    Never raises (IPython would then show no error at all): anything unexpected falls back to
    the one line ``AnswerError: <message>``.
    """
    try:
        from IPython import get_ipython

        shell: Any = get_ipython()
        if shell is None:
            return [_one_line(exc)]
        chain = _chain(exc)
        saved = [e.__traceback__ for e in chain]
        try:
            for e in chain:
                e.__traceback__ = learner_frames(e.__traceback__)
            return list(shell.InteractiveTB.structured_traceback(type(exc), exc, exc.__traceback__, tb_offset=0))
        finally:
            for e, tb in zip(chain, saved, strict=True):
                e.__traceback__ = tb
    except Exception:
        return [_one_line(exc)]


def _one_line(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__
