"""Confining a submission: bubblewrap namespaces, a root filesystem built from what execution
needs, and a cgroup budget per submission.

What a sandboxed process gets (see :meth:`Sandbox.wrap`):

- its own user namespace with an unprivileged uid (1000), no capabilities and no way to make
  a nested user namespace (where it would have some), its own pid
  namespace (it sees and signals nothing outside; when the sandbox ends everything in it
  dies), its own IPC, UTS and network namespaces (no network, no abstract Unix sockets of
  the host), a new session (no terminal injection), killed when the grader dies, and no
  kernel keyrings (a seccomp filter, :mod:`grader.engines.isolation.seccomp`);
- a root filesystem assembled from read-only binds of ``/usr`` (and the ``/bin``-style
  links to it), a few files of ``/etc``, the interpreter's prefix, the virtualenv and the
  ``course_utils`` and ``grader`` package folders -- never ``/``, the repository root or its
  ``.git``, the solutions, the workspace or other submissions; a minimal read-only ``/dev``
  with a private size-capped ``/dev/shm``, a private ``/proc``, a private size-capped
  ``/tmp``, and its own working directory, the only host folder it may write;
- with :class:`Budget`, a cgroup (v1 ``memory`` + ``pids`` controllers, or v2) that caps the
  memory of all its processes together -- tmpfs and shared memory included -- and their number.

Processes started through :func:`wrap` first pass through :mod:`grader.engines.isolation.confine` (outside the
sandbox), which joins the cgroup and sets the per-process limits before ``exec``-ing bwrap.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from grader.engines.isolation import ahead
from grader.engines.isolation.budget import PIDS_MAX, Budget, cgroup_mode
from grader.engines.isolation.mounts import HOST_PROC, NEEDED_MODULES, SHM_MB, TMP_MB, needed_paths
from grader.engines.isolation.treewatch import WATCH_INTERVAL

log = logging.getLogger(__name__)

#: The uid/gid a submission runs as inside its user namespace.
SANDBOX_UID = 1000

#: Files of /etc a Python process and its libraries read; /etc/passwd and /etc/group are written
#: for the sandbox (the host's list no one needs), and nothing else of /etc is visible.
ETC_FILES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "host.conf", "hosts", "localtime",
    "timezone", "ssl", "ca-certificates", "ca-certificates.conf", "fonts", "mime.types", "alternatives",
    "os-release", "debian_version", "matplotlibrc",
)
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass
class Sandbox:
    """How a kernel (or a fork server) is confined.

    Attributes:
        workdir: the working directory, the only host folder it may write.
        runtime_dir: a second writable folder (the kernel engine's connection file and IPC
            sockets), or None.
        hide: folders that must stay invisible (the gradebook's workspace, the solutions, the
            submissions). Nothing is bound in unless execution needs it, so they are absent
            already; one that lies under a folder that is bound gets an empty tmpfs over it.
        memory_mb: address-space cap of each process (None: no cap); the cgroup caps the sum.
        isolate: use bubblewrap when it works on this machine.
        budget: the cgroup every process of the sandbox joins, or None.
        devices: host device nodes bound in (the GPU's, for ``--device cuda``: see
            :func:`gpu_devices`).
        data_only: ``memory_mb`` caps private writable memory rather than address space (see
            :func:`process_cap`).
        nest: the fork engine's zygote, which makes a sandbox of its own for every server it
            forks (see :func:`bwrap_args`, :mod:`grader.engines.fork.zygote`).
    """

    workdir: Path
    runtime_dir: Path | None = None
    hide: list[Path] = field(default_factory=list)
    memory_mb: int | None = 2048
    isolate: bool = True
    budget: Budget | None = None
    devices: tuple[str, ...] = ()
    data_only: bool = False
    nest: bool = False

    def sandboxed(self) -> bool:
        """Whether :meth:`wrap` puts the command in bubblewrap."""
        return self.isolate and bubblewrap_works()

    def wrap(self, cmd: list[str]) -> list[str]:
        """The command, wrapped in :mod:`grader.engines.isolation.confine` and, if possible, bubblewrap."""
        launcher = [sys.executable, "-m", "grader.engines.isolation.confine"]
        if self.memory_mb:
            launcher += ["--memory-mb", str(self.memory_mb)]
            if self.data_only:
                launcher += ["--data-only"]
        if self.budget is not None:
            for procs in self.budget.procs_files():
                launcher += ["--cgroup", procs]
        if not self.sandboxed():
            return [*launcher, "--", *cmd]
        args = bwrap_args(self.workdir, self.runtime_dir, self.hide, self.devices, nest=self.nest)
        return [*launcher, "--seccomp", "--", *args, *cmd]


#: host memory a CUDA context takes on top of the learner's own: private writable memory after a
#: process's first matrix product on the GPU was 1.49 GiB (H200, torch 2.11+cu130). Added to
#: ``--memory-mb`` with ``--device cuda``.
CUDA_CONTEXT_MB = 2048


@lru_cache(maxsize=1)
def torch_has_cuda() -> bool:
    """Whether the installed torch is a CUDA (or ROCm) build; found, not imported."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return False
    lib = os.path.join(os.path.dirname(spec.origin), "lib")
    return any(os.path.exists(os.path.join(lib, name)) for name in ("libtorch_cuda.so", "libtorch_hip.so"))


def process_cap(memory_mb: int | None, device: str) -> tuple[int | None, bool]:
    """The per-process memory cap of a grading process: (MiB or None, whether on data only).

    An address-space cap (``RLIMIT_AS``) counts every mapping, shared memory included, so it is
    used where it can be. It cannot where torch is a CUDA build: its libraries alone map more
    than 2 GiB (``import torch`` failed under a 2 GiB cap), and the CUDA driver reserves far more
    address space than the GPU has memory (18 GiB of it on an H200). Such a process gets its
    private writable memory capped instead (``RLIMIT_DATA``, which those mappings are not), plus
    :data:`CUDA_CONTEXT_MB` when it may start a CUDA context. Shared memory is then capped only
    by a cgroup, where there is one."""
    if not memory_mb:
        return None, False
    return budget_mb(memory_mb, device), caps_private_memory(device)


def caps_private_memory(device: str) -> bool:
    """Whether a grading process's cap is on private memory (see :func:`process_cap`)."""
    return device == "cuda" or torch_has_cuda()


def budget_mb(memory_mb: int | None, device: str) -> int | None:
    """The cgroup budget of a submission (all its processes): ``--memory-mb``, plus
    :data:`CUDA_CONTEXT_MB` with ``--device cuda`` (as :func:`process_cap` adds it)."""
    return memory_mb + CUDA_CONTEXT_MB if memory_mb and device == "cuda" else memory_mb


def gpu_devices(device: str) -> tuple[str, ...]:
    """The device nodes a CUDA process opens (``/dev/nvidia*``), when ``device`` is ``cuda``."""
    if device != "cuda":
        return ()
    return tuple(sorted(str(p) for p in Path("/dev").glob("nvidia*") if not p.is_dir()))


def bwrap_args(workdir: Path, runtime_dir: Path | None = None, hide: list[Path] | tuple = (),
               devices: tuple[str, ...] = (), nest: bool = False) -> list[str]:
    """The bubblewrap command line (up to and including ``--``) of a sandbox.

    ``nest``: for the fork engine's zygote, which gives every server it forks namespaces of its
    own (:mod:`grader.engines.fork.zygote`): it keeps CAP_SYS_ADMIN, CAP_NET_ADMIN and CAP_SETPCAP
    in the sandbox's user namespace (each server drops them before it serves), and gets the
    host's /proc read-only at :data:`grader.engines.isolation.mounts.HOST_PROC`, which it covers before
    it imports anything."""
    args = [
        "bwrap",
        "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
        "--disable-userns",  # no nested user namespace: no capabilities to be had inside, ever
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
        "--hostname", "sandbox", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
    ]
    if nest:
        args += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN", "--cap-add", "CAP_SETPCAP"]
    args += ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_LINKS:
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in ETC_FILES:
        args += ["--ro-bind-try", "/etc/" + name, "/etc/" + name]
    etc = _sandbox_etc()
    args += ["--ro-bind", os.path.join(etc, "passwd"), "/etc/passwd", "--ro-bind", os.path.join(etc, "group"), "/etc/group"]
    args += ["--dev", "/dev", "--size", str(SHM_MB * 2**20), "--tmpfs", "/dev/shm", "--mqueue", "/dev/mqueue"]
    for node in devices:  # before /dev turns read-only: their mount points are made there
        args += ["--dev-bind-try", node, node]
    args += [
        "--remount-ro", "/dev",  # nothing can be left in /dev for a later process
        "--proc", "/proc",
        "--size", str(TMP_MB * 2**20), "--tmpfs", "/tmp",
    ]
    if nest:
        args += ["--ro-bind", "/proc", HOST_PROC]
    bound = needed_paths()
    for path in bound:
        args += ["--ro-bind", path, path]
    for path in hide:
        real = os.path.realpath(path)
        if os.path.isdir(real) and any(real == b or real.startswith(b + os.sep) for b in bound):
            args += ["--tmpfs", real]
    args += ["--bind", str(workdir), str(workdir)]
    if runtime_dir is not None:
        args += ["--bind", str(runtime_dir), str(runtime_dir)]
    # the sandbox's own root (a tmpfs holding the mount points) read-only too: nothing can be
    # left there for a later child of the same fork server
    args += ["--remount-ro", "/", "--chdir", str(workdir), "--"]
    return args


_etc_dir: str | None = None


def _sandbox_etc() -> str:
    """A folder with the sandbox's /etc/passwd and /etc/group (written once per process)."""
    global _etc_dir
    if _etc_dir is None or not os.path.isdir(_etc_dir):
        folder = tempfile.mkdtemp(prefix="course-sandbox-etc-")
        with open(os.path.join(folder, "passwd"), "w") as f:
            f.write(f"root:x:0:0:root:/root:/usr/sbin/nologin\nstudent:x:{SANDBOX_UID}:{SANDBOX_UID}:student:/tmp:/usr/sbin/nologin\n"
                    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        with open(os.path.join(folder, "group"), "w") as f:
            f.write(f"root:x:0:\nstudent:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
        for name in ("passwd", "group"):
            os.chmod(os.path.join(folder, name), 0o644)
        _etc_dir = folder
        atexit.register(shutil.rmtree, folder, True)
    return _etc_dir


# -- what works here -------------------------------------------------------------------------

_assumed_level: str | None = None


def assume_level(level: str) -> None:
    """Take ``level`` for what :func:`sandbox_level` would find, without probing: a worker process
    of the coordinator's pool, which probed already (each worker probing again cost a bubblewrap
    start and an interpreter per worker at once, and a worker whose probe timed out on a busy
    machine would have run its kernels with no sandbox while the batch said they had one)."""
    global _assumed_level
    _assumed_level = level
    sandbox_level.cache_clear()


@lru_cache(maxsize=1)
def sandbox_level() -> str:
    """What bubblewrap can make here: ``"nested"`` (sandboxes, and a zygote's servers with
    namespaces of their own inside one: :mod:`grader.engines.fork.zygote`), ``"plain"`` (sandboxes
    only) or ``""`` (none: it needs user namespaces). Each is probed through confine, with the
    seccomp filter every sandbox gets, by a process that finds (not imports: torch would take
    1-3 s) what a sandboxed kernel needs."""
    if _assumed_level is not None:
        return _assumed_level
    early = ahead.take()  # a probe started early (``course grade``: :func:`ahead.probing`)
    return early if early is not None else probe_level()


def level_known() -> bool:
    """Whether :func:`sandbox_level` answers without probing (or was replaced: a test's)."""
    cached = getattr(sandbox_level, "cache_info", None)
    return _assumed_level is not None or cached is None or cached().currsize > 0


def probe_level() -> str:
    """What :func:`sandbox_level` finds, probed now."""
    if shutil.which("bwrap") is None:
        return ""
    work = tempfile.mkdtemp(prefix="course-bwrap-probe-")
    confine = [sys.executable, "-m", "grader.engines.isolation.confine", "--seccomp", "--"]
    probe = f"import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in {NEEDED_MODULES!r}))"
    try:
        scratch = os.path.join(work, "s0")
        os.mkdir(scratch)
        nested = [*confine, *bwrap_args(Path(work), nest=True), sys.executable, "-m", "grader.engines.isolation.namespaces", "--probe", scratch]
        done = subprocess.run(nested, capture_output=True, timeout=30)
        if done.returncode == 0:
            return "nested"
        log.info("fork servers each get a sandbox of their own (no nested namespaces here): %s",
                 done.stderr.decode(errors="replace").strip()[-300:])
        done = subprocess.run([*confine, *bwrap_args(Path(work)), sys.executable, "-c", probe], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        log.warning("bubblewrap is installed but cannot sandbox here: %s", done.stderr.decode(errors="replace").strip())
        return ""
    return "plain"


def bubblewrap_works() -> bool:
    """Whether bubblewrap can make the full sandbox here (it needs user namespaces)."""
    return sandbox_level() != ""


def bubblewrap_problem() -> str:
    """Why bubblewrap is not usable here ("" when it is)."""
    if bubblewrap_works():
        return ""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: make test-deps installs it as root"
    return "bwrap cannot build the sandbox here: user/pid namespaces or its seccomp filter refused (see the log)"


def isolation_summary(device: str = "cpu") -> str:
    """One line on what holds on this machine, for ``course grade``."""
    mode = cgroup_mode()
    rlimit = ("RLIMIT_DATA, shared memory not counted: a CUDA build of torch cannot live under RLIMIT_AS"
              if caps_private_memory(device) else "RLIMIT_AS")
    if mode:
        budget = f"cgroup {mode} budget per submission (memory incl. tmpfs/shm, {PIDS_MAX} processes)"
    else:
        budget = (f"NO cgroup: each process capped ({rlimit}); a submission's processes together watched from "
                  f"outside every {WATCH_INTERVAL:g} s (memory: anonymous and shm pages, shared ones by share, "
                  f"against the budget; count, threads included, against {PIDS_MAX}) and all killed past either, "
                  "a burst between two looks not caught")
        if bubblewrap_works():
            budget += (f"; RLIMIT_NPROC {PIDS_MAX} in the sandbox's user namespace"
                       + (" (not enforced here: the sandbox's uid is the host's root, which Linux exempts)"
                          if os.geteuid() == 0 else ""))
    if device == "cuda":
        nodes = gpu_devices(device)
        budget += f"; GPU device nodes bound: {', '.join(nodes)}" if nodes else "; NO /dev/nvidia* node: CUDA unavailable"
        if not torch_has_cuda():
            budget += "; torch here is a CPU build: the notebooks run on the CPU"
    if bubblewrap_works():
        return ("bubblewrap: own user (uid 1000, no capabilities), pid, ipc, uts and network namespaces, no keyrings; "
                f"root filesystem of the interpreter, venv and course packages only (read-only), private /tmp "
                f"({TMP_MB} MiB) and /dev; {budget}; wall-clock and output caps")
    return (f"NO sandbox ({bubblewrap_problem()}): submissions run as this user and can read and write what it "
            f"can, see and signal its processes, and use the network; {budget}; wall-clock and output caps")
