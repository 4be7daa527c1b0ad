"""Warm fork servers: started once per worker, each lent to one submission at a time.

A server (:mod:`grader.engines.forkserver`) is started with a grading kernel's environment and inside
the same sandbox, and kept for the next submission. Servers are started from one long-lived
thread (a server dies with the thread that started it), stopped when the process exits, and
replaced when one dies (a submission can kill its server; the OOM killer can too).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import queue
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.engines.budget import Budget, cgroup_mode
from grader.engines.execution import ExecOptions, kernel_env
from grader.engines.sandbox import Sandbox, bubblewrap_works, gpu_devices


class StartError(RuntimeError):
    """A server or a child could not be started."""


class Stopped(StartError):
    """The grader stopped every server (Ctrl-C, the batch's end): nothing went wrong to report."""


class _Launcher:
    """Starts every server from one long-lived thread: a server (and bubblewrap) dies with
    the thread that started it (PR_SET_PDEATHSIG), so no worker thread may start one."""

    def __init__(self) -> None:
        self.requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="forkserver-launcher", daemon=True).start()

    def _loop(self) -> None:
        while True:
            args, kwargs, future = self.requests.get()
            try:
                future.set_result(subprocess.Popen(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

    def popen(self, *args, **kwargs) -> subprocess.Popen:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.requests.put((args, kwargs, future))
        return future.result()


#: memory cap of a fork server's own processes (with a cgroup)
SERVER_MEMORY_MB = 2048


class Server:
    """A running fork server, its private folders and the control channel only we hold."""

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
        cmd = sandbox.wrap([sys.executable, "-m", "grader.engines.forkserver", "--fd", str(theirs.fileno()), self.scratch,
                            *(["--private-tmp"] if private else []),
                            *(["--cuda"] if options.device == "cuda" else []),
                            *(["--preload", ",".join(sorted(set(options.preload)))] if options.preload else [])])
        self.log_path = os.path.join(self.root, "server.log")
        try:
            with open(self.log_path, "wb") as log_file:
                self.proc = _launcher().popen(cmd, env=kernel_env(options, self.scratch), cwd=self.scratch,
                                              stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                              start_new_session=True, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        self.startup_timeout = options.startup_timeout
        self.ready = False
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self) -> None:
        if self.ready:
            return
        deadline = time.monotonic() + self.startup_timeout
        while True:
            ready, _, _ = select.select([self.ctrl], [], [], 0.1)
            if ready:
                if self.ctrl.recv(1) == b"R":
                    self.ready = True
                    return
                raise StartError(f"the fork server did not start: {self._log_tail()}")
            if not self.alive() or time.monotonic() > deadline:
                raise StartError(f"the fork server did not start: {self._log_tail()}")

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

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-800:].strip() or f"exit status {self.proc.poll()}"
        except OSError:
            return "no log"

    def close(self) -> None:
        self.ctrl.close()  # the server reads EOF and exits
        if self.alive():
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.budget is not None:
            self.budget.close()
        shutil.rmtree(self.root, ignore_errors=True)


def server_key(options: ExecOptions) -> tuple:
    """What a server is started with: children of one server differ only in timeout and memory cap."""
    return (options.device, options.isolate, tuple(sorted(options.hide)), tuple(sorted(options.extra_env.items())),
            tuple(sorted(set(options.preload))))


_lock = threading.Lock()
_idle: dict[tuple, list[Server]] = {}
_servers: list[Server] = []
_the_launcher: _Launcher | None = None


def _launcher() -> _Launcher:
    global _the_launcher
    with _lock:
        if _the_launcher is None:
            _the_launcher = _Launcher()
        return _the_launcher


def _evict_others(key: tuple) -> None:
    """Stop idle servers started for other options (another batch's folders): a long-lived
    process, such as a Dask worker, keeps only the servers it can use."""
    with _lock:
        stale = [s for k, pool in _idle.items() if k != key for s in pool]
        for k in [k for k in _idle if k != key]:
            del _idle[k]
        for server in stale:
            _servers.remove(server)
    for server in stale:
        server.close()


def _new_server(options: ExecOptions) -> Server:
    _evict_others(server_key(options))
    server = Server(options)
    with _lock:
        _servers.append(server)
    return server


def prestart(options: ExecOptions, count: int) -> None:
    """Start ``count`` servers now, so that they import torch while the coordinator prepares."""
    key = server_key(options)
    with _lock:
        missing = count - len([s for s in _idle.get(key, []) if s.alive()])
    for _ in range(max(0, missing)):
        server = _new_server(options)
        with _lock:
            _idle.setdefault(key, []).append(server)


class Lease:
    """The server one submission uses, alone; replaced if it dies mid-way (a submission can kill it)."""

    def __init__(self, options: ExecOptions):
        self.options, self.key = options, server_key(options)
        with _lock:
            pool = _idle.setdefault(self.key, [])
            found = [s for s in pool if s.alive()]
            dead = [s for s in pool if not s.alive()]
            pool.clear()
            pool.extend(found[:-1])
            for server in dead:
                _servers.remove(server)
        for server in dead:
            server.close()
        self.server = found[-1] if found else _new_server(options)

    def renew(self) -> None:
        _discard(self.server)
        self.server = _new_server(self.options)

    def release(self) -> None:
        if not self.server.healthy():  # dead, stopped or wedged by the last submission: not lent again
            _discard(self.server)
            return
        with _lock:
            _idle.setdefault(self.key, []).append(self.server)


def stopped(server: Server) -> bool:
    """Whether :func:`shutdown` stopped ``server`` (a leased server leaves the list no other way
    while leased: its holder discards it only after this question)."""
    with _lock:
        return server not in _servers


def _discard(server: Server) -> None:
    with _lock:
        if server in _servers:
            _servers.remove(server)
    server.close()


@contextmanager
def lease(options: ExecOptions) -> Iterator[Lease]:
    """A server for these options, used by no one else meanwhile (its children run one at a time)."""
    held = Lease(options)
    try:
        yield held
    finally:
        held.release()


@atexit.register
def shutdown() -> None:
    """Stop every server (each takes its children with it)."""
    with _lock:
        servers = list(_servers)
        _servers.clear()
        _idle.clear()
    for server in servers:
        server.close()
