"""Namespaces of its own for a process inside the nested sandbox: the host's ``/proc`` covered, then
its own pid, mount, IPC, UTS and network namespaces, ``/proc``, ``/tmp``, ``/dev/shm``, message
queues and folder, loopback up, and no capability left.

The nested sandbox (:func:`grader.engines.isolation.sandbox.bwrap_args` with ``nest=True``) gives
the process it starts three capabilities in its own user namespace (never on the host) and the
host's ``/proc`` read-only at :data:`grader.engines.isolation.mounts.HOST_PROC`: the kernel lets a
process mount a new ``/proc`` only where a wholly visible one exists. That process covers it first
(:func:`cover_host_proc`); each process it forks to serve alone then makes its namespaces
(:data:`SERVER_NS`), forks pid 1 of them and calls :func:`isolate` there. The fork engine's zygote
(:mod:`grader.engines.fork.zygote`) does so for every server.

``python -m grader.engines.isolation.namespaces --probe SCRATCH`` exits 0 where that works (run in a
probing sandbox by :func:`grader.engines.isolation.sandbox.sandbox_level`).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys

#: What covers :data:`grader.engines.isolation.mounts.HOST_PROC`, where the nested sandbox binds the host's
#: /proc (covered at once, see the module docstring).
COVER = "/run"

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
SERVER_NS = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, _PR_SET_NO_NEW_PRIVS = 24, 47, 4, 38
_CAPS_V3 = 0x20080522
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    """A process could not be given its own namespaces (it must then not serve)."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def _enc(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_enc(source), _enc(target), _enc(fstype), ctypes.c_ulong(flags), _enc(data)), f"mount {target}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def cover_host_proc() -> None:
    """A mount namespace of our own, in which nothing of :data:`grader.engines.isolation.mounts.HOST_PROC` can be seen."""
    unshare(CLONE_NEWNS)
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


def reap() -> None:
    """Reap every child that has exited, without waiting (a warm process, a zygote: what they forked)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def probe(scratch: str) -> None:
    """Exit 0 if a nested server could be made here: what the sandbox needs can be found, and
    :func:`isolate` works (run inside a probing sandbox, see :func:`grader.engines.isolation.sandbox.sandbox_level`)."""
    import importlib.util

    from grader.engines.isolation.mounts import NEEDED_MODULES

    if not all(importlib.util.find_spec(m) for m in NEEDED_MODULES):
        sys.exit(2)
    cover_host_proc()
    unshare(SERVER_NS)
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


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--probe":
        raise SystemExit("usage: python -m grader.engines.isolation.namespaces --probe SCRATCH")
    probe(sys.argv[2])
