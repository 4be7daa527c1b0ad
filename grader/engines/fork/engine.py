"""The ``fork`` engine: each submission runs in a child forked from a warm server, under the kernel engine's rules.

A server (:mod:`grader.engines.fork.server`) imports torch and the course once and is then reused
for submission after submission; each submission gets fresh children, one at a time, that
never saw another submission. The rules are those of :mod:`grader.engines.kernel.engine`: the same
per-cell timeout (an interrupt, then a kill if the cell does not stop), the same memory cap,
the same sandbox (the server runs inside it, so its children do), the same tamper guard
asked before every test cell, and after a child dies or stays stuck a new one in which the
learner's earlier cells are replayed. The result is the same :class:`~grader.engines.execution.Execution`,
so :func:`grader.verdict.judge.score` cannot tell the engines apart.
"""

from __future__ import annotations

import logging
import secrets
import time

from nbformat import NotebookNode

from grader import cells
from grader.engines.execution import PROBE_TIMEOUT, TIMEOUT_ENAME, ExecOptions, Execution, on_stop
from grader.engines.fork.child import STUCK, Child
from grader.engines.fork.pool import Lease, StartError, Stopped, lease, stopped
from grader.engines.isolation.budget import Budget, cgroup_mode
from grader.engines.isolation.sandbox import budget_mb
from grader.engines.isolation.treewatch import TreeWatch
from grader.prepare import integrity

log = logging.getLogger(__name__)

GUARD_WAIT = PROBE_TIMEOUT + 10 + 5  # the child gives its guard PROBE_TIMEOUT + 10 s, as the kernel engine does


#: How long a submission's end waits for its child to exit by itself before its cgroup is emptied by force
EXIT_WAIT = 0.5


# -- outputs from a child: untrusted, so rebuilt field by field ------------------------------

def _outputs(raw) -> list[NotebookNode]:
    """A cell's outputs as ipykernel sends them, rebuilt from what the child sent: only the known
    kinds and fields, each of its type (a display's ``data`` and ``metadata`` are plain dicts, as
    everything inside them is)."""
    out: list[NotebookNode] = []
    for o in raw if isinstance(raw, list) else ():
        kind = o.get("output_type") if isinstance(o, dict) else None
        if kind == "display_data" or kind == "execute_result":
            data, meta = o.get("data"), o.get("metadata")
            node = NotebookNode({"output_type": kind,
                                 "data": {str(k): v for k, v in data.items()} if isinstance(data, dict) else {},
                                 "metadata": dict(meta) if isinstance(meta, dict) else {}})
            if kind == "execute_result":
                count = o.get("execution_count")
                node["execution_count"] = count if isinstance(count, int) else None
            out.append(node)
        elif kind == "stream" and o.get("name") in ("stdout", "stderr"):
            out.append(NotebookNode({"output_type": kind, "name": o["name"], "text": str(o.get("text", ""))}))
        elif kind == "error":
            trace = o.get("traceback") if isinstance(o.get("traceback"), list) else []
            out.append(NotebookNode({"output_type": "error", "ename": str(o.get("ename", "")),
                                     "evalue": str(o.get("evalue", "")), "traceback": [str(t) for t in trace]}))
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
        self.stopped = False  # given up as stalled (grader.execute.watchdog): no child is started again

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
                else:
                    position = self._run_cells(child, code_cells, position, done)
            finally:
                self.child = None
                if watch is not None:
                    watch.stop()
                child.close(wait=EXIT_WAIT if self.budget is not None else 0.0)
                if self.budget is not None:
                    self.budget.kill_all()  # nothing of this child outlives it
        return self.result

    def _stop(self) -> None:
        """The grader gave up on this submission (grader.execute.watchdog): its child dies, no other starts."""
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

    def _message(self, cell: NotebookNode, guard: str | None = None) -> dict:
        message = {"code": cells.source_text(cell), "history": True}
        if guard is not None:
            message["guard"] = guard
        return message

    def _run_cells(self, child: Child, code_cells: list[int], position: int, done: list[int]) -> int:
        """Replay ``done`` in ``child``, then run the cells from ``position`` on, all in one run,
        until the end or until the child must be replaced; returns the position to go on from."""
        if self.deadline - time.monotonic() <= 0:  # the submission's wall-clock budget is spent
            self.result.not_run_from = code_cells[position]
            return len(code_cells)
        todo = code_cells[position:]
        nonces = {i: secrets.token_hex(4) for i in todo if cells.is_test(self.nb.cells[i])}
        run = child.run([self._message(self.nb.cells[i]) for i in done]
                        + [self._message(self.nb.cells[i], nonces.get(i)) for i in todo],
                        self.options.cell_timeout, self.grace, GUARD_WAIT, self.deadline)
        replayed = len(done)
        if len(run.results) < replayed:  # the replay failed: another child, as after a death
            self.result.restarts += 1
            return position
        for at, reply in enumerate(run.results[replayed:], start=replayed):
            index = todo[at - replayed]
            cell = self.nb.cells[index]
            if index in nonces:
                clean, what = integrity.parse_check(reply.get("guard"), nonces[index])
                if not clean:  # a note for a reviewer, never a score
                    self.result.tampered[index] = what
            cell.outputs = _outputs(reply.get("outputs"))
            count = reply.get("execution_count")
            cell.execution_count = count if isinstance(count, int) else None
            if at in run.interrupted:
                cell.outputs.append(_timeout_output(self.options))
                self.result.timed_out.append(index)
            elif index not in nonces:
                done.append(index)
        position += len(run.results) - replayed
        if position >= len(code_cells):
            return position
        index = code_cells[position]
        if run.out_of_time:
            self.result.not_run_from = index
            return len(code_cells)
        if run.end == STUCK or len(run.results) in run.interrupted:
            # interrupted and then stuck (or dead): stopped, like a kernel that never answers
            self.nb.cells[index].outputs = _outputs(run.partial) + [_timeout_output(self.options)]
            self.result.timed_out.append(index)
        else:
            self.result.died.append(index)
        self.result.restarts += 1
        return position + 1


def execute(nb: NotebookNode, options: ExecOptions) -> Execution:
    """Run every code cell of ``nb`` in children of a warm server (see :func:`grader.engines.kernel.engine.execute`).

    Errors do not stop the run. Returns what happened; the outputs are in ``nb`` itself.
    """
    try:
        with lease(options) as held:
            return _Runner(nb, options, held).run()
    except StartError as exc:
        return Execution(nb=nb, error=str(exc))
