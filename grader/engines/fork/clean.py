"""What a fork server removes after each child, so that nothing of it is there for the next one."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal

from grader.engines.isolation.mounts import PRIVATE_DIRS


def after_child(scratch: str, keep: set[str], private: bool) -> None:
    """Kill what the child left running, empty the server's folder and, where the server owns
    them (``private``: in a sandbox), its ``/tmp``, ``/dev/shm``, message queues and SysV IPC."""
    _kill_leftovers()  # ...even in a session of its own, before the next child's files exist
    _empty(scratch, set())
    if private:
        for folder in PRIVATE_DIRS:
            _empty(folder, keep)
        _remove_ipc()


def _kill_leftovers() -> None:
    """Kill every process the child left behind: orphans come to the server (its subreaper)."""
    me = os.getpid()
    while True:
        try:
            with open(f"/proc/{me}/task/{me}/children") as f:
                leftovers = [int(p) for p in f.read().split()]
        except OSError:
            leftovers = []
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _empty(folder: str, keep: set[str]) -> None:
    """Remove everything in ``folder`` except the paths in ``keep`` and their parents."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        path = entry.path
        if path in keep:
            continue
        if any(k.startswith(path + os.sep) for k in keep):
            _empty(path, keep)
        elif entry.is_dir(follow_symlinks=False):
            _open_up(path)
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _open_up(tree: str) -> None:
    """Let the server (the same user as its children) write and enter every folder of ``tree``:
    a child can lock a folder (``chmod 0``, ``chmod 0500``) that a removal could then not empty,
    and its files would be there for the next child. Links are not followed; the child that
    made them is dead by now, so nothing changes under the walk."""
    try:
        os.chmod(tree, 0o700)
    except OSError:
        return
    for root, dirs, _ in os.walk(tree):
        for name in dirs:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                try:
                    os.chmod(path, 0o700)
                except OSError:
                    pass


def _remove_ipc() -> None:
    """Remove every System V shared memory segment, semaphore set and message queue of this
    IPC namespace (the sandbox's own): nothing a child made is there for the next one."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    ipc_rmid = 0
    for kind, remove in (("shm", lambda i: libc.shmctl(i, ipc_rmid, None)),
                         ("sem", lambda i: libc.semctl(i, 0, ipc_rmid)),
                         ("msg", lambda i: libc.msgctl(i, ipc_rmid, None))):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1 and fields[1].isdigit():
                remove(int(fields[1]))
