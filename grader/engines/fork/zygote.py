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
- drops every capability, the bounding set's included, and checks that none is left;
- serves as any fork server does (:func:`grader.engines.fork.server.serve_children`).

So the servers of a batch share one import of torch, and nothing else: each has what a server
in a bubblewrap sandbox of its own has, with a read-only ``/proc``, and with its own mounts held
by the capabilities it no longer has rather than also locked by a user namespace of their own
(docs/isolation.md). The zygote never runs learner code and holds no server's
channel once it has forked it.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys
import tempfile

#: What covers :data:`grader.engines.isolation.mounts.HOST_PROC`, where the nested sandbox binds the host's
#: /proc (covered at once, see the module docstring).
COVER = "/run"

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
_SERVER_NS = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, _PR_SET_NO_NEW_PRIVS = 24, 47, 4, 38
_CAPS_V3 = 0x20080522
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    """A server could not be given its own namespaces (it must then not serve)."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def _enc(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_enc(source), _enc(target), _enc(fstype), ctypes.c_ulong(flags), _enc(data)), f"mount {target}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def cover_host_proc() -> None:
    """A mount namespace of our own, in which nothing of :data:`grader.engines.isolation.mounts.HOST_PROC` can be seen."""
    _unshare(CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", COVER, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")


def isolate(scratch: str) -> None:
    """In pid 1 of a server's new namespaces: its own /proc, /tmp, /dev/shm, /dev/mqueue and
    folder, loopback up, no capability left."""
    from grader.engines.isolation.mounts import SHM_MB, TMP_MB, needed_in_private_dirs

    quiet = MS_NOSUID | MS_NODEV
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("proc", "/proc", "proc", MS_RDONLY | quiet | MS_NOEXEC)
    # hold our own folder aside while everything around it is replaced
    _mount("tmpfs", COVER, "tmpfs", quiet | MS_NOEXEC, "size=16k,mode=0700")
    held = os.path.join(COVER, "scratch")
    os.mkdir(held, 0o700)
    _mount(scratch, held, None, MS_BIND | MS_REC)
    # what execution needs and lives under /tmp or /dev/shm (a venv, a checkout, a conda env
    # there): held aside too, and put back read-only over the new, empty folders
    kept = [(path, os.path.join(COVER, f"needed{i}")) for i, path in enumerate(needed_in_private_dirs())]
    for path, aside in kept:
        os.mkdir(aside, 0o700)
        _mount(path, aside, None, MS_BIND | MS_REC)
    _mount("tmpfs", "/tmp", "tmpfs", quiet, f"size={TMP_MB}m,mode=1777")
    _mount("tmpfs", "/dev/shm", "tmpfs", quiet | MS_NOEXEC, f"size={SHM_MB}m,mode=1777")
    _mount("mqueue", "/dev/mqueue", "mqueue", quiet | MS_NOEXEC)
    for path, aside in kept:
        os.makedirs(path, 0o755, exist_ok=True)
        _mount(aside, path, None, MS_MOVE)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | quiet)
    parent = os.path.dirname(scratch)
    covered = os.path.isdir(parent)  # still there: not under the new /tmp, so cover it
    if covered:
        _mount("tmpfs", parent, "tmpfs", quiet, "size=16k,mode=0755")
    os.makedirs(scratch, 0o700)
    _mount(held, scratch, None, MS_MOVE)
    if covered:
        _mount(None, parent, None, MS_REMOUNT | MS_RDONLY | quiet)
    _check(_libc.umount2(COVER.encode(), 0), f"umount {COVER}")
    _loopback_up()
    drop_capabilities()


def _loopback_up() -> None:
    """``ip link set lo up``, as bubblewrap does in the network namespace it makes."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        got = fcntl.ioctl(s.fileno(), siocgifflags, struct.pack("16sh22x", b"lo", 0))
        flags = struct.unpack("16sh22x", got)[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sh22x", b"lo", flags | iff_up))


def drop_capabilities() -> None:
    """Drop every capability (bounding and ambient sets too) and forbid new privileges; raise
    :class:`IsolationError` unless ``/proc/self/status`` then shows none at all."""
    for cap in range(64):
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("Ii", _CAPS_V3, 0)
    data = bytes(24)  # two (effective, permitted, inheritable) triples, all empty
    number = _SYS_CAPSET.get(os.uname().machine)
    if number is None:
        raise IsolationError(0, f"no capset system call known on {os.uname().machine}")
    _check(_libc.syscall(number, header, data), "capset")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    with open("/proc/self/status") as f:
        caps = {k: v.strip() for k, _, v in (line.partition(":") for line in f) if k.startswith("Cap")}
    if len(caps) < 5 or any(int(v, 16) for v in caps.values()):
        raise IsolationError(0, f"capabilities left: {caps}")


# -- the zygote --------------------------------------------------------------------------------

def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


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
            _unshare(_SERVER_NS)
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
        _reap()
        name = msg[1:].decode("ascii", "replace")
        if msg[:1] != b"S" or len(fds) != 1 or not name.isalnum():
            for fd in fds:
                os.close(fd)
            continue
        _fork_server(ctrl, fds[0], os.path.join(workdir, name), nested, shell)


def probe(scratch: str) -> None:
    """Exit 0 if a nested server could be made here: what the sandbox needs can be found, and
    :func:`isolate` works (run inside a probing sandbox, see :func:`grader.engines.isolation.sandbox.sandbox_level`)."""
    import importlib.util

    from grader.engines.isolation.mounts import NEEDED_MODULES

    if not all(importlib.util.find_spec(m) for m in NEEDED_MODULES):
        sys.exit(2)
    cover_host_proc()
    _unshare(_SERVER_NS)
    pid = os.fork()
    if pid == 0:
        try:
            isolate(scratch)
            if os.listdir(COVER) or os.getpid() != 1 or not os.access(scratch, os.W_OK):
                os._exit(4)
        except BaseException as exc:  # noqa: BLE001
            print(f"nested sandbox: {exc}", file=sys.stderr, flush=True)
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str] | None = None) -> None:
    """``python -m grader.engines.fork.zygote --fd N WORKDIR [--nested] [--preload A,B]`` or ``--probe SCRATCH``."""
    from grader.engines.fork.server import take_preload

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--probe":
        probe(args[1])
    args, preload = take_preload(args)
    nested = "--nested" in args
    args = [a for a in args if a != "--nested"]
    if len(args) != 3 or args[0] != "--fd" or not args[1].isdigit():
        raise SystemExit("usage: python -m grader.engines.fork.zygote --fd N WORKDIR [--nested] [--preload A,B]")
    run(int(args[1]), args[2], nested, preload)


if __name__ == "__main__":
    main()
