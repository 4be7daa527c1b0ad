"""What every engine shares: how to run a submission (:class:`ExecOptions`), what happened
(:class:`Execution`) and the environment of a grading process (:func:`kernel_env`)."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

TIMEOUT_ENAME = "CellTimeoutError"
PROBE_TIMEOUT = 5

#: seconds past a submission's own budget (:meth:`ExecOptions.budget_seconds`, plus one cell
#: timeout) after which the grader stops waiting for its execution (:func:`grader.execute.watchdog.execute_notebook`):
#: later than the kernel engine's own watchdog, which kills the kernels 30 s past that point
STALL_MARGIN = 90

log = logging.getLogger(__name__)

#: Options that change where or how fast a submission runs, never its grade: left out of what a
#: recorded result depends on and of the options a workspace remembers.
NOT_GRADING = ("hide", "preload")

#: Variables a kernel inherits; everything else (tokens, keys, cloud credentials) is dropped.
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


@dataclass
class ExecOptions:
    """How to execute a submission."""

    cell_timeout: int = 60
    device: str = "cpu"
    startup_timeout: int = 60
    memory_mb: int | None = 2048
    isolate: bool = True
    max_restarts: int = 3
    hide: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    #: wall-clock seconds one submission may take in all (kernels, replays, every cell);
    #: None: ten cell timeouts, at least 300 s. Cells past it are not run.
    submission_timeout: int | None = None
    #: modules a fork server imports for its children beyond grader.prepare.integrity.PRELOAD: what the
    #: batch's chapters import lazily and slowly (their ``grading.toml``'s ``preload``)
    preload: list[str] = field(default_factory=list)

    def budget_seconds(self) -> float:
        return float(self.submission_timeout or max(300, 10 * self.cell_timeout))

    def stall_seconds(self) -> float:
        """How long one execution may take before the grader stops it as stalled."""
        return self.budget_seconds() + self.cell_timeout + STALL_MARGIN


@dataclass
class Execution:
    """What happened while a notebook ran (cell indices refer to ``nb.cells``)."""

    nb: NotebookNode
    timed_out: list[int] = field(default_factory=list)
    died: list[int] = field(default_factory=list)
    not_run_from: int | None = None  # gave up here (too many restarts): later cells never ran
    tampered: dict[int, str] = field(default_factory=dict)  # test cell index -> what was replaced
    error: str | None = None  # the kernel could not run at all
    restarts: int = 0
    cell_timeout: int | None = None  # the limit a cell stopped as timed out ran into


def kernel_env(options: ExecOptions, home: str) -> dict[str, str]:
    """The environment of a grading kernel: stripped of secrets, quiet, CPU unless asked."""
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env.update(
        HOME=home,
        TMPDIR=home,
        PYTHONHASHSEED="0",
        COURSE_GRADING="1",
        MPLBACKEND="Agg",
        PYTHONWARNINGS="ignore",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        TQDM_DISABLE="1",
        JUPYTER_PLATFORM_DIRS="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    if options.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(options.extra_env)
    return env


# -- stopping an execution from outside (the watchdog: grader.execute.watchdog) ------------------------

class Stops:
    """What stops one execution: the engine running it registers (:func:`on_stop`) how to kill what
    it started (kernels, a fork child); the watchdog that gives up on the execution fires them."""

    def __init__(self) -> None:
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self.fired = False

    def add(self, hook: Callable[[], None]) -> None:
        with self._lock:
            if not self.fired:
                self._hooks.append(hook)
                return
        hook()  # already stopped: whatever starts now is stopped at once

    def fire(self) -> None:
        with self._lock:
            self.fired, hooks = True, list(self._hooks)
        for hook in hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001 -- the others must run too
                log.exception("stopping an execution failed")


_running = threading.local()


def current_stops() -> Stops | None:
    """The :class:`Stops` of the execution running in this thread (None outside one)."""
    return getattr(_running, "stops", None)


def set_current_stops(stops: Stops | None) -> None:
    _running.stops = stops


def on_stop(hook: Callable[[], None]) -> None:
    """Have ``hook`` called if the execution running in this thread is given up as stalled."""
    stops = current_stops()
    if stops is not None:
        stops.add(hook)


def stopped() -> bool:
    """Whether the execution running in this thread was given up (start nothing more for it)."""
    stops = current_stops()
    return stops is not None and stops.fired


def options_key(options: dict[str, Any]) -> bytes:
    """The options that can change a grade, as bytes: not where the folders lie (``hide``), so
    the same submissions copied elsewhere are not graded again."""
    return json.dumps({k: v for k, v in options.items() if k not in NOT_GRADING}, sort_keys=True).encode()
