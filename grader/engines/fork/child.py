"""One fork-engine child as the coordinator holds it: started from a warm server, asked to run a
cell, interrupted, killed, let go.

:mod:`grader.engines.fork.engine` runs a submission with as many of these as it needs.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time

from grader.engines.execution import ExecOptions
from grader.engines.fork.pool import Server, StartError
from grader.engines.fork.wire import recv, send
from grader.engines.isolation.budget import Budget
from grader.engines.isolation.sandbox import process_cap
from grader.prepare import integrity

DIED, STUCK = "died", "stuck"
MESSAGE_TIMEOUT = 10  # seconds past a reply's last deadline by which the whole reply must have come


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
        self.partial: list | None = None
        self.interrupted = False
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
        # sent before any submission code ran, so it can be trusted; used only without a pidfd
        # (and then only outside a pid namespace, where it is the host's pid)
        self.pid = host_pid or (hello.get("pid") if isinstance(hello.get("pid"), int) else None)

    def request(self, message: dict, timeout: float, grace: float, guard_time: float = 0.0) -> dict | str:
        """Run a cell: the child's reply, :data:`DIED` (it is gone) or :data:`STUCK` (killed).

        As the kernel engine does, a cell still running after ``timeout`` seconds is
        interrupted (SIGINT: ``KeyboardInterrupt`` in the cell; :attr:`interrupted` is set),
        and a child that has not answered ``grace`` seconds later is killed. A test cell's
        clock starts once the guard answered (it may take ``guard_time``). Whatever the child
        does -- dribble a message byte by byte, send endless partial outputs -- the reply must be
        whole by one absolute deadline (all of these plus :data:`MESSAGE_TIMEOUT`), or the child
        is killed.
        """
        self.partial, self.interrupted = None, False
        guarded = message.get("guard") is not None
        start = time.monotonic()
        hard = start + (guard_time if guarded else 0.0) + timeout + grace + MESSAGE_TIMEOUT
        deadline = start + (guard_time if guarded else timeout)
        try:
            self.sock.settimeout(max(0.1, hard - time.monotonic()))
            send(self.sock, message)
            while True:
                if time.monotonic() > hard:
                    self.kill()
                    return STUCK
                if not self._readable(min(deadline, hard) - time.monotonic()):
                    if guarded or self.interrupted or time.monotonic() > hard:
                        self.kill()
                        return STUCK
                    self.interrupt()
                    self.interrupted, deadline = True, time.monotonic() + grace
                    continue
                reply = recv(self.sock, hard)  # a message has begun: it must come whole, in time
                if reply is None:
                    return DIED
                if "started" in reply:  # the guard answered: the cell's own clock starts
                    guarded, deadline = False, time.monotonic() + timeout
                elif "partial" in reply:
                    self.partial = reply["partial"]  # interrupted: what the cell showed so far
                else:
                    return reply
        except TimeoutError:  # dribbled past the deadline: as a cell that never answers
            self.kill()
            return STUCK
        except (OSError, ValueError, UnicodeDecodeError):  # a child that sends garbage is as good as dead
            self.kill()
            return DIED

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
