"""The fork engine's first process: what a server imports, imported once, and fork servers made from it, each in namespaces of its own.

Started by :mod:`grader.engines.fork.pool` as ``python -m grader.engines.fork.zygote --fd N WORKDIR
[--nested] [--preload A,B]`` with a grading kernel's environment. Without ``--nested`` (no
sandbox on this machine) a server is a plain fork of it. With ``--nested`` it runs in one
bubblewrap sandbox (:func:`grader.engines.isolation.sandbox.bwrap_args` with ``nest=True``) that gives it
three capabilities in the sandbox's own user namespace (never on the host) and the host's
``/proc`` read-only at :data:`grader.engines.isolation.mounts.HOST_PROC`: the kernel lets a process mount a new ``/proc`` only
where a wholly visible one exists. Its first act is a mount namespace of its own in which a
read-only tmpfs covers that folder, so nothing after that sees the host's processes (it has
imported nothing of its own yet). Then it imports and warms what a server needs
(:func:`grader.engines.fork.server.warm`) and waits.

Each server asked for (one end of a socketpair only the coordinator holds the other end of, and
the name of its folder) is forked, sends the coordinator a pidfd of itself, and, nested:

- makes its own pid, mount, IPC, UTS and network namespaces, and forks the server proper: pid 1
  there, so that whatever it starts dies with it;
- mounts a fresh read-only ``/proc`` (its own processes only), private ``/tmp``, ``/dev/shm``
  and ``/dev/mqueue``, hides every other server's folder, brings up its loopback;
- drops every capability, the bounding set's included, and checks that none is left (both
  steps: :func:`grader.engines.isolation.namespaces.isolate`);
- serves as any fork server does (:func:`grader.engines.fork.server.serve_children`).

So the servers of a batch share one import of torch, and nothing else: each has what a server
in a bubblewrap sandbox of its own has, with a read-only ``/proc``, and with its own mounts held
by the capabilities it no longer has rather than also locked by a user namespace of their own
(docs/isolation.md). The zygote never runs learner code and holds no server's
channel once it has forked it.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile

from grader.engines.isolation.namespaces import SERVER_NS, cover_host_proc, isolate, reap, unshare


def _fork_server(ctrl: socket.socket, fd: int, scratch: str, nested: bool, shell) -> None:
    """Fork a server that serves the coordinator on ``fd`` (returns in the zygote only)."""
    if os.fork():
        os.close(fd)
        return
    try:
        from grader.engines.fork import server as forkserver

        ctrl.close()  # a server holds its own channel and nothing else of the zygote's
        forkserver.become_server()  # dies with the zygote; a subreaper (which a fork does not inherit)
        conn = socket.socket(fileno=fd)
        try:  # the coordinator's handle to tell whether we live, and to kill us
            me = [os.pidfd_open(os.getpid())]
        except (OSError, AttributeError):
            me = []
        socket.send_fds(conn, [b"P"], me)
        for pidfd in me:
            os.close(pidfd)
        if nested:
            unshare(SERVER_NS)
            inner = os.fork()  # pid 1 of the new pid namespace
            if inner:
                conn.close()
                _, status = os.waitpid(inner, 0)
                os._exit(os.waitstatus_to_exitcode(status) & 0x7F)
            forkserver.become_server()  # dies with the process above, reaps its orphans
            isolate(scratch)
            forkserver.not_dumpable()  # again, now that the credentials changed
        os.chdir(scratch)
        os.environ.update(HOME=scratch, TMPDIR=scratch)
        tempfile.tempdir = None
        forkserver.serve_children(conn, scratch, nested, shell)
    except BaseException as exc:  # noqa: BLE001 - the server must not live on half made
        print(f"zygote: a server could not start: {exc}", file=sys.stderr, flush=True)
    os._exit(70)


def run(ctrl_fd: int, workdir: str, nested: bool, preload: tuple[str, ...] = ()) -> None:
    """Cover the host's /proc, import and warm once, then fork a server per request."""
    if nested:
        cover_host_proc()  # first of all
    from grader.engines.fork import server as forkserver

    forkserver.become_server()
    shell = forkserver.warm(preload)
    ctrl = socket.socket(fileno=ctrl_fd)
    ctrl.setblocking(True)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctrl, 256, 1)
        except OSError:
            os._exit(0)
        if not msg:  # the coordinator is gone: every server dies with us
            os._exit(0)
        reap()
        name = msg[1:].decode("ascii", "replace")
        if msg[:1] != b"S" or len(fds) != 1 or not name.isalnum():
            for fd in fds:
                os.close(fd)
            continue
        _fork_server(ctrl, fds[0], os.path.join(workdir, name), nested, shell)


def main(argv: list[str] | None = None) -> None:
    """``python -m grader.engines.fork.zygote --fd N WORKDIR [--nested] [--preload A,B]``."""
    from grader.engines.fork.server import take_preload

    args = list(sys.argv[1:] if argv is None else argv)
    args, preload = take_preload(args)
    nested = "--nested" in args
    args = [a for a in args if a != "--nested"]
    if len(args) != 3 or args[0] != "--fd" or not args[1].isdigit():
        raise SystemExit("usage: python -m grader.engines.fork.zygote --fd N WORKDIR [--nested] [--preload A,B]")
    run(int(args[1]), args[2], nested, preload)


if __name__ == "__main__":
    main()
