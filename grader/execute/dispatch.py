"""Where prepared notebooks run: in this process's pool, in warm fork servers, or on a Dask cluster.

Workers only execute (no gradebook, no solutions, no scoring): each runs
:func:`grader.execute.watchdog.run_one` and returns the executed notebook and what happened; the
coordinator scores it (:mod:`grader.verdict.judge`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator

from grader.engines.execution import ExecOptions
from grader.execute.watchdog import STALLED, run_one, stall_limit, stalled_reason

log = logging.getLogger(__name__)


def execute_all(todo: Iterable[tuple], jobs: int, engine: str = "kernel", scheduler: str | None = None,
                on_idle: Callable[[], None] = lambda: None) -> Iterator[tuple]:
    """Yield (submission, fingerprint, worker outcome or exception) as executions finish.

    ``todo`` is consumed lazily: a submission starts as soon as it is prepared. A worker
    process that crashes costs the submission it was running; the others are run again in
    a fresh pool. The fork engine's workers are threads of this process: each drives the
    children of its own warm server, which do the work. ``on_idle`` is called when the
    coordinator is about to wait for workers with no result ready, and every :data:`TICK` seconds
    while it waits (with ``jobs`` 1: before each execution, which the coordinator waits for).

    No submission can hang the batch: each execution is watched (:func:`grader.execute.watchdog.execute_notebook`), and a
    worker process whose submission is :data:`BACKSTOP` seconds past even that (a process wedged
    as a whole) is killed from here, its submission recorded as :data:`STALLED`, and the others
    it took down with the pool are run again in a fresh one.
    """
    if scheduler:
        from grader.execute import distributed

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
        try:
            for item, future in _as_submitted(pool, todo, engine, on_idle):
                try:
                    yield item[0], item[2], future.result()
                except Exception as exc:
                    yield item[0], item[2], exc
        except BaseException:  # Ctrl-C, or the coordinator stopped reading: stop at once, start nothing more
            _abandon(pool, engine)
            raise
        pool.shutdown()
        return
    yield from _ProcessJobs(jobs, engine, on_idle).run(todo)


#: seconds past :func:`~grader.execute.watchdog.stall_limit` after which the coordinator kills a kernel-engine worker process
#: still running the submission (its own watchdog, in that process, should have answered long before)
BACKSTOP = 60
#: how often the coordinator looks at its workers while it waits (seconds)
TICK = 1.0


def _worker_init(level: str, mode: str | None) -> None:
    """A pool worker: leaves Ctrl-C to the coordinator, and takes the coordinator's findings on
    bubblewrap and cgroups instead of probing again (see :func:`grader.engines.isolation.sandbox.assume_level`)."""
    from grader.engines.isolation import budget, sandbox

    _leave_interrupts_to_the_coordinator()
    sandbox.assume_level(level)
    budget.assume_mode(mode)


def _pool_job(payload: tuple, token: str, started: str):
    """In a pool worker: say which process runs the job, and from when (a file the coordinator
    reads, named ``token`` in its folder ``started``), then run it."""
    path = os.path.join(started, token)
    with open(path + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    return run_one(payload)


class _ProcessJobs:
    """The kernel engine's worker processes, each running one submission at a time, watched."""

    def __init__(self, jobs: int, engine: str, on_idle: Callable[[], None]):
        self.jobs, self.engine, self.on_idle = jobs, engine, on_idle
        self.started = tempfile.mkdtemp(prefix="course-jobs-")
        self.pending: dict[concurrent.futures.Future, tuple] = {}
        self.tokens: dict[concurrent.futures.Future, str] = {}
        self.count = 0
        self.looked = 0.0  # when _stalled last looked
        from grader.engines.isolation.budget import cgroup_mode
        from grader.engines.isolation.sandbox import sandbox_level

        self.findings = (sandbox_level(), cgroup_mode())
        self.pool = self._new_pool()

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        return concurrent.futures.ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                                      initializer=_worker_init, initargs=self.findings)

    def _submit(self, item: tuple) -> None:
        self.count += 1
        token = str(self.count)
        try:
            future = self.pool.submit(_pool_job, item[1:2] + item[3:] + (self.engine,), token, self.started)
        except concurrent.futures.process.BrokenProcessPool:
            future = concurrent.futures.Future()
            future.set_exception(concurrent.futures.process.BrokenProcessPool("the worker pool broke"))
        self.pending[future] = item
        self.tokens[future] = token

    def run(self, todo: Iterable[tuple]) -> Iterator[tuple]:
        broken = []
        try:
            for item in todo:
                self._submit(item)
                yield from self._finished(broken, wait=False)
            while self.pending:
                yield from self._finished(broken, wait=True)
        except BaseException:  # Ctrl-C, or the coordinator stopped reading: stop at once, start nothing more
            _abandon(self.pool, self.engine)
            raise
        finally:
            shutil.rmtree(self.started, ignore_errors=True)
        self.pool.shutdown()
        for item in broken:  # one at a time, each in a fresh process: a crash costs only its own
            with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                        initializer=_worker_init, initargs=self.findings) as pool:
                try:
                    yield item[0], item[2], pool.submit(run_one, item[1:2] + item[3:] + (self.engine,)).result()
                except Exception as exc:
                    yield item[0], item[2], exc

    def _finished(self, broken: list, wait: bool) -> Iterator[tuple]:
        """Yield what finished (waiting up to :data:`TICK` for something with ``wait``), and the
        submissions the watch gave up on."""
        if wait and not any(f.done() for f in self.pending):
            self.on_idle()
            concurrent.futures.wait(self.pending, timeout=TICK, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in [f for f in self.pending if f.done()]:
            item = self.pending.pop(future)
            self._forget(future)
            try:
                yield item[0], item[2], future.result()
            except concurrent.futures.process.BrokenProcessPool:
                broken.append(item)
            except Exception as exc:
                yield item[0], item[2], exc
        yield from self._stalled()

    def _forget(self, future: concurrent.futures.Future) -> None:
        token = self.tokens.pop(future, None)
        if token is not None:
            try:
                os.unlink(os.path.join(self.started, token))
            except OSError:
                pass

    def _stalled(self) -> Iterator[tuple]:
        """Kill the worker of a submission far past its limit; run the others it takes down again."""
        now = time.time()
        if now - self.looked < TICK:
            return
        self.looked = now
        for future, item in list(self.pending.items()):
            path = os.path.join(self.started, self.tokens[future])
            try:
                began = os.stat(path).st_mtime
                with open(path) as f:
                    pid = int(f.read())
            except (OSError, ValueError):
                continue  # not started yet
            options = ExecOptions(**item[3])
            if now - began <= stall_limit(options) + BACKSTOP:
                continue
            log.error("%s: worker process %d ran %s for %.0f s and did not stop it; the pool's processes are killed",
                      STALLED, pid, getattr(item[0], "key", item[0]), now - began)
            self._replace_pool()
            nb, info = item[1], {"error": stalled_reason(now - began, options), "timed_out": [], "died": [],
                                 "not_run_from": None, "tampered": {}, "restarts": 0,
                                 "cell_timeout": item[3].get("cell_timeout")}
            others = [i for f, i in self.pending.items() if f is not future]
            for f in list(self.pending):
                self._forget(f)
            self.pending.clear()
            yield item[0], item[2], (nb, info)
            for other in others:  # killed with the pool: their results were not recorded
                self._submit(other)
            return

    def _replace_pool(self) -> None:
        """Kill every worker of the pool and what it started (a kernel without bubblewrap outlives
        its worker otherwise), and start a fresh pool."""
        from grader.engines.isolation.treewatch import kill_tree

        workers = list(getattr(self.pool, "_processes", {}) or {})
        self.pool.shutdown(wait=False, cancel_futures=True)
        for pid in workers:
            kill_tree(pid)
        self.pool = self._new_pool()


def _leave_interrupts_to_the_coordinator() -> None:
    """A pool worker ignores Ctrl-C (the coordinator stops the batch and the workers). A handler,
    not ``SIG_IGN``, which the kernels a worker starts would inherit."""
    signal.signal(signal.SIGINT, lambda *_: None)


def _abandon(pool: concurrent.futures.Executor, engine: str) -> None:
    """Drop the submissions not started and stop those running: their results are not recorded,
    so a rerun grades them."""
    pool.shutdown(wait=False, cancel_futures=True)
    if isinstance(pool, concurrent.futures.ProcessPoolExecutor):
        from grader.engines.isolation.treewatch import descendants

        workers = multiprocessing.active_children()  # the pool's workers
        below = [p for child in workers if child.pid for p in descendants(child.pid)[1:]]
        for child in workers:
            child.kill()
        for child in workers:
            child.join(timeout=5)
        for pid in below:  # a kernel without bubblewrap does not die with its worker
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # A kernel dies with its worker (bubblewrap's --die-with-parent), except one whose sandbox was
        # still starting: it lives in its submission's cgroup, which a dead worker leaves behind.
        from grader.engines.isolation.budget import cgroup_mode, sweep_stale

        mode = cgroup_mode()
        if mode:
            sweep_stale(mode)
    elif engine == "fork":  # worker threads wait on children of the warm servers: stopping those frees them
        from grader.engines.fork import pool as forkpool

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
        done, _ = concurrent.futures.wait(pending, timeout=TICK, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            yield pending.pop(future), future
