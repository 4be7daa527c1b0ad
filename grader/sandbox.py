"""Isolating a grading kernel: its own directory, a memory cap, and (with bubblewrap) no
network and a read-only view of the machine with the course's private folders hidden."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass
class Sandbox:
    """How a kernel is confined.

    Attributes:
        workdir: the kernel's working directory, the only place it may write.
        runtime_dir: where the kernel's connection file and IPC sockets live (shared with us).
        hide: folders made invisible inside the sandbox (the gradebook's workspace, the
            solutions, the submissions folder): an empty tmpfs is mounted over each.
        memory_mb: address-space cap of the kernel process (None: no cap).
        isolate: use bubblewrap when it works on this machine.
    """

    workdir: Path
    runtime_dir: Path
    hide: list[Path] = field(default_factory=list)
    memory_mb: int | None = 2048
    isolate: bool = True

    def wrap(self, cmd: list[str]) -> list[str]:
        """The kernel command, wrapped in the limits launcher and, if possible, bubblewrap."""
        limited = [sys.executable, "-m", "grader.limits"]
        if self.memory_mb:
            limited += ["--memory-mb", str(self.memory_mb)]
        limited += ["--", *cmd]
        if not (self.isolate and bubblewrap_works()):
            return limited
        args = [
            "bwrap", "--die-with-parent", "--unshare-net", "--unshare-ipc",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        ]
        if os.geteuid() == 0:  # root keeps its capabilities in bwrap: it could unmount what hides
            args += ["--cap-drop", "ALL"]  # the private folders, or remount / writable
        for path in needed_under_tmp():  # the fresh /tmp must not hide Python or the course
            args += ["--ro-bind", path, path]
        for path in self.hide:
            if path.exists():
                args += ["--tmpfs", str(path.resolve())]
        args += [
            "--bind", str(self.workdir), str(self.workdir),
            "--bind", str(self.runtime_dir), str(self.runtime_dir),
            "--chdir", str(self.workdir),
        ]
        return [*args, *limited]


def needed_under_tmp() -> list[str]:
    """Folders a kernel needs (the interpreter, the virtualenv, the course's code) that lie
    under /tmp, where the sandbox mounts an empty tmpfs: they are bound back in, read-only."""
    import course_utils

    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(course_utils.__file__))}
    candidates.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tmp = os.path.realpath("/tmp")
    out = []
    for path in sorted(os.path.realpath(p) for p in candidates):
        if (path == tmp or path.startswith(tmp + os.sep)) and not any(path.startswith(o + os.sep) for o in out):
            out.append(path)
    return out


@lru_cache(maxsize=1)
def bubblewrap_works() -> bool:
    """Whether bubblewrap can make a sandbox here (it needs user namespaces or root)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    try:
        done = subprocess.run(
            [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--die-with-parent", "true"],
            capture_output=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if done.returncode != 0:
        log.info("bubblewrap is installed but cannot sandbox here: %s", done.stderr.decode(errors="replace").strip())
    return done.returncode == 0


def isolation_summary() -> str:
    """One sentence on what isolation grading kernels get on this machine."""
    if bubblewrap_works():
        return "bubblewrap sandbox: no network, read-only filesystem, private folders hidden, memory cap"
    return "no bubblewrap: own temporary directory, stripped environment, memory cap (no filesystem or network isolation)"
