"""Where prepared notebooks run: in this process's pool, in warm fork servers, or on a Dask cluster.

Workers only execute (no gradebook, no solutions, no scoring): each returns the executed
notebook and what happened; the coordinator scores it (:mod:`grader.verdict`).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import nbformat

from grader.engines.execution import ExecOptions, Execution
from grader.engines.kernel import execute

#: Execution engines: ``kernel`` (a Jupyter kernel per submission, the reference) and
#: ``fork`` (children of a warm interpreter, see grader.engines.fork). Both give the same grades.
ENGINES = ("fork", "kernel")
DEFAULT_ENGINE = "fork"


def execute_notebook(nb: nbformat.NotebookNode, options: ExecOptions, engine: str) -> Execution:
    """Run ``nb`` with the given engine (see :func:`grader.engines.kernel.execute`)."""
    if engine == "fork":
        from grader.engines import fork

        return fork.execute(nb, options)
    if engine == "kernel":
        return execute(nb, options)
    raise ValueError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")


def run_one(payload: tuple) -> tuple[nbformat.NotebookNode, dict[str, Any]]:
    """Worker: execute one prepared notebook (no gradebook, no solutions, no scoring here).

    ``payload`` is ``(notebook, ExecOptions fields, findings[, engine])``; the engine is
    ``kernel`` (the reference) or ``fork`` (see :mod:`grader.engines.fork`). Returns the
    executed notebook and what happened; the coordinator scores it (:mod:`grader.verdict`).
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


def execute_all(todo: Iterable[tuple], jobs: int, engine: str = "kernel", scheduler: str | None = None,
                on_idle: Callable[[], None] = lambda: None) -> Iterator[tuple]:
    """Yield (submission, fingerprint, worker outcome or exception) as executions finish.

    ``todo`` is consumed lazily: a submission starts as soon as it is prepared. A worker
    process that crashes costs the submission it was running; the others are run again in
    a fresh pool. The fork engine's workers are threads of this process: each drives the
    children of its own warm server, which do the work. ``on_idle`` is called when the
    coordinator is about to wait for workers with no result ready (with ``jobs`` 1: before each
    execution, which the coordinator waits for).
    """
    if scheduler:
        from grader import distributed

        yield from distributed.execute_all(todo, scheduler, engine, on_idle)
        return
    if jobs == 1:
        for sub, nb, fp, options, findings in todo:
            on_idle()
            try:
                yield sub, fp, run_one((nb, options, findings, engine))
            except Exception as exc:
                yield sub, fp, exc
        return
    if engine == "fork":
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="grade")
    else:
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                                      initializer=_leave_interrupts_to_the_coordinator)
    broken = []
    try:
        for item, future in _as_submitted(pool, todo, engine, on_idle):
            try:
                yield item[0], item[2], future.result()
            except concurrent.futures.process.BrokenProcessPool:
                broken.append(item)
            except Exception as exc:
                yield item[0], item[2], exc
    except BaseException:  # Ctrl-C, or the coordinator stopped reading: stop at once, start nothing more
        _abandon(pool, engine)
        raise
    pool.shutdown()
    for item in broken:  # one at a time, each in a fresh process: a crash costs only its own
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            try:
                yield item[0], item[2], pool.submit(run_one, item[1:2] + item[3:] + (engine,)).result()
            except Exception as exc:
                yield item[0], item[2], exc


def _leave_interrupts_to_the_coordinator() -> None:
    """A pool worker ignores Ctrl-C (the coordinator stops the batch and the workers). A handler,
    not ``SIG_IGN``, which the kernels a worker starts would inherit."""
    signal.signal(signal.SIGINT, lambda *_: None)


def _abandon(pool: concurrent.futures.Executor, engine: str) -> None:
    """Drop the submissions not started and stop those running: their results are not recorded,
    so a rerun grades them."""
    pool.shutdown(wait=False, cancel_futures=True)
    if isinstance(pool, concurrent.futures.ProcessPoolExecutor):
        workers = multiprocessing.active_children()  # the pool's workers
        for child in workers:
            child.kill()
        for child in workers:
            child.join(timeout=5)
        # A kernel dies with its worker (bubblewrap's --die-with-parent), except one whose sandbox was
        # still starting: it lives in its submission's cgroup, which a dead worker leaves behind.
        from grader.engines.budget import cgroup_mode, sweep_stale

        mode = cgroup_mode()
        if mode:
            sweep_stale(mode)
    elif engine == "fork":  # worker threads wait on children of the warm servers: stopping those frees them
        from grader.engines import forkpool

        forkpool.shutdown()


def _as_submitted(pool: concurrent.futures.Executor, todo: Iterable[tuple], engine: str,
                  on_idle: Callable[[], None]) -> Iterator[tuple]:
    """Submit each item as it comes; yield (item, future) as futures finish, finished ones first."""
    pending: dict[concurrent.futures.Future, tuple] = {}
    for item in todo:
        try:
            pending[pool.submit(run_one, item[1:2] + item[3:] + (engine,))] = item
        except concurrent.futures.process.BrokenProcessPool:
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_exception(concurrent.futures.process.BrokenProcessPool("the worker pool broke"))
            pending[future] = item
        for future in [f for f in pending if f.done()]:
            yield pending.pop(future), future
    while pending:
        if not any(f.done() for f in pending):
            on_idle()
        done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            yield pending.pop(future), future
