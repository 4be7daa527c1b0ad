"""What a sandboxed process is given of the host: the folders execution needs, bound read-only, and
the sizes of its private tmpfs folders.

Shared by the sandbox that builds bubblewrap's command line (:mod:`grader.engines.isolation.sandbox`), the
namespaces a fork server is given inside the nested sandbox (:mod:`grader.engines.isolation.namespaces`)
and the servers themselves (:mod:`grader.engines.fork.server`), so that none of them imports another
for it.
"""

from __future__ import annotations

import os
import sys

#: Size caps of the private tmpfs folders (their pages also count in the memory budget).
TMP_MB = 512
SHM_MB = 256

#: Where the nested sandbox binds the host's /proc (the zygote covers it at once, see
#: :func:`grader.engines.isolation.namespaces.cover_host_proc`).
HOST_PROC = "/run/course-hostproc"

#: Folders a sandboxed fork server owns privately and empties after every child.
PRIVATE_DIRS = ("/tmp", "/dev/shm", "/dev/mqueue")

#: what a sandboxed kernel or server needs to find (the probes find them, not import them)
NEEDED_MODULES = ("course_utils", "grader", "torch", "ipykernel")


def needed_paths() -> list[str]:
    """Host folders execution needs, bound read-only at their real paths: the interpreter's
    prefix, the virtualenv, and the ``course_utils`` and ``grader`` package folders (the
    editable install finds them there) -- not the repository that holds them."""
    import importlib.util

    packages = []
    for name in ("course_utils", "grader"):
        spec = importlib.util.find_spec(name)  # found, not imported (course_utils imports torch)
        if spec is None or not spec.origin:
            raise ImportError(f"{name} is not installed: run `make venv`")
        packages.append(os.path.dirname(spec.origin))
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *packages,
                  os.path.dirname(os.path.realpath(sys.executable))}
    for entry in sys.path:  # site-packages reached through a link, a .pth folder
        if entry and os.path.isdir(entry) and "site-packages" in entry:
            candidates.add(entry)
    out: list[str] = []
    for path in sorted({os.path.realpath(p) for p in candidates}, key=len):
        if path.startswith("/usr/") or path == "/usr" or path == "/":
            continue
        if not any(path == o or path.startswith(o + os.sep) for o in out):
            out.append(path)
    # a link to the venv's python (``.venv/bin/python3 -> /root/.pyenv/...``) must resolve
    # inside: the targets are bound above, the links themselves live in the bound venv
    return sorted(out)


def needed_in_private_dirs() -> list[str]:
    """The folders execution needs (:func:`needed_paths`) that lie under a
    folder a server gets a private, empty copy of (``/tmp``, ``/dev/shm``)."""
    return [p for p in needed_paths() if any(p == d or p.startswith(d + os.sep) for d in PRIVATE_DIRS)]
