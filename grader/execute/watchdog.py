"""One prepared notebook executed, watched: the engine in a helper thread, given up past its limit.

:func:`run_one` is what a worker runs (a thread, a pool's process, a Dask worker): it executes
and reports, and never scores. :func:`execute_notebook` waits for the engine at most
:func:`stall_limit` seconds, so that one stalled execution is one submission's error, never a
hung batch. The pools that run many of these at once are :mod:`grader.execute.dispatch`'s.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import nbformat

from grader.engines.execution import ExecOptions, Execution, Stops, set_current_stops
from grader.engines.kernel.engine import execute

log = logging.getLogger(__name__)

#: Execution engines: ``kernel`` (a Jupyter kernel per submission, the reference) and
#: ``fork`` (children of a warm interpreter, see grader.engines.fork.engine). Both give the same grades.
ENGINES = ("fork", "kernel")
DEFAULT_ENGINE = "fork"


#: the status line of a submission whose execution the grader gave up on
STALLED = "the grader stopped a stalled submission"


def execute_notebook(nb: nbformat.NotebookNode, options: ExecOptions, engine: str) -> Execution:
    """Run ``nb`` with the given engine (see :func:`grader.engines.kernel.engine.execute`), watched.

    The engine runs in a helper thread, and this thread waits for it at most
    :func:`stall_limit` seconds: the submission's own budget (ten cell timeouts, at least 300 s,
    or ``submission_timeout``), one cell timeout and :data:`~grader.engines.execution.STALL_MARGIN`.
    Past that, whatever the engine waits for will not come: what it started is killed (the
    hooks it registered with :func:`grader.engines.execution.on_stop`), the helper is left
    behind, and the execution is returned with ``error`` saying :data:`STALLED` -- one
    submission's error, never a hung batch.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    limit = stall_limit(options)
    stops = Stops()
    started = time.monotonic()
    job = _Helper.get().submit(_run_engine, nb, options, engine, stops)
    try:
        finished = job.wait(limit)
    except BaseException:  # Ctrl-C while waiting: what the execution started dies with it
        stops.fire()
        _Helper.drop()
        raise
    if finished:
        return job.result()
    stops.fire()
    _Helper.drop()  # its thread may never come back: the next execution gets a new one
    took = time.monotonic() - started
    log.error("%s: its execution took %.0f s, past the %.0f s it may take; what it started was killed",
              STALLED, took, limit)
    return Execution(nb=_snapshot(nb), error=stalled_reason(took, options))


def stall_limit(options: ExecOptions) -> float:
    """Seconds one execution may take before :func:`execute_notebook` gives it up."""
    return options.stall_seconds()


def stalled_reason(took: float, options: ExecOptions) -> str:
    return (f"{STALLED}: its execution took {took:.0f} s, past its budget of {options.budget_seconds():.0f} s "
            "plus a margin; what it had started was killed")


def _run_engine(nb: nbformat.NotebookNode, options: ExecOptions, engine: str, stops: Stops) -> Execution:
    set_current_stops(stops)
    try:
        if engine == "fork":
            from grader.engines.fork import engine as fork

            return fork.execute(nb, options)
        return execute(nb, options)
    finally:
        set_current_stops(None)


def _snapshot(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of a notebook that a stalled thread may still be writing outputs into."""
    for _ in range(5):
        try:
            return copy.deepcopy(nb)
        except RuntimeError:  # changed while copied
            time.sleep(0.05)
    bare = nbformat.v4.new_notebook(metadata=copy.deepcopy(dict(nb.get("metadata", {}))))
    for cell in list(nb.get("cells", [])):
        fresh = nbformat.NotebookNode({k: copy.deepcopy(v) for k, v in dict(cell).items() if k != "outputs"})
        if fresh.get("cell_type") == "code":
            fresh["outputs"] = []
        bare.cells.append(fresh)
    return bare


class _Job:
    def __init__(self, fn: Callable, args: tuple):
        self.fn, self.args = fn, args
        self.done = threading.Event()
        self.value: Any = None
        self.exc: BaseException | None = None

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout)

    def result(self) -> Any:
        if self.exc is not None:
            raise self.exc
        return self.value


class _Helper:
    """A daemon thread that runs one calling thread's executions, one at a time, and is kept for
    the next (an engine's event loop lives in its thread). One that stalls is dropped and never
    joined: not a ``ThreadPoolExecutor``, whose threads the interpreter waits for at exit."""

    _local = threading.local()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="execute", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> _Helper:
        helper = getattr(cls._local, "helper", None)
        if helper is None or not helper.thread.is_alive():
            helper = cls._local.helper = cls()
        return helper

    @classmethod
    def drop(cls) -> None:
        helper = getattr(cls._local, "helper", None)
        cls._local.helper = None
        if helper is not None:
            helper.jobs.put(None)  # it ends after the job it is stuck in, if that ever ends

    def submit(self, fn: Callable, *args) -> _Job:
        job = _Job(fn, args)
        self.jobs.put(job)
        return job

    def _serve(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            try:
                job.value = job.fn(*job.args)
            except BaseException as exc:  # noqa: BLE001 -- handed to the waiting thread
                job.exc = exc
            finally:
                job.done.set()


def run_one(payload: tuple) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
    """Worker: execute one prepared notebook (no gradebook, no solutions, no scoring here).

    ``payload`` is ``(notebook, ExecOptions fields, findings[, engine])``; the engine is
    ``kernel`` (the reference) or ``fork`` (see :mod:`grader.engines.fork.engine`). Returns the
    executed notebook and what happened; the coordinator scores it (:mod:`grader.verdict.judge`).
    Notebooks travel as objects: a thread shares them, a process pool or Dask pickles them
    (pickle between our own processes; what the learner's process sent is data inside),
    never through ``nbformat.writes``/``reads``, whose copies and validation cost more than the
    coordinator's whole share of a submission.
    """
    nb, options, _findings, *rest = payload
    engine = rest[0] if rest else "kernel"
    execution = execute_notebook(nb, ExecOptions(**options), engine)
    info = {
        "timed_out": execution.timed_out,
        "died": execution.died,
        "not_run_from": execution.not_run_from,
        "tampered": {str(k): v for k, v in execution.tampered.items()},
        "restarts": execution.restarts,
        "error": execution.error,
        "cell_timeout": options.get("cell_timeout"),
    }
    return execution.nb, info
