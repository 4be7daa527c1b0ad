"""``python -m grader.engines.isolation.confine [--memory-mb N [--data-only]] [--cgroup PROCS]... [--seccomp] -- CMD...``: run CMD confined.

Run outside the sandbox, in front of bubblewrap: joins the submission's cgroup(s) (writes its
own pid to each ``cgroup.procs`` given), so that everything CMD starts is counted and capped
together, sets the per-process limits (address space, no core dumps) and ``exec``-s CMD. With
``--seccomp``, CMD is bubblewrap and gets ``--seccomp FD``: an inherited file holding
:func:`grader.engines.isolation.seccomp.keyring_filter`.

``python -m grader.engines.isolation.confine --kernel [--nproc N] ARGS...`` is the other end, inside the sandbox: it
makes the kernel process not dumpable (no other process of the sandbox can read its memory through
``/proc`` or ptrace it), with ``--nproc`` caps the processes and threads of the sandbox at N
(``RLIMIT_NPROC``, see :func:`cap_processes`), and runs ``ipykernel_launcher ARGS``.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

PR_SET_DUMPABLE = 4


def set_limits(memory_mb: int | None, data_only: bool = False) -> None:
    """Cap the process's memory at ``memory_mb`` and forbid core dumps.

    The cap is on the address space (``RLIMIT_AS``), or, with ``data_only``, on private writable
    memory (``RLIMIT_DATA``): see :func:`grader.engines.isolation.sandbox.process_cap` for when."""
    if memory_mb:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_DATA if data_only else resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def cap_processes(count: int) -> None:
    """Cap the processes and threads of this sandbox at ``count`` (``RLIMIT_NPROC``).

    Set inside bubblewrap's user namespace, not before it: the kernel counts a user's processes
    per user namespace, and checks the count of each namespace up to the host's, each against the
    limit its creator had. Set here, the count is the sandbox's own processes (a host user's other
    processes, other sandboxes' included, count against the limit bubblewrap started with).
    Linux does not apply ``RLIMIT_NPROC`` to processes whose real user is the host's root, and the
    sandbox's uid 1000 maps to the user who started the grader: where that is root (CI, the GPU
    machines), the cap is set but does not hold, and only a cgroup or the grader's watch of the
    process tree (:class:`grader.engines.isolation.treewatch.TreeWatch`) caps the count."""
    resource.setrlimit(resource.RLIMIT_NPROC, (count, count))


def not_dumpable() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _filter_fd() -> int:
    """An inheritable file descriptor holding the sandbox's seccomp filter, read from its start."""
    from grader.engines.isolation.seccomp import keyring_filter

    fd = os.memfd_create("course-seccomp", 0)  # no MFD_CLOEXEC: bubblewrap reads it after exec
    os.write(fd, keyring_filter())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def main(argv: list[str]) -> None:
    if argv[:1] == ["--kernel"]:
        import runpy

        argv = argv[1:]
        if argv[:1] == ["--nproc"]:
            cap_processes(int(argv[1]))
            argv = argv[2:]
        argv = ["--kernel", *argv]
        not_dumpable()
        # in its pid namespace the kernel's parent is the sandbox's init (pid 1), which ipykernel's
        # parent poller takes for "the parent exited": bwrap --die-with-parent does that job. Pid 1
        # is the value ipykernel knows means "no poller"; with none at all it would take itself
        # for a terminal's `ipython kernel` and print its connection banner into the grader's log
        os.environ["JPY_PARENT_PID"] = "1"
        sys.argv = ["ipykernel_launcher", *argv[1:]]
        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        return
    memory_mb, cgroups, data_only, seccomp = None, [], False, False
    while argv and argv[0] != "--":
        opt = argv.pop(0)
        if opt == "--memory-mb":
            memory_mb = int(argv.pop(0))
        elif opt == "--data-only":
            data_only = True
        elif opt == "--cgroup":
            cgroups.append(argv.pop(0))
        elif opt == "--seccomp":
            seccomp = True
        else:
            raise SystemExit(f"grader.engines.isolation.confine: unknown option {opt}")
    cmd = argv[1:]
    if not cmd:
        raise SystemExit("usage: python -m grader.engines.isolation.confine [--memory-mb N [--data-only]] [--cgroup PROCS]... [--seccomp] -- CMD...")
    if seccomp:
        cmd = [cmd[0], "--seccomp", str(_filter_fd()), *cmd[1:]]
    for procs in cgroups:  # before anything runs: every later process is counted
        try:
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        except OSError:  # the batch was stopped (Ctrl-C) and swept its cgroups before this start: run nothing
            raise SystemExit(1) from None
    set_limits(memory_mb, data_only)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
