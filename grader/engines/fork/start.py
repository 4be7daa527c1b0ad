"""How a fork server is started: in a bubblewrap sandbox of its own, or forked from a zygote.

:class:`Server` starts :mod:`grader.engines.fork.server` in a sandbox of its own: every server
imports torch and the course itself. :class:`ZygoteServer` asks the batch's :class:`Zygote`
(:mod:`grader.engines.fork.zygote`, which imported them once) to fork one, in namespaces of its own
where the machine has a sandbox. Both give the pool (:mod:`grader.engines.fork.pool`) the same
handle: ``wait_ready``, ``spawn`` a child, ``healthy``, ``alive``, ``close``.
"""

from __future__ import annotations

import logging
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from grader.engines.execution import ExecOptions, kernel_env
from grader.engines.isolation.budget import Budget, cgroup_mode
from grader.engines.isolation.launch import Started, start_module
from grader.engines.isolation.sandbox import Sandbox, bubblewrap_works, gpu_devices, sandbox_level

log = logging.getLogger(__name__)


class StartError(RuntimeError):
    """A server or a child could not be started."""


class Stopped(StartError):
    """The grader stopped every server (Ctrl-C, the batch's end): nothing went wrong to report."""


def _start(sandbox: Sandbox, options: ExecOptions, module: str, theirs: socket.socket, workdir: str,
           log_path: str, flags: list[str]) -> subprocess.Popen:
    """Start ``python -m MODULE --fd N WORKDIR [FLAGS] [--preload A,B]`` in ``sandbox``, with a
    grading kernel's environment, its output in ``log_path``; ``theirs`` is then closed here."""
    preload = ["--preload", ",".join(sorted(set(options.preload)))] if options.preload else []
    return start_module(sandbox, kernel_env(options, workdir), module, theirs, workdir, log_path, [*flags, *preload])


#: memory cap of a fork server's own processes (with a cgroup)
SERVER_MEMORY_MB = 2048


class Server(Started):
    """A running fork server, its private folders and the control channel only we hold."""

    pidfd: int | None = None
    zygote: Zygote | None = None  # the one it was forked from

    def __init__(self, options: ExecOptions):
        self.key = server_key(options)
        self.root = tempfile.mkdtemp(prefix="course-fork-")
        self.scratch = os.path.join(self.root, "scratch")
        os.makedirs(self.scratch)
        # the server's processes (not its children: each joins its submission's budget); the
        # server holds the preloaded modules (~0.3 GB) and never learner data
        self.budget = Budget(SERVER_MEMORY_MB, pids=64) if options.isolate and cgroup_mode() else None
        sandbox = Sandbox(workdir=Path(self.scratch), runtime_dir=None, hide=[Path(p) for p in options.hide],
                          memory_mb=None, isolate=options.isolate, budget=self.budget,
                          devices=gpu_devices(options.device))
        private = options.isolate and bubblewrap_works()
        self.ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.log_path = os.path.join(self.root, "server.log")
        self.proc = _start(sandbox, options, "grader.engines.fork.server", theirs, self.scratch, self.log_path,
                           [*(["--private-tmp"] if private else []), *(["--cuda"] if options.device == "cuda" else [])])
        self.startup_timeout = options.startup_timeout
        self.ready = False
        self.lock = threading.Lock()

    def wait_ready(self) -> None:
        """Wait for its "R" (one forked from a zygote first sends "P" and a pidfd of itself)."""
        if self.ready:
            return
        deadline = time.monotonic() + self.startup_timeout
        while True:
            ready, _, _ = select.select([self.ctrl], [], [], 0.1)
            if ready:
                msg, fds, _, _ = socket.recv_fds(self.ctrl, 1, 1)
                if msg == b"P" and self.pidfd is None:
                    self.pidfd = fds[0] if fds else None  # none on Linux < 5.3
                    continue
                for fd in fds:
                    os.close(fd)
                if msg == b"R":
                    self.ready = True
                    return
                self._failed()
            if not self.alive() or time.monotonic() > deadline:
                self._failed()

    def _failed(self) -> None:
        raise StartError(f"the fork server did not start: {self.log_tail()}")

    def spawn(self, conn: socket.socket, timeout: float) -> int | None:
        """Have the server fork a child that serves ``conn`` (one end of a socketpair; the
        caller keeps the other); returns the child's pidfd (None on Linux < 5.3)."""
        self.wait_ready()
        with self.lock:
            try:
                self.ctrl.settimeout(timeout)  # on a channel closed meanwhile (the grader stopping): OSError
                socket.send_fds(self.ctrl, [b"C"], [conn.fileno()])
                msg, fds, _, _ = socket.recv_fds(self.ctrl, 1, 1)
            except OSError as exc:
                raise StartError(f"the fork server did not answer: {exc}") from exc
            if msg != b"P":
                for fd in fds:
                    os.close(fd)
                raise StartError("the fork server closed its control channel")
            return fds[0] if fds else None

    def healthy(self, timeout: float = 10.0) -> bool:
        """Whether the server answers (a submission can stop it with SIGSTOP, or wedge it): it
        answers only after cleaning up its last child, so a yes means "ready for the next"."""
        if not self.alive() or not self.ready:
            return self.alive()
        with self.lock:
            try:
                self.ctrl.settimeout(timeout)
                self.ctrl.sendall(b"?")
                return self.ctrl.recv(1) == b"!"
            except OSError:
                return False


def server_key(options: ExecOptions) -> tuple:
    """What a server is started with: children of one server differ only in timeout and memory cap."""
    return (options.device, options.isolate, tuple(sorted(options.hide)), tuple(sorted(options.extra_env.items())),
            tuple(sorted(set(options.preload))))


#: the cgroup of a zygote and the servers forked from it (not their children: each joins its
#: submission's budget): the zygote's modules (~0.3 GB) are shared by all
ZYGOTE_MEMORY_MB, ZYGOTE_PIDS = 4096, 512


class Zygote(Started):
    """A running zygote (one per batch's options), its folder of servers' folders, and the
    control channel only we hold."""

    def __init__(self, options: ExecOptions):
        self.key = server_key(options)
        self.root = tempfile.mkdtemp(prefix="course-zygote-")
        self.workdir = os.path.join(self.root, "servers")
        os.makedirs(self.workdir)
        self.nested = options.isolate and bubblewrap_works()
        self.budget = Budget(ZYGOTE_MEMORY_MB, pids=ZYGOTE_PIDS) if self.nested and cgroup_mode() else None
        sandbox = Sandbox(workdir=Path(self.workdir), runtime_dir=None, hide=[Path(p) for p in options.hide],
                          memory_mb=None, isolate=options.isolate, budget=self.budget, nest=True)
        self.ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # one message a request
        self.log_path = os.path.join(self.root, "zygote.log")
        self.proc = _start(sandbox, options, "grader.engines.fork.zygote", theirs, self.workdir, self.log_path,
                           ["--nested"] if self.nested else [])
        self.lock = threading.Lock()
        self.broken = False  # a server of it failed to start: the next ones get sandboxes of their own

    def fork_server(self, theirs: socket.socket) -> str:
        """Ask for a server serving ``theirs`` (it answers on it once the zygote is warm);
        returns the server's folder."""
        name = "s" + secrets.token_hex(6)
        scratch = os.path.join(self.workdir, name)
        os.mkdir(scratch, 0o700)
        with self.lock:
            try:
                socket.send_fds(self.ctrl, [b"S" + name.encode()], [theirs.fileno()])
            except OSError as exc:
                raise StartError(f"the fork engine's zygote is gone: {self.log_tail()}") from exc
        return scratch


def zygote_serves(options: ExecOptions) -> bool:
    """Whether servers for ``options`` are forked from a zygote: not for CUDA (a server's own
    sandbox, as before), not with ``COURSE_FORK_ZYGOTE=0`` in the environment (a sandbox per server,
    for comparison), and in a sandbox only where the servers can have namespaces of their own."""
    if options.device == "cuda" or os.environ.get("COURSE_FORK_ZYGOTE") == "0":
        return False
    return not (options.isolate and bubblewrap_works()) or sandbox_level() == "nested"


class ZygoteServer(Server):
    """A server forked from a :class:`Zygote`: the same handle as :class:`Server`."""

    def __init__(self, options: ExecOptions, zygote: Zygote):
        self.key = server_key(options)
        self.zygote, self.budget, self.pidfd = zygote, None, None
        self.ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.scratch = self.root = zygote.fork_server(theirs)
        finally:
            theirs.close()
        self.startup_timeout = options.startup_timeout
        self.ready = False
        self.lock = threading.Lock()

    def alive(self) -> bool:
        pidfd = self.pidfd
        if pidfd is None:  # not forked yet (or no pidfd on this kernel)
            return not self.closed and self.zygote.alive()
        try:
            return not select.select([pidfd], [], [], 0)[0]  # a pidfd turns readable when it exits
        except (OSError, ValueError):  # closed meanwhile by the coordinator stopping the batch
            return False

    def _failed(self) -> None:
        if self.zygote.alive() and not self.zygote.broken:  # it lives, and its server failed
            self.zygote.broken = True
            log.warning("fork engine: a server forked from the zygote did not start; the next ones start on their own")
        raise StartError(f"the fork server did not start: {self.log_tail()}")

    def log_tail(self) -> str:
        return self.zygote.log_tail()

    def close(self) -> None:
        if not self._closing():
            return
        self.ctrl.close()  # the server reads EOF and exits, its children with it
        pidfd, self.pidfd = self.pidfd, None
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:  # exited already
                pass
            os.close(pidfd)
        shutil.rmtree(self.root, ignore_errors=True)
