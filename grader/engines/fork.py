"""The ``fork`` engine: each submission runs in a child forked from a warm server, under the kernel engine's rules.

A server (:mod:`grader.engines.forkserver`) imports torch and the course once and is then reused
for submission after submission; each submission gets fresh children, one at a time, that
never saw another submission. The rules are those of :mod:`grader.engines.kernel`: the same
per-cell timeout (an interrupt, then a kill if the cell does not stop), the same memory cap,
the same sandbox (the server runs inside it, so its children do), the same tamper guard
asked before every test cell, and after a child dies or stays stuck a new one in which the
learner's earlier cells are replayed. The result is the same :class:`~grader.engines.execution.Execution`,
so :func:`grader.verdict.score` cannot tell the engines apart.
"""

from __future__ import annotations

import logging
import os
import secrets
import select
import signal
import socket
import time

from nbformat import NotebookNode

from grader import cells, integrity
from grader.engines.budget import Budget, cgroup_mode
from grader.engines.execution import PROBE_TIMEOUT, TIMEOUT_ENAME, ExecOptions, Execution, on_stop
from grader.engines.forkpool import Lease, Server, StartError, Stopped, lease, stopped
from grader.engines.sandbox import budget_mb, process_cap
from grader.engines.treewatch import TreeWatch
from grader.engines.wire import recv, send

log = logging.getLogger(__name__)

DIED, STUCK = "died", "stuck"
MESSAGE_TIMEOUT = 10  # seconds past a reply's last deadline by which the whole reply must have come
GUARD_WAIT = PROBE_TIMEOUT + 10 + 5  # the child gives its guard PROBE_TIMEOUT + 10 s, as the kernel engine does


# -- one child -------------------------------------------------------------------------------

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


#: How long a submission's end waits for its child to exit by itself before its cgroup is emptied by force
EXIT_WAIT = 0.5


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


# -- outputs from a child: untrusted, so rebuilt field by field ------------------------------

def _outputs(raw) -> list[NotebookNode]:
    out: list[NotebookNode] = []
    for o in raw if isinstance(raw, list) else []:
        kind = o.get("output_type") if isinstance(o, dict) else None
        if kind == "stream" and o.get("name") in ("stdout", "stderr"):
            out.append(NotebookNode(output_type=kind, name=o["name"], text=str(o.get("text", ""))))
        elif kind in ("execute_result", "display_data"):
            data = o.get("data") if isinstance(o.get("data"), dict) else {}
            node = NotebookNode(output_type=kind, data=NotebookNode({str(k): v for k, v in data.items()}),
                                metadata=NotebookNode(o["metadata"] if isinstance(o.get("metadata"), dict) else {}))
            if kind == "execute_result":
                count = o.get("execution_count")
                node["execution_count"] = count if isinstance(count, int) else None
            out.append(node)
        elif kind == "error":
            trace = o.get("traceback") if isinstance(o.get("traceback"), list) else []
            out.append(NotebookNode(output_type="error", ename=str(o.get("ename", "")),
                                    evalue=str(o.get("evalue", "")), traceback=[str(t) for t in trace]))
    return out


def _timeout_output(options: ExecOptions) -> NotebookNode:
    return NotebookNode(output_type="error", ename=TIMEOUT_ENAME, traceback=[],
                        evalue=f"the cell ran longer than {options.cell_timeout} s and was stopped")


# -- one submission ----------------------------------------------------------------------------

class _Runner:
    """One submission's execution across as many children as it needs (cf. execute._Runner)."""

    def __init__(self, nb: NotebookNode, options: ExecOptions, held: Lease):
        self.nb, self.options, self.lease = nb, options, held
        self.result = Execution(nb=nb)
        self.guard = integrity.new_guard_name()
        self.grace = PROBE_TIMEOUT  # after the interrupt, as long as the kernel engine's probe waits
        self.deadline = time.monotonic() + options.budget_seconds()
        # one cgroup for every child of this submission: memory of all its processes (tmpfs and
        # shm included) and their number
        self.budget = Budget(budget_mb(options.memory_mb, options.device)) if options.isolate and cgroup_mode() else None
        self.child: Child | None = None
        self.stopped = False  # given up as stalled (grader.watchdog): no child is started again

    def run(self) -> Execution:
        on_stop(self._stop)
        try:
            return self._run()
        finally:
            if self.budget is not None:
                self.budget.close()

    def _run(self) -> Execution:
        code_cells = [i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]
        done: list[int] = []  # learner/demo cells that ran, replayed in a new child
        position = sessions = 0
        while position < len(code_cells):
            if self.result.restarts > self.options.max_restarts or time.monotonic() > self.deadline or self.stopped:
                self.result.not_run_from = code_cells[position]
                break
            sessions += 1
            try:
                child = self._new_child()
            except Stopped as exc:  # the batch is stopping (Ctrl-C): not run, and nothing to log
                self.result.error = str(exc)
                break
            except StartError as exc:
                if sessions == 1:
                    log.warning("fork engine: %s", exc)
                    self.result.error = str(exc)
                    break
                self.result.restarts += 1
                continue
            self.child = child
            # without a cgroup: the memory and number of the child's processes watched instead
            watch = (TreeWatch(child.host_pid, budget_mb(self.options.memory_mb, self.options.device)).start()
                     if self.budget is None and self.options.isolate and child.host_pid else None)
            try:
                if self.stopped:
                    child.kill()
                elif self._replay(child, done):
                    position = self._run_cells(child, code_cells, position, done)
                else:
                    self.result.restarts += 1
            finally:
                self.child = None
                if watch is not None:
                    watch.stop()
                child.close(wait=EXIT_WAIT if self.budget is not None else 0.0)
                if self.budget is not None:
                    self.budget.kill_all()  # nothing of this child outlives it
        return self.result

    def _stop(self) -> None:
        """The grader gave up on this submission (grader.watchdog): its child dies, no other starts."""
        self.stopped = True
        child = self.child
        if child is not None:
            child.kill()
        if self.budget is not None:
            self.budget.kill_all()

    def _new_child(self) -> Child:
        try:
            return Child(self.lease.server, self.options, self.guard, self.budget)
        except StartError as exc:
            if stopped(self.lease.server):
                raise Stopped("the grader stopped its fork servers") from exc
            # killed, stopped (SIGSTOP) or wedged by a submission, or OOM: a new server, once
            log.warning("fork engine: the server did not give a child (%s); starting a new one", exc)
        self.lease.renew()
        return Child(self.lease.server, self.options, self.guard, self.budget)

    def _message(self, cell: NotebookNode, **extra) -> dict:
        return {"op": "run", "code": cells.source_text(cell), "history": True, **extra}

    def _replay(self, child: Child, done: list[int]) -> bool:
        for index in done:
            reply = child.request(self._message(self.nb.cells[index]), self.options.cell_timeout, self.grace)
            if reply in (DIED, STUCK):
                return False
        return True

    def _run_cells(self, child: Child, code_cells: list[int], position: int, done: list[int]) -> int:
        """Run cells from ``position`` until the end or until the child must be replaced;
        returns the position to go on from."""
        while position < len(code_cells):
            index = code_cells[position]
            left = self.deadline - time.monotonic()
            if left <= 0:  # the submission's wall-clock budget is spent: the rest is not run
                self.result.not_run_from = index
                return len(code_cells)
            position += 1
            cell = self.nb.cells[index]
            test = cells.is_test(cell)
            nonce = secrets.token_hex(4) if test else None
            timeout = max(1, min(self.options.cell_timeout, int(left + 0.999)))
            reply = child.request(self._message(cell, guard=nonce), timeout, self.grace, GUARD_WAIT)
            if reply == STUCK or (reply == DIED and child.interrupted):
                # interrupted and then stuck (or dead): stopped, like a kernel that never answers
                cell.outputs = _outputs(child.partial) + [_timeout_output(self.options)]
                self.result.timed_out.append(index)
                self.result.restarts += 1
                return position
            if reply == DIED:
                self.result.died.append(index)
                self.result.restarts += 1
                return position
            if test:
                clean, what = integrity.parse_check(reply.get("guard"), nonce)
                if not clean:  # a note for a reviewer, never a score
                    self.result.tampered[index] = what
            cell.outputs = _outputs(reply.get("outputs"))
            count = reply.get("execution_count")
            cell.execution_count = count if isinstance(count, int) else None
            if child.interrupted:
                cell.outputs.append(_timeout_output(self.options))
                self.result.timed_out.append(index)
            elif not test:
                done.append(index)
        return position


def execute(nb: NotebookNode, options: ExecOptions) -> Execution:
    """Run every code cell of ``nb`` in children of a warm server (see :func:`grader.engines.kernel.execute`).

    Errors do not stop the run. Returns what happened; the outputs are in ``nb`` itself.
    """
    try:
        with lease(options) as held:
            return _Runner(nb, options, held).run()
    except StartError as exc:
        return Execution(nb=nb, error=str(exc))
