"""Executing one submission in fresh, confined Jupyter kernels (the reference ``kernel`` engine).

A cell that runs past its timeout is interrupted; a kernel that dies, or stays stuck after
the interrupt, is replaced by a new one in which the learner's earlier cells are replayed,
so the rest of the notebook still runs. Before each test cell the grader's guard is asked
whether the learner replaced anything the tests rely on.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time

from nbformat import NotebookNode
from nbformat.v4 import new_code_cell

from grader import cells
from grader.engines.execution import (
    PROBE_TIMEOUT,
    TIMEOUT_ENAME,
    ExecOptions,
    Execution,
    kernel_env,
    on_stop,
)
from grader.engines.isolation.budget import Budget, cgroup_mode
from grader.engines.isolation.sandbox import budget_mb
from grader.engines.isolation.treewatch import TreeWatch, kill_tree
from grader.engines.kernel import forked
from grader.engines.kernel.client import CAP_STREAMS, client_class, new_kernel_manager
from grader.prepare import integrity

log = logging.getLogger(__name__)

#: seconds past a submission's wall-clock budget after which its kernels are killed, whatever
#: the client is waiting for
WATCHDOG_MARGIN = 30


def _result_text(cell: NotebookNode) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "execute_result":
            return out.get("data", {}).get("text/plain")
    return None


class _Runner:
    """One submission's execution across as many kernels as it needs."""

    def __init__(self, nb: NotebookNode, options: ExecOptions, work: str):
        self.nb, self.options, self.work = nb, options, work
        # kernels forked from the batch's warm process where they can be (grader.engines.kernel.forked),
        # their home one of its folders; else each started in a sandbox of its own
        self.warm = forked.warm_process(options) if forked.forks_kernels(options) else None
        self.home_made = self.warm is not None
        if self.warm is not None:
            self.home = self.runtime = self.warm.new_folder()
        else:
            self.home = os.path.join(work, "home")
            self.runtime = os.path.join(work, "runtime")
            os.makedirs(self.home)
            os.makedirs(self.runtime)
        self.result = Execution(nb=nb)
        self.guard = integrity.new_guard_name()
        self.deadline = time.monotonic() + options.budget_seconds()
        # one cgroup for every kernel of this submission: memory of all its processes, tmpfs and
        # shm included, and their number
        self.budget = Budget(budget_mb(options.memory_mb, options.device)) if options.isolate and cgroup_mode() else None
        self.watch: TreeWatch | None = None  # without a cgroup: the kernel's processes watched instead
        self.stopped = False  # given up as stalled (grader.execute.watchdog): no kernel is started again
        self.client = _new_client(nb, options, self.home)

    def _run_aside(self, source: str, timeout: int | None = None) -> NotebookNode:
        """Run code that is not part of the notebook (guard, probes, replays).

        It is stored in the kernel's history like any cell: IPython names cells by their
        execution count, and code run without history after a learner's syntax error
        would be compiled under the broken cell's name.
        """
        cell = new_code_cell(source)
        saved = self.client.timeout
        if timeout is not None:
            self.client.timeout = timeout
        # nbclient stores the executed cell at its index: give it a slot of its own
        self.nb.cells.append(cell)
        try:
            self.client.execute_cell(cell, len(self.nb.cells) - 1)
        finally:
            self.client.timeout = saved
            self.nb.cells.pop()
        return cell

    def run(self) -> Execution:
        watchdog = self._start_watchdog()
        on_stop(self._stop)
        try:
            return self._run()
        finally:
            watchdog.cancel()
            if self.budget is not None:
                self.budget.close()  # whatever a kernel left behind dies with the submission
            if self.home_made:
                shutil.rmtree(self.home, ignore_errors=True)

    def _start_watchdog(self) -> threading.Timer:
        """Past the submission's budget, a cell timeout and a margin, :meth:`_overdue` kills its kernels."""
        watchdog = threading.Timer(self.options.budget_seconds() + self.options.cell_timeout + WATCHDOG_MARGIN,
                                   self._overdue)
        watchdog.daemon = True
        watchdog.start()
        return watchdog

    def _overdue(self) -> None:
        """The watchdog: the submission is far past its budget, so whatever the client waits
        for will not come; its kernels die (the client then sees a dead kernel and stops)."""
        log.warning("a submission ran %.0f s past its wall-clock budget: its kernels are killed",
                    self.options.cell_timeout + WATCHDOG_MARGIN)
        self._kill_kernels()

    def _stop(self) -> None:
        """The grader gave up on this submission (grader.execute.watchdog): its kernel dies, no other starts."""
        self.stopped = True
        self._kill_kernels()

    def _kernel_pid(self) -> int | None:
        km = getattr(self.client, "km", None)
        process = getattr(getattr(km, "provisioner", None), "process", None)
        return getattr(process, "pid", None)

    def _kill_kernels(self) -> None:
        if self.budget is not None:
            self.budget.kill_all()
            return
        pid = self._kernel_pid()
        if pid is not None:
            kill_tree(pid)  # the sandbox (bubblewrap) and all in it; without one, what the kernel started

    def _run(self) -> Execution:
        code_cells = [i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]
        done: list[int] = []  # learner/demo cells that ran, replayed after a restart
        position = 0
        sessions = 0
        while position < len(code_cells):
            if self.result.restarts > self.options.max_restarts or time.monotonic() > self.deadline or self.stopped:
                self.result.not_run_from = code_cells[position]
                break
            sessions += 1
            position, go_on = self._one_kernel(code_cells, position, done, first=sessions == 1)
            if not go_on:
                break
        return self.result

    def _one_kernel(self, code_cells: list[int], position: int, done: list[int], first: bool) -> tuple[int, bool]:
        """One kernel: started, made ready (:meth:`_ready`), then cells run from ``position`` until the
        end or until it must be replaced. Returns (the position to go on from, whether to go on: not
        when the batch's first kernel cannot even start)."""
        from nbclient.exceptions import DeadKernelError

        self.client.km = new_kernel_manager(self.options, self.home, self.runtime, self.budget, self.warm)
        started = False
        try:
            # the kernel's own stdout and stderr are not the grader's: what learner code writes
            # to file descriptors 1 and 2 (os.write, a subprocess) is captured into the cell by
            # ipykernel and echoed there too, and would reach the instructor's terminal or a CI
            # log (escape sequences, forged lines, workflow commands, gigabytes) unbounded
            with self.client.setup_kernel(env=kernel_env(self.options, self.home), cwd=self.home,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
                started = True
                self._ready(done)
                position = self._run_cells(code_cells, position, done)
        except DeadKernelError:
            # died outside a notebook cell (guard install, replay, probe): try again
            self.result.restarts += 1
        except forked.ForkFailed as exc:  # this and the batch's next kernels start fresh, in the same home
            log.warning("kernel engine: no kernel could be forked (%s); kernels start fresh", exc)
            self.warm.broken, self.warm = True, None
        except Exception as exc:
            if not started and first:
                log.warning("kernel failed to start: %s", exc)
                self.result.error = f"{type(exc).__name__}: {exc}"
                return position, False
            log.warning("kernel failed: %s", exc)
            self.result.restarts += 1
        finally:
            self._end_kernel()
        return position, True

    def _ready(self, done: list[int]) -> None:
        """A fresh kernel made ready for the next cell: watched, the guard and the stream caps put in,
        the learner's cells that ran before replayed."""
        self._watch_kernel()
        self._run_aside(integrity.install_code(self.guard, warm_up=self.warm is None), timeout=60)  # warm: done
        self._run_aside(CAP_STREAMS, timeout=60)
        for index in done:
            self._run_aside(cells.source_text(self.nb.cells[index]))

    def _end_kernel(self) -> None:
        """Nothing of a kernel outlives it: its watch stops, its processes die."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self.budget is not None:
            self.budget.kill_all()

    def _watch_kernel(self) -> None:
        """Without a cgroup: the memory and number of this kernel's processes (its sandbox's), summed
        and counted every half second, and all of them killed past the submission's budget
        (:class:`grader.engines.isolation.treewatch.TreeWatch`); the client then sees a dead kernel."""
        pid = self._kernel_pid()
        if self.budget is None and self.options.isolate and pid is not None:
            self.watch = TreeWatch(pid, budget_mb(self.options.memory_mb, self.options.device)).start()

    def _run_cells(self, code_cells: list[int], position: int, done: list[int]) -> int:
        """Run cells from ``position`` until the end or until the kernel must be replaced;
        returns the position to go on from."""
        while position < len(code_cells):
            index = code_cells[position]
            left = self.deadline - time.monotonic()
            if left <= 0 or self.stopped:  # the submission's wall-clock budget is spent: the rest is not run
                self.result.not_run_from = index
                return len(code_cells)
            position += 1
            cell = self.nb.cells[index]
            if cells.is_test(cell):
                self._guard_ok(index)  # what it finds is a note for a reviewer, never a score
            ran = self._run_cell(cell, index, left)
            if ran is None:
                return position
            if ran and not cells.is_test(cell):
                done.append(index)
        return position

    def _run_cell(self, cell: NotebookNode, index: int, left: float) -> bool | None:
        """Run one notebook cell within ``left`` seconds. Returns whether it ran to its end (not
        stopped at its timeout), or None when its kernel must be replaced (it died, or stays stuck
        after the timeout's interrupt)."""
        from nbclient.exceptions import DeadKernelError

        self.client.timeout = max(1, min(self.options.cell_timeout, int(left + 0.999)))
        try:
            self.client.execute_cell(cell, index)
        except DeadKernelError:
            self.result.died.append(index)
            self.result.restarts += 1
            return None
        finally:
            self.client.timeout = self.options.cell_timeout
        if not self.client.timed_out:
            return True
        self.result.timed_out.append(index)
        if not self._responsive():
            self.result.restarts += 1
            return None
        return False

    def _guard_ok(self, index: int) -> bool:
        """Ask the guard whether anything the tests rely on was replaced."""
        nonce = secrets.token_hex(4)
        try:
            probe = self._run_aside(integrity.check_code(self.guard, nonce), timeout=PROBE_TIMEOUT + 10)
        except Exception as exc:  # a dead kernel is handled by the test cell itself
            log.info("guard check failed: %s", exc)
            return True
        clean, what = integrity.parse_check(_result_text(probe), nonce)
        if not clean:
            self.result.tampered[index] = what
        return clean

    def _responsive(self) -> bool:
        """After an interrupted cell: does the kernel answer again?"""
        try:
            self._run_aside("None", timeout=PROBE_TIMEOUT)
        except Exception:
            return False
        return not self.client.timed_out


def _new_client(nb: NotebookNode, options: ExecOptions, home: str):
    """The nbclient client that runs ``nb``'s cells: it interrupts a cell past its timeout and marks
    it, keeps going after errors, and kills a kernel at the end rather than wait for it."""
    return client_class()(
        nb,
        timeout=options.cell_timeout,
        startup_timeout=options.startup_timeout,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={
            "ename": TIMEOUT_ENAME,
            "evalue": f"the cell ran longer than {options.cell_timeout} s and was stopped",
            "traceback": [],
        },
        record_timing=False,
        # every output has arrived when the last cell is done: kill the kernel instead of
        # waiting 0.4-3.5 s for a polite shutdown
        shutdown_kernel="immediate",
        resources={"metadata": {"path": home}},
    )


def execute(nb: NotebookNode, options: ExecOptions) -> Execution:
    """Run every code cell of ``nb`` in confined kernels, in a new empty working directory.

    Errors do not stop the run. Returns what happened; the outputs are in ``nb`` itself.
    """
    with tempfile.TemporaryDirectory(prefix="course-grade-") as work:
        return _Runner(nb, options, work).run()
