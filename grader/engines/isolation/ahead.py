"""Bubblewrap probed in the background while ``course grade`` checks its input and imports."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_found: dict[str, object] = {}  # "thread": the probe running; "level": what it found


def take() -> str | None:
    """What the background probe found (waiting for it), once; None when none ran or it failed."""
    with _lock:
        thread = _found.pop("thread", None)
    if thread is None:
        return None
    thread.join()
    with _lock:
        return _found.pop("level", None)


@contextmanager
def probing(wanted: bool, probe: Callable[[], str]) -> Iterator[None]:
    """Run ``probe`` (:func:`grader.engines.isolation.sandbox.probe_level`: what bubblewrap can make
    here) while the caller goes on; the first ``sandbox_level`` takes its answer. The probe runs only
    the grader's own code. At the end a probe still running is waited for and what no one took is
    dropped: a refused batch leaves no process behind, and a later question probes afresh."""
    if not wanted:
        yield
        return

    def run() -> None:
        level = probe()
        with _lock:
            _found["level"] = level

    thread = threading.Thread(target=run, name="bwrap-probe", daemon=True)
    with _lock:
        _found.clear()
        _found["thread"] = thread
    thread.start()
    try:
        yield
    finally:
        thread.join()
        with _lock:
            _found.clear()
