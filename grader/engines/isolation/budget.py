"""A cgroup budget per submission: the memory of all its processes together (tmpfs and shared
memory included) and their number, on cgroup v1 (``memory`` + ``pids`` controllers) or v2."""

from __future__ import annotations

import logging
import os
import re
import secrets
import signal
import time
from collections.abc import Callable, Iterable
from functools import lru_cache

log = logging.getLogger(__name__)

#: Processes and threads one submission may have at once (with a cgroup).
PIDS_MAX = 256


def kill_until_gone(alive: Callable[[], Iterable[int]], wait: float, pause: float = 0.01) -> None:
    """SIGKILL every pid ``alive()`` gives, again and again, until it gives none (or ``wait``
    seconds pass): a process can fork between a listing and the signal. Between rounds it
    sleeps ``pause``, doubled each round up to 10 ms."""
    deadline = time.monotonic() + wait
    while True:
        left = list(alive())
        if not left or time.monotonic() > deadline:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(pause)
        pause = max(pause, min(0.01, pause * 2))


class Budget:
    """A cgroup for one submission: memory (RAM, tmpfs and shm pages together) and process count.

    ``cgroup_mode()`` says whether this machine allows one. Processes join it through
    :mod:`grader.engines.isolation.confine` (``--cgroup``) or :meth:`add`; :meth:`close` kills whatever is left
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
        kill_until_gone(self.pids, wait, pause=0.001)  # a child told to stop is usually gone within a few ms

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
