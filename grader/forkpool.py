"""Warm fork servers: started once per worker, each lent to one submission at a time.

A server (:mod:`grader.forkserver`) is started with a grading kernel's environment and inside
the same sandbox, and kept for the next submission. Servers are started from one long-lived
thread (a server dies with the thread that started it), stopped when the process exits, and
replaced when one dies (a submission can kill its server; the OOM killer can too).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.execute import ExecOptions, kernel_env
from grader.sandbox import Sandbox, bubblewrap_works


class StartError(RuntimeError):
    """A server or a child could not be started."""


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


class Server:
    """A running fork server and its private folders."""

    def __init__(self, options: ExecOptions):
        self.key = server_key(options)
        self.root = tempfile.mkdtemp(prefix="course-fork-")
        self.scratch = os.path.join(self.root, "scratch")
        runtime = os.path.join(self.root, "runtime")
        os.makedirs(self.scratch)
        os.makedirs(runtime)
        self.socket_path = os.path.join(runtime, "server.sock")
        sandbox = Sandbox(workdir=Path(self.scratch), runtime_dir=Path(runtime),
                          hide=[Path(p) for p in options.hide], memory_mb=None, isolate=options.isolate)
        private = options.isolate and bubblewrap_works()
        cmd = sandbox.wrap([sys.executable, "-m", "grader.forkserver", self.socket_path, self.scratch,
                            *(["--private-tmp"] if private else [])])
        self.log_path = os.path.join(self.root, "server.log")
        with open(self.log_path, "wb") as log_file:
            self.proc = _launcher().popen(cmd, env=kernel_env(options, self.scratch), cwd=self.scratch,
                                          stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        self.startup_timeout = options.startup_timeout

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while not os.path.exists(self.socket_path):
            if not self.alive() or time.monotonic() > deadline:
                raise StartError(f"the fork server did not start: {self._log_tail()}")
            time.sleep(0.02)

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-800:].strip() or f"exit status {self.proc.poll()}"
        except OSError:
            return "no log"

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


def server_key(options: ExecOptions) -> tuple:
    """What a server is started with: children of one server differ only in timeout and memory cap."""
    return (options.device, options.isolate, tuple(sorted(options.hide)), tuple(sorted(options.extra_env.items())))


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
        if not self.server.alive():
            _discard(self.server)
            return
        with _lock:
            _idle.setdefault(self.key, []).append(self.server)


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
