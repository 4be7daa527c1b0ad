"""Long-lived sandboxed processes (a fork server, a zygote): started from one thread that outlives
them all, and closed once, by whoever closes them first.

A process that bubblewrap starts dies with the *thread* that started it (``PR_SET_PDEATHSIG``,
``--die-with-parent``), so no short-lived worker thread may start one: :func:`launcher` starts
them all from a thread of its own. :class:`Started` is the handle on one: whether it lives, the
end of its log, and a close that ends it (its control channel closed, then killed if it stays)
and removes its folder and budget.
"""

from __future__ import annotations

import concurrent.futures
import queue
import shutil
import socket
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

from grader.engines.isolation.budget import Budget

if TYPE_CHECKING:
    from grader.engines.isolation.sandbox import Sandbox


class Launcher:
    """Starts every long-lived sandboxed process from one long-lived thread: such a process (and
    bubblewrap) dies with the thread that started it (PR_SET_PDEATHSIG), so no worker thread may
    start one."""

    def __init__(self) -> None:
        self.requests: queue.Queue = queue.Queue()
        threading.Thread(target=self._loop, name="sandbox-launcher", daemon=True).start()

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


_launcher_lock = threading.Lock()
_the_launcher: Launcher | None = None


def launcher() -> Launcher:
    global _the_launcher
    with _launcher_lock:
        if _the_launcher is None:
            _the_launcher = Launcher()
        return _the_launcher


def start_module(sandbox: Sandbox, env: dict, module: str, theirs: socket.socket, workdir: str, log_path: str,
                 args: list[str]) -> subprocess.Popen:
    """Start ``python -m MODULE --fd N WORKDIR ARGS`` in ``sandbox`` from the launcher, with ``env``,
    in ``workdir``, its output in ``log_path``; ``theirs`` (its end of the control channel, fd N)
    is then closed here."""
    cmd = sandbox.wrap([sys.executable, "-m", module, "--fd", str(theirs.fileno()), workdir, *args])
    try:
        with open(log_path, "wb") as log_file:
            return launcher().popen(cmd, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log_file,
                                    stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(theirs.fileno(),))
    finally:
        theirs.close()


#: one closer per started process (see :meth:`Started._closing`)
_close_lock = threading.Lock()


class Started:
    """A process we started in a sandbox (a fork server, a zygote): its folder, its log, its
    budget and the control channel only we hold; it exits when we close the channel."""

    proc: subprocess.Popen
    ctrl: socket.socket
    root: str
    log_path: str
    budget: Budget | None
    closed = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-800:].strip() or f"exit status {self.proc.poll()}"
        except OSError:
            return "no log"

    def _closing(self) -> bool:
        """True for the first caller only: a worker releasing its lease and the coordinator
        stopping the batch (Ctrl-C) may both close one process, and a descriptor closed twice
        can close one that another thread opened meanwhile."""
        with _close_lock:
            first = not self.closed
            self.closed = True
        return first

    def close(self) -> None:
        if not self._closing():
            return
        self.ctrl.close()  # it reads EOF and exits (a zygote's servers die with it)
        if self.alive():
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.budget is not None:
            self.budget.close()
        shutil.rmtree(self.root, ignore_errors=True)
