"""One fork-engine child as the coordinator holds it: started from a warm server, asked to run a
cell, interrupted, killed, let go.

:mod:`grader.engines.fork.engine` runs a submission with as many of these as it needs.
"""

from __future__ import annotations

import math
import os
import select
import signal
import socket
import stat
import time
from dataclasses import dataclass, field

from grader.engines.execution import ExecOptions
from grader.engines.fork.ledger import CELL, GUARD, Reader, since
from grader.engines.fork.pool import Server, StartError
from grader.engines.fork.wire import recv, send
from grader.engines.isolation.budget import Budget
from grader.engines.isolation.sandbox import process_cap
from grader.prepare import integrity

DONE, DIED, STUCK = "done", "died", "stuck"
MESSAGE_TIMEOUT = 10  # seconds past a run's last deadline by which its whole message must have come


@dataclass
class Run:
    """How a run of cells went (cells by their place in the run).

    ``results``: the replies of the first cells, in order; the cell after them (if any) is where
    the run stopped: the child ``end``-ed it :data:`DIED` (gone, or killed for garbage) or
    :data:`STUCK` (killed past its time); ``partial`` is what that cell showed before an
    interrupt. ``interrupted``: the cells we interrupted (and when); ``out_of_time``: the run
    stopped because the submission's time was spent.
    """

    results: list[dict] = field(default_factory=list)
    partial: list | None = None
    interrupted: dict[int, float] = field(default_factory=dict)
    end: str = DONE
    out_of_time: bool = False


class Child:
    """A forked child serving one submission (until it dies or the submission is done).

    It talks to us over one end of a socketpair made for it alone (no path, nothing another
    child could connect to), and is moved into its submission's cgroup (``budget``) before any
    learner code runs.
    """

    def __init__(self, server: Server, options: ExecOptions, guard: str, budget: Budget | None = None):
        self.pidfd: int | None = None
        self.pid: int | None = None
        self.host_pid: int | None = None  # its pid here, from its pidfd (None on Linux < 5.3)
        self.ledger: Reader | None = None
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.pidfd = server.spawn(theirs, min(20, options.startup_timeout))
        except StartError:
            self.close()
            raise
        finally:
            theirs.close()
        try:
            host_pid = self.host_pid = _pidfd_pid(self.pidfd) if self.pidfd is not None else None
            if budget is not None and host_pid:
                budget.add(host_pid)  # before learner code runs: everything it starts is counted
            self.sock.settimeout(options.startup_timeout)
            memory_mb, data_only = process_cap(options.memory_mb, options.device)
            send(self.sock, {"memory_mb": memory_mb, "data_only": data_only, "guard": guard, "install": integrity.install_code(guard, warm_up=False)})
            hello = recv(self.sock, time.monotonic() + options.startup_timeout)
        except (OSError, ValueError) as exc:
            self.close()
            raise StartError(f"no child from the fork server: {exc}") from exc
        if not hello or not hello.get("ready"):
            self.close()
            raise StartError("the child died while starting (the grader's guard could not be installed)")
        try:  # its ledger, sent before any submission code ran
            _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        except OSError as exc:
            self.close()
            raise StartError(f"no ledger from the child: {exc}") from exc
        if len(fds) != 1 or not stat.S_ISREG(os.fstat(fds[0]).st_mode):
            for fd in fds:
                os.close(fd)
            self.close()
            raise StartError("the child sent no ledger")
        self.ledger = Reader(fds[0])
        # sent before any submission code ran, so it can be trusted; used only without a pidfd
        # (and then only outside a pid namespace, where it is the host's pid)
        self.pid = host_pid or (hello.get("pid") if isinstance(hello.get("pid"), int) else None)

    def run(self, run: list[dict], timeout: float, grace: float, guard_time: float, budget_end: float) -> Run:
        """Run a run of cells (``{"code", "history", "guard"}`` each) in one request: see :class:`Run`.

        The clocks are ours, per cell, as the kernel engine's: a cell still running ``timeout``
        seconds after it began (less when the submission's budget, ``budget_end``, is nearer) is
        interrupted (SIGINT: ``KeyboardInterrupt`` in that cell alone), and a child that has not
        moved on ``grace`` seconds later is killed; a test cell's clock starts once the tamper
        guard answered, which may take ``guard_time``. We wake only when a cell's time is up or
        the child ends the run: then the ledger says where it is (a child that lies about it
        gains at most one cell's time per cell of its run, as a forged reply could). The run's one
        message must come whole within :data:`MESSAGE_TIMEOUT` of the last deadline, however it
        is dribbled, or the child is killed; a child that sends anything but its end is killed.
        """
        result = Run()
        try:
            self.ledger.start()
            self.sock.settimeout(max(0.1, timeout + grace + MESSAGE_TIMEOUT))
            send(self.sock, {"op": "run", "cells": run})
        except (OSError, ValueError):
            self.kill()
            return self._read(result, DIED, len(run))
        index, phase = 0, GUARD if run and run[0].get("guard") is not None else CELL
        began = time.monotonic()
        while True:
            if phase == GUARD:
                limit = began + guard_time
            elif index in result.interrupted:
                limit = result.interrupted[index] + grace
            else:
                limit = began + max(1, min(timeout, math.ceil(budget_end - began)))
            if self._readable(limit - time.monotonic()):
                return self._read(result, self._end(limit + grace + MESSAGE_TIMEOUT), len(run))
            now, seen = time.monotonic(), self.ledger.progress()
            if seen is not None and (seen[0], seen[1]) > (index, phase) and seen[0] < len(run):
                index, phase, began = seen[0], seen[1], since(seen[2], began, now)
                if began >= budget_end:  # began once the submission's time was spent: not run
                    self.kill()
                    result.out_of_time = True
                    return self._read(result, DIED, len(run))
                continue
            if phase == GUARD or index in result.interrupted:
                self.kill()
                return self._read(result, STUCK, len(run))
            self.ledger.stop(index)
            self.interrupt()
            result.interrupted[index] = now

    def _end(self, deadline: float) -> str:
        """The run's end, once the child has spoken (or closed): :data:`DONE`, :data:`DIED` or :data:`STUCK`."""
        try:
            message = recv(self.sock, deadline)  # a message has begun: it must come whole, in time
        except TimeoutError:  # dribbled past the deadline: as a cell that never answers
            self.kill()
            return STUCK
        except (OSError, ValueError, UnicodeDecodeError):  # a child that sends garbage is as good as dead
            self.kill()
            return DIED
        if message is None:
            return DIED
        if "done" not in message:
            self.kill()
            return DIED
        return DONE

    def _read(self, result: Run, end: str, cells: int) -> Run:
        result.results, result.partial = self.ledger.records(cells)
        if end == DONE and len(result.results) < cells:  # said done, but results are missing
            self.kill()
            end = DIED
        result.end = end
        return result

    def _readable(self, seconds: float) -> bool:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, seconds))
        return bool(ready)

    def interrupt(self) -> None:
        self._signal(signal.SIGINT)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signum)
            elif self.pid:
                os.kill(self.pid, signum)
        except OSError:
            pass

    def close(self, wait: float = 0.0) -> None:
        """Let the child go; ``wait``: up to that many seconds for it to exit (its pidfd says when,
        sooner than polling its cgroup does)."""
        self.sock.close()  # the child reads EOF and exits; the server cleans up after it
        if self.ledger is not None:
            os.close(self.ledger.fd)
            self.ledger = None
        if self.pidfd is not None:
            if wait > 0:
                try:
                    select.select([self.pidfd], [], [], wait)
                except (OSError, ValueError):
                    pass
            os.close(self.pidfd)
            self.pidfd = None


def _pidfd_pid(pidfd: int) -> int | None:
    """The pid, in our pid namespace, of the process a pidfd refers to."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        pass
    return None
