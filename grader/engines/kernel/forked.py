"""Kernels forked from a warm process (:mod:`grader.engines.kernel.warm`): the coordinator's side.

One warm process per batch's options imports and warms what every kernel imports, once; each of a
submission's kernels is forked from it, in namespaces of its own inside the nested sandbox where
the machine has one, its folder the submission's home, and joins the submission's budget before
it runs anything. jupyter_client drives it as any kernel: :class:`ForkedProvisioner` stands in for
the local one, its process a pidfd of the forked kernel.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import select
import signal
import socket
import tempfile
import threading
import uuid
from pathlib import Path

from jupyter_client.provisioning.local_provisioner import LocalProvisioner

from grader.engines.execution import ExecOptions, kernel_env
from grader.engines.isolation.budget import Budget, cgroup_mode
from grader.engines.isolation.launch import Started, start_module
from grader.engines.isolation.sandbox import Sandbox, bubblewrap_works, process_cap, sandbox_level

#: the warm process's own budget (its kernels each join their submission's)
WARM_MEMORY_MB, WARM_PIDS = 4096, 512


def forks_kernels(options: ExecOptions) -> bool:
    """Whether kernels for ``options`` are forked: not for CUDA (a kernel's own sandbox, as
    before), not with ``COURSE_KERNEL_FORK=0``, and in a sandbox only where kernels can have
    namespaces of their own."""
    if options.device == "cuda" or os.environ.get("COURSE_KERNEL_FORK") == "0":
        return False
    return not (options.isolate and bubblewrap_works()) or sandbox_level() == "nested"


def _key(options: ExecOptions) -> tuple:
    return (options.device, options.isolate, tuple(sorted(options.hide)), tuple(sorted(options.extra_env.items())))


class ForkFailed(RuntimeError):
    """The warm process forked no kernel (it is gone, or its kernel could not start)."""


class WarmProcess(Started):
    """A running warm process, its folder of kernels' folders, and the control channel only we hold."""

    broken = False  # a kernel could not be forked: the batch's next kernels start fresh

    def __init__(self, options: ExecOptions):
        self.key = _key(options)
        self.root = tempfile.mkdtemp(prefix="course-kernels-")
        self.workdir = os.path.join(self.root, "kernels")
        os.makedirs(self.workdir)
        self.nested = options.isolate and bubblewrap_works()
        self.budget = Budget(WARM_MEMORY_MB, pids=WARM_PIDS) if self.nested and cgroup_mode() else None
        sandbox = Sandbox(workdir=Path(self.workdir), hide=[Path(p) for p in options.hide], memory_mb=None,
                          isolate=options.isolate, budget=self.budget, nest=True)
        self.ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log_path = os.path.join(self.root, "warm.log")
        self.proc = start_module(sandbox, kernel_env(options, self.workdir), "grader.engines.kernel.warm", theirs,
                                 self.workdir, self.log_path, ["--nested"] if self.nested else [])
        self.lock = threading.Lock()

    def new_folder(self) -> str:
        """A folder for one submission's kernels (its home, their connection files)."""
        folder = os.path.join(self.workdir, "h" + secrets.token_hex(6))
        os.mkdir(folder, 0o700)
        return folder

    def fork_kernel(self, request: dict, timeout: float) -> tuple[int, socket.socket]:
        """Have a kernel forked for ``request``: its pidfd, and the channel on which it waits for a
        ``G`` before it makes its namespaces (the caller moves it into a budget first)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.lock:
                socket.send_fds(self.ctrl, [b"K" + json.dumps(request).encode()], [theirs.fileno()])
            theirs.close()
            ours.settimeout(timeout)
            msg, fds, _, _ = socket.recv_fds(ours, 1, 1)
            if msg != b"P" or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                raise ForkFailed(f"the kernels' warm process forked no kernel: {self.log_tail()}")
            return fds[0], ours
        except OSError as exc:
            ours.close()
            raise ForkFailed(f"the kernels' warm process did not answer: {exc}; {self.log_tail()}") from exc


_lock = threading.Lock()
_warm: dict[tuple, WarmProcess] = {}


def warm_process(options: ExecOptions) -> WarmProcess | None:
    """The warm process for ``options`` (started now if there is none, or it died; others are
    closed), or None once one could not fork a kernel: the batch's kernels then start fresh."""
    key = _key(options)
    with _lock:
        if key in _warm and _warm[key].broken:
            return None
    with _lock:
        stale = [w for k, w in _warm.items() if k != key or not w.alive()]
        for w in stale:
            del _warm[w.key]
        if key not in _warm:
            _warm[key] = WarmProcess(options)
        found = _warm[key]
    for w in stale:
        w.close()
    return found


@atexit.register
def shutdown() -> None:
    with _lock:
        warm = list(_warm.values())
        _warm.clear()
    for w in warm:
        w.close()


def _host_pid(pidfd: int) -> int | None:
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class PidfdProcess:
    """What jupyter_client asks of a kernel's process, for one it did not start: a pidfd's."""

    stdin = stdout = stderr = None

    def __init__(self, pidfd: int, pid: int | None):
        self.pidfd, self.pid = pidfd, pid

    def poll(self) -> int | None:
        if self.pidfd < 0:
            return 0
        try:
            return 0 if select.select([self.pidfd], [], [], 0)[0] else None  # readable once it exited
        except (OSError, ValueError):
            return 0

    def wait(self, timeout: float | None = None) -> int:
        if self.pidfd >= 0:
            select.select([self.pidfd], [], [], timeout)
        return 0

    def send_signal(self, signum: int) -> None:
        if self.pidfd >= 0:
            try:
                signal.pidfd_send_signal(self.pidfd, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def close(self) -> None:
        pidfd, self.pidfd = self.pidfd, -1
        if pidfd >= 0:
            os.close(pidfd)


class ForkedProvisioner(LocalProvisioner):
    """A kernel forked from the batch's warm process instead of started from a command."""

    warm: WarmProcess
    options: ExecOptions
    budget: Budget | None = None
    forked: PidfdProcess | None = None

    @classmethod
    def for_manager(cls, km, warm: WarmProcess, options: ExecOptions, budget: Budget | None) -> ForkedProvisioner:
        km.kernel_id = km.kernel_id or str(uuid.uuid4())
        made = cls(kernel_id=km.kernel_id, kernel_spec=km.kernel_spec, parent=km)
        made.warm, made.options, made.budget = warm, options, budget
        return made

    async def launch_kernel(self, cmd: list[str], **kwargs):
        memory_mb, data_only = process_cap(self.options.memory_mb, self.options.device)
        request = {"folder": os.path.dirname(self.parent.connection_file),
                   "connection_file": self.parent.connection_file, "env": dict(kwargs.get("env") or {}),
                   "memory_mb": memory_mb, "data_only": data_only}
        pidfd, channel = self.warm.fork_kernel(request, timeout=self.options.startup_timeout)
        try:
            pid = _host_pid(pidfd)
            self.process = self.forked = PidfdProcess(pidfd, pid)
            if self.budget is not None and pid is not None:
                self.budget.add(pid)  # before it runs anything: all it starts is counted
            channel.sendall(b"G")
        finally:
            channel.close()
        self.pid, self.pgid = pid, None
        self.cwd = kwargs.get("cwd")
        return self.connection_info

    async def cleanup(self, restart: bool = False) -> None:
        if self.forked is not None:
            self.forked.close()
        await super().cleanup(restart)
