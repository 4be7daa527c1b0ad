"""A cgroup budget per submission: the memory of all its processes together (tmpfs and shared
memory included) and their number, on cgroup v1 (``memory`` + ``pids`` controllers) or v2."""

from __future__ import annotations

import logging
import os
import re
import secrets
import signal
import threading
import time
from functools import lru_cache

log = logging.getLogger(__name__)

#: Processes and threads one submission may have at once (with a cgroup).
PIDS_MAX = 256


class Budget:
    """A cgroup for one submission: memory (RAM, tmpfs and shm pages together) and process count.

    ``cgroup_mode()`` says whether this machine allows one. Processes join it through
    :mod:`grader.engines.confine` (``--cgroup``) or :meth:`add`; :meth:`close` kills whatever is left
    in it and removes it.
    """

    def __init__(self, memory_mb: int | None, pids: int | None = PIDS_MAX):
        self.mode = cgroup_mode()
        self.dirs: list[str] = []
        name = f"course-{os.getpid()}-{secrets.token_hex(4)}"
        if self.mode == "v1":
            roots = _v1_roots()
            mem, pid = os.path.join(roots["memory"], name), os.path.join(roots["pids"], name)
            os.mkdir(mem)
            self.dirs.append(mem)
            os.mkdir(pid)
            self.dirs.append(pid)
            if memory_mb:
                limit = str(memory_mb * 2**20)
                _write(os.path.join(mem, "memory.limit_in_bytes"), limit)
                if os.path.exists(os.path.join(mem, "memory.memsw.limit_in_bytes")):
                    _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), limit)
            if pids:
                _write(os.path.join(pid, "pids.max"), str(pids))
        elif self.mode == "v2":
            path = os.path.join(_v2_root(), name)
            os.mkdir(path)
            self.dirs.append(path)
            if memory_mb:
                _write(os.path.join(path, "memory.max"), str(memory_mb * 2**20))
                _write(os.path.join(path, "memory.swap.max"), "0", missing_ok=True)
            if pids:
                _write(os.path.join(path, "pids.max"), str(pids))

    def procs_files(self) -> list[str]:
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def add(self, pid: int) -> None:
        """Move a process (its future children follow) into the budget."""
        for procs in self.procs_files():
            _write(procs, str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs_files():
            try:
                with open(procs) as f:
                    found.update(int(p) for p in f.read().split())
            except OSError:
                pass
        return found

    def kill_all(self, wait: float = 5.0) -> None:
        """SIGKILL every process in the budget until none is left (or ``wait`` seconds pass)."""
        deadline = time.monotonic() + wait
        pause = 0.001  # a child that was told to stop is usually gone within a few ms
        while True:
            left = self.pids()
            if not left or time.monotonic() > deadline:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(pause)
            pause = min(0.01, pause * 2)

    def oom_kills(self) -> int:
        """How many times the memory cap was hit (v1: failcnt; v2: oom_kill events)."""
        for d in self.dirs:
            for name, key in (("memory.failcnt", None), ("memory.events", "oom_kill")):
                path = os.path.join(d, name)
                if os.path.exists(path):
                    text = open(path).read()
                    if key is None:
                        return int(text.strip() or 0)
                    for line in text.splitlines():
                        if line.startswith(key + " "):
                            return int(line.split()[1])
        return 0

    def close(self, wait: float = 5.0) -> None:
        self.kill_all(wait)
        for d in self.dirs:
            for attempt in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:  # a process still exiting
                    if attempt == 99:
                        log.warning("cgroup %s not removed (%s); the next grader sweeps it", d, exc)
                    time.sleep(0.02)
        self.dirs = []


def _write(path: str, value: str, missing_ok: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except FileNotFoundError:
        if not missing_ok:
            raise


def _own_cgroups() -> dict[str, str]:
    """controller name ("" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else [""]:
                    out[c] = path
    except OSError:
        pass
    return out


def _v1_roots() -> dict[str, str]:
    own = _own_cgroups()
    roots = {}
    for controller in ("memory", "pids"):
        mount = f"/sys/fs/cgroup/{controller}"
        nested = os.path.join(mount, own.get(controller, "/").lstrip("/"))
        roots[controller] = nested if os.path.isdir(nested) else mount
    return roots


def _v2_root() -> str:
    own = _own_cgroups().get("", "/")
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(mount, "cgroup.controllers")):
            return os.path.join(mount, own.lstrip("/"))
    raise OSError("no cgroup2 hierarchy")


def _budget_roots(mode: str) -> list[str]:
    return list(_v1_roots().values()) if mode == "v1" else [_v2_root()]


def sweep_stale(mode: str) -> int:
    """Remove the budgets a dead grader left behind (killed before :meth:`Budget.close`).

    Anything still running in one is killed first: no process of a submission outlives its
    grader. Returns how many were removed.
    """
    removed = 0
    for root in _budget_roots(mode):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            match = re.fullmatch(r"course-(?:probe-)?(\d+)(?:-[0-9a-f]{8})?", name)
            if not match or _alive(int(match.group(1))):
                continue
            stale = Budget.__new__(Budget)
            stale.mode, stale.dirs = mode, [os.path.join(root, name)]
            stale.close(wait=1.0)
            removed += not os.path.exists(os.path.join(root, name))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


_ASSUMED_NOTHING = "?"
_assumed_mode: str | None = _ASSUMED_NOTHING


def assume_mode(mode: str | None) -> None:
    """Take ``mode`` for what :func:`cgroup_mode` would find, without probing or sweeping (a worker
    process of the coordinator's pool: the coordinator did both)."""
    global _assumed_mode
    _assumed_mode = mode
    cgroup_mode.cache_clear()


@lru_cache(maxsize=1)
def cgroup_mode() -> str | None:
    """"v1", "v2" or None: whether a cgroup with memory and pids caps can be made here.

    The first call also sweeps away budgets left by graders that were killed.
    """
    if _assumed_mode != _ASSUMED_NOTHING:
        return _assumed_mode
    mode = _cgroup_mode()
    if mode:
        try:
            swept = sweep_stale(mode)
            if swept:
                log.info("removed %d cgroup(s) left by graders that were killed", swept)
        except OSError as exc:
            log.warning("could not sweep stale cgroups: %s", exc)
    return mode


def _cgroup_mode() -> str | None:
    try:  # v1, as these machines mount it: memory and pids hierarchies, writable
        roots = _v1_roots()
        if all(os.access(r, os.W_OK) for r in roots.values()):
            probe = os.path.join(roots["pids"], f"course-probe-{os.getpid()}")
            os.mkdir(probe)
            ok = os.path.exists(os.path.join(probe, "pids.max"))
            os.rmdir(probe)
            if ok and os.path.exists(os.path.join(roots["memory"], "memory.limit_in_bytes")):
                return "v1"
    except OSError:
        pass
    try:  # v2 with the memory and pids controllers delegated to our subtree
        root = _v2_root()
        with open(os.path.join(root, "cgroup.subtree_control")) as f:
            enabled = f.read().split()
        if {"memory", "pids"} <= set(enabled) and os.access(root, os.W_OK):
            return "v2"
    except OSError:
        pass
    return None


# -- without a cgroup: a submission's processes watched from outside ---------------------------

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
    deadline = time.monotonic() + wait
    while True:
        left = descendants(root)
        alive = [p for p in left if _state(p) not in ("Z", "X", "")]
        if not alive or time.monotonic() > deadline:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


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
