"""The kernel engine's warm process: what every kernel imports, imported and warmed once per batch,
and a kernel forked from it for each request, in namespaces of its own where the machine has the
nested sandbox.

Started by :mod:`grader.engines.kernel.forked` as ``python -m grader.engines.kernel.warm --fd N
WORKDIR [--nested]`` with a grading kernel's environment, in the nested sandbox
(:func:`grader.engines.isolation.sandbox.bwrap_args` with ``nest=True``) where there is one. It
covers the host's ``/proc`` first (:func:`grader.engines.isolation.namespaces.cover_host_proc`),
imports :data:`grader.prepare.integrity.PRELOAD` and ipykernel, fixes the hidden tests' inputs and
runs the warm-up, and makes no shell: each kernel's is ipykernel's own, made after the fork.

A request (one message on the control channel only the coordinator holds) names a kernel's folder
under WORKDIR, its connection file there, its environment and its per-process limits, with one end
of a socketpair. The kernel forked for it sends a pidfd of itself on that socketpair, then, nested,
makes its pid, mount, IPC, UTS and network namespaces, forks pid 1 of them, which isolates itself
in its folder with no capability left (:func:`grader.engines.isolation.namespaces.isolate`) and
forks the kernel (pid 2: pid 1 would ignore the signals a learner sends the kernel from inside),
which sets its limits, is made not dumpable, and starts an ``IPKernelApp`` on the connection file,
its own stdout and stderr on ``/dev/null``. The warm process never runs learner code.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys

from grader.engines.isolation.confine import not_dumpable, set_limits
from grader.engines.isolation.namespaces import SERVER_NS, cover_host_proc, isolate, reap, unshare

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_libc = ctypes.CDLL(None, use_errno=True)


def _stay_with_parent() -> None:
    """Die with the process that started this one; adopt what children abandon."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    not_dumpable()


def warm() -> None:
    """Import what every kernel imports and warm it, as a fresh kernel's guard does."""
    import importlib

    from grader.prepare import integrity

    for name in integrity.PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a kernel would meet the same and go on
            pass
    exec(integrity.FIXED_INPUTS, {})  # noqa: S102 - the grader's own code
    exec(integrity.WARM_UP, {})  # noqa: S102
    import ipykernel.kernelapp  # noqa: F401


def _init(kernel: int) -> None:
    """Pid 1 of a kernel's namespaces: reap what is orphaned there, and exit as the kernel exits
    (every other process of the namespace dies with it)."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == kernel:
            os._exit(os.waitstatus_to_exitcode(status) & 0x7F)


def _kernel(request: dict, conn: socket.socket, nested: bool) -> None:
    """In the forked process: become the kernel ``request`` asks for (never returns)."""
    try:
        try:
            me = [os.pidfd_open(os.getpid())]
        except (OSError, AttributeError):
            me = []
        socket.send_fds(conn, [b"P"], me)
        go = conn.recv(1)  # the coordinator moved us into the submission's budget
        conn.close()
        if go != b"G":
            os._exit(0)
        folder = request["folder"]
        if nested:
            unshare(SERVER_NS)
            inner = os.fork()  # pid 1 of the new pid namespace
            if inner:
                _, status = os.waitpid(inner, 0)
                os._exit(os.waitstatus_to_exitcode(status) & 0x7F)
            _stay_with_parent()
            isolate(folder)
            kernel = os.fork()  # not pid 1: a kernel that signals itself (os.kill(os.getpid(), 9)) dies, as in a sandbox
            if kernel:
                _init(kernel)
            _stay_with_parent()
        os.chdir(folder)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        os.environ["JPY_PARENT_PID"] = "1"  # no parent poller (see grader.engines.isolation.confine)
        set_limits(request.get("memory_mb"), data_only=bool(request.get("data_only")))
        not_dumpable()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        import ipykernel_launcher
        from ipykernel.kernelapp import IPKernelApp

        sys.argv = [ipykernel_launcher.__file__, "-f", request["connection_file"]]  # as a launched kernel's
        IPKernelApp.launch_instance(argv=sys.argv[1:])
    except BaseException as exc:  # noqa: BLE001 - the kernel must not live on half made
        print(f"kernel warm process: a kernel could not start: {exc}", file=sys.stderr, flush=True)
    os._exit(70)


def run(ctrl_fd: int, workdir: str, nested: bool) -> None:
    if nested:
        cover_host_proc()  # first of all
    _stay_with_parent()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    warm()
    ctrl = socket.socket(fileno=ctrl_fd)
    ctrl.setblocking(True)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctrl, 1 << 16, 1)
        except OSError:
            os._exit(0)
        if not msg:  # the coordinator is gone: every kernel dies with us
            os._exit(0)
        reap()
        try:
            request = json.loads(msg[1:]) if msg[:1] == b"K" else None
            folder = os.path.realpath(str(request["folder"]))
            ok = os.path.dirname(folder) == os.path.realpath(workdir) and isinstance(request["env"], dict)
        except (ValueError, TypeError, KeyError):
            ok = False
        if not ok or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            continue
        request["folder"] = folder
        if os.fork() == 0:
            ctrl.close()
            _kernel(request, socket.socket(fileno=fds[0]), nested)
        os.close(fds[0])


def main(argv: list[str] | None = None) -> None:
    """``python -m grader.engines.kernel.warm --fd N WORKDIR [--nested]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    nested = "--nested" in args
    args = [a for a in args if a != "--nested"]
    if len(args) != 3 or args[0] != "--fd" or not args[1].isdigit():
        raise SystemExit("usage: python -m grader.engines.kernel.warm --fd N WORKDIR [--nested]")
    run(int(args[1]), args[2], nested)


if __name__ == "__main__":
    main()
