"""Without a cgroup: a submission's processes watched from outside, and the process tree killed.

The tree is read from ``/proc``: :func:`descendants`, :func:`kill_tree`, the memory and threads of
each process, and :class:`TreeWatch`, which kills the whole tree once it is past its caps."""

from __future__ import annotations

import logging
import os
import threading

from grader.engines.isolation.budget import PIDS_MAX, kill_until_gone

log = logging.getLogger(__name__)

#: how often a :class:`TreeWatch` looks (seconds)
WATCH_INTERVAL = 0.5


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (every thread's), or [] when it is gone."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.extend(int(p) for p in f.read().split())
        except (OSError, ValueError):
            pass
    return found


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from each one's ``stat`` (where ``task/*/children`` is missing)."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(name))
    return tree


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, parents before children ([] when ``root`` is gone).

    A process whose parent exited is reparented (to the sandbox's init under bubblewrap's pid
    namespace, which is itself below ``root``; without it, to the host's init or a subreaper,
    out of this tree)."""
    if not os.path.exists(f"/proc/{root}"):
        return []
    by_parent = None if os.path.exists(f"/proc/{root}/task/{root}/children") else _children_by_parent()
    out, todo, seen = [], [root], {root}
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        for child in (by_parent.get(pid, []) if by_parent is not None else _children(pid)):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return out


def kill_tree(root: int, wait: float = 2.0) -> None:
    """SIGKILL ``root`` and its descendants until none is left (or ``wait`` seconds pass)."""
    kill_until_gone(lambda: [p for p in descendants(root) if _state(p) not in ("Z", "X", "")], wait)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def process_memory(pid: int) -> int:
    """Bytes of memory ``pid`` holds that a cgroup would charge to it and no other process shares
    for free: its proportional share of anonymous and shared-memory pages (``Pss_Anon`` +
    ``Pss_Shmem`` + ``SwapPss``: pages a fork shares are divided among the processes that share
    them); library and other file pages are left out. Where ``smaps_rollup`` cannot be read
    (kernel < 4.14, or a process of another user that is not dumpable): ``RssAnon`` +
    ``RssShmem``. 0 when it is gone."""
    fields = _kb_fields(f"/proc/{pid}/smaps_rollup")
    if "Pss_Anon" in fields:
        return sum(fields.get(k, 0) for k in ("Pss_Anon", "Pss_Shmem", "SwapPss")) * 1024
    fields = _kb_fields(f"/proc/{pid}/status")
    return sum(fields.get(k, 0) for k in ("RssAnon", "RssShmem", "VmSwap")) * 1024


def _kb_fields(path: str) -> dict[str, int]:
    """``Name:   123 kB`` lines of a /proc file ({} when it cannot be read)."""
    out: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, rest = line.partition(":")
                words = rest.split()
                if len(words) == 2 and words[1] == "kB" and words[0].isdigit():
                    out[key] = int(words[0])
    except OSError:
        pass
    return out


def task_count(pid: int) -> int:
    """How many threads ``pid`` has (a cgroup's ``pids.max`` counts threads too); 0 when gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


class TreeWatch:
    """Where no cgroup can be had: the memory and the number of one submission's processes, watched
    from outside every :data:`WATCH_INTERVAL` seconds, and the whole tree killed once either is past
    its cap -- the cgroup's budget, as well as the machine allows.

    ``root`` is the process its sandbox started from (bubblewrap: every process of the sandbox is
    below it, a process whose parent died included). What it does not give that a cgroup does: a
    burst between two looks can go past the caps for up to an interval (a fork bomb's processes,
    memory written faster than the watch reads it), pages in the sandbox's ``/tmp`` that no process
    maps are not counted (that tmpfs has its own size cap), and without bubblewrap a process that
    leaves the tree (a double fork reparents it to the host's init) leaves the watch too.
    """

    def __init__(self, root: int, memory_mb: int | None, tasks: int | None = PIDS_MAX,
                 interval: float = WATCH_INTERVAL, on_kill=None):
        self.root, self.interval, self.on_kill = root, interval, on_kill
        self.memory = memory_mb * 2**20 if memory_mb else None
        self.tasks = tasks
        self.killed: str | None = None  # why, once it killed the tree
        self.peak_memory = 0
        self.peak_tasks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"treewatch-{root}", daemon=True)

    def start(self) -> TreeWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def check(self) -> str | None:
        """Look once: why the tree must die (None while it is within its caps)."""
        pids = descendants(self.root)
        if not pids:
            return None
        tasks = sum(task_count(p) for p in pids)
        self.peak_tasks = max(self.peak_tasks, tasks)
        if self.tasks and tasks > self.tasks:
            return f"{tasks} processes and threads, over the cap of {self.tasks}"
        if self.memory:
            used = sum(process_memory(p) for p in pids)
            self.peak_memory = max(self.peak_memory, used)
            if used > self.memory:
                return (f"{used // 2**20} MiB of memory in {len(pids)} processes together, over the "
                        f"budget of {self.memory // 2**20} MiB")
        return None

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                why = self.check()
            except OSError:
                continue
            if why:
                self.killed = why
                log.warning("a submission's processes were killed: %s", why)
                kill_tree(self.root)
                if self.on_kill is not None:
                    self.on_kill(why)
                return
