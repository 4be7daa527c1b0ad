"""The warm process of the ``fork`` engine: torch and the course imported once, a fresh child forked per submission.

Started by :mod:`grader.engines.fork.pool` as ``python -m grader.engines.fork.server --fd N SCRATCH`` with the
stripped environment of a grading kernel (and inside the same sandbox, where the machine
has one). ``N`` is the server's end of a socketpair only the coordinator holds the other end
of: there is no listening socket and no path a child could connect to, unlink or fake. For
each child the coordinator sends, over it, one end of a fresh socketpair; the server forks a
child that keeps that end (and closes the control channel), answers with the child's pidfd,
waits for it, and never reads what comes over the child's connection, so it never holds a
submission, a gradebook handle or a solution. After a child, the server kills whatever it
left behind and removes every file and IPC object it could have left for the next one
(:mod:`grader.engines.fork.clean`).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import socket
import sys
import tempfile

from grader.engines.fork import clean as forkclean
from grader.engines.fork.wire import recv

# what a kernel imports and runs before learner code too
from grader.prepare.integrity import FIXED_INPUTS, PRELOAD, WARM_UP

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36


# -- the server --------------------------------------------------------------------------

def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def die_with_parent() -> None:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def not_dumpable() -> None:
    """Without CAP_SYS_PTRACE no other process of this user, a child included, can then read or
    write this process's memory via /proc or ptrace (children inherit it)."""
    _prctl(_PR_SET_DUMPABLE, 0)


def become_server() -> None:
    """What a server (or the zygote it is forked from) is: it dies with its parent, is not
    dumpable, reaps what its children abandon, and exits quietly on SIGTERM."""
    die_with_parent()
    not_dumpable()
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)  # what a child starts and abandons is re-parented to us
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))


def warm(extra: tuple[str, ...] = ()) -> object:
    """Import what the chapters import (``extra``: what this batch's chapters ask for besides), warm
    the lazy parts, and build the shell children use."""
    import importlib

    for name in (*PRELOAD, *extra):
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing optional module costs speed, not correctness
            print(f"forkserver: preloading {name} failed: {exc}", file=sys.stderr)
    exec(compile(FIXED_INPUTS, "<fixed-inputs>", "exec"), {})  # each child runs it again, as every kernel does
    exec(compile(WARM_UP, "<warm-up>", "exec"), {})  # as every kernel runs it
    try:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.plot([0, 1])
        ax.set_title("warm-up")
        fig.canvas.draw()  # loads fonts once, here, instead of in every child
        plt.close(fig)
    except Exception as exc:
        print(f"forkserver: matplotlib warm-up failed: {exc}", file=sys.stderr)
    if len(os.listdir("/proc/self/task")) > 1:  # threads do not survive a fork: a child could hang
        print("forkserver: a preloaded module started a thread; set OMP_NUM_THREADS=1", file=sys.stderr)
    from grader.engines.fork.shell import new_shell

    return new_shell()


#: set in a server that serves ``--device cuda``: torch.cuda.is_available() then asks NVML and
#: leaves the CUDA driver alone (CUDA cannot be used in a child forked after it started)
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def cuda_fork_problem() -> str | None:
    """Why a child forked now could not use CUDA, or None.

    A child can use CUDA only if this process never started the CUDA driver: torch marks a
    child forked after that "bad" and refuses it ("Cannot re-initialize CUDA in forked
    subprocess"). A probe child is forked and asked, once, after the preload."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch.cuda.is_initialized():
        return "CUDA was initialised while preloading"
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
        except BaseException:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 3:
        return "the CUDA driver was started while preloading (a forked child is refused CUDA)"
    if code != 0:
        return f"the probe child failed (exit status {code})"
    return None


def serve(ctrl_fd: int, scratch: str, private: bool, preload: tuple[str, ...] = (), cuda: bool = False) -> None:
    """Wait for the coordinator's next connection, fork a child for it, wait for the child,
    clean up; until the coordinator closes the control channel. ``cuda``: the children use
    CUDA, so this process must never start the driver (it exits, saying why, if it did)."""
    become_server()
    ctrl = socket.socket(fileno=ctrl_fd)
    ctrl.setblocking(True)
    if cuda:
        os.environ[NVML_CHECK] = "1"
    shell = warm(preload)
    if cuda:
        problem = cuda_fork_problem()
        if problem:
            print(f"forkserver: its children could not use CUDA: {problem}; grade with --engine kernel",
                  file=sys.stderr)
            os._exit(3)
        del os.environ[NVML_CHECK]  # children see what a kernel sees
    serve_children(ctrl, scratch, private, shell)


def serve_children(ctrl: socket.socket, scratch: str, private: bool, shell) -> None:
    """Say ready, then fork a child per connection the coordinator sends (see :func:`serve`)."""
    from grader.engines.isolation.mounts import needed_in_private_dirs

    keep = {os.path.realpath(scratch), *needed_in_private_dirs()}  # never emptied between children
    ctrl.sendall(b"R")  # ready
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctrl, 1, 1)
        except OSError:
            os._exit(0)
        if not msg:  # the coordinator is gone
            os._exit(0)
        if not fds:
            if msg == b"?":  # are you well? (answered only once the last child is cleaned up)
                ctrl.sendall(b"!")
            continue
        conn = socket.socket(fileno=fds[0])
        home = os.path.join(scratch, "k" + secrets.token_hex(6))
        os.mkdir(home, 0o700)
        pid = os.fork()
        if pid == 0:
            ctrl.close()  # the child holds its own connection and nothing else of ours
            _child(conn, home, shell)  # never returns
        conn.close()
        try:  # the coordinator gets a handle to interrupt, kill and budget the child with
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):  # Linux < 5.3: the coordinator uses the pid
            pidfd = None
        try:
            socket.send_fds(ctrl, [b"P"], [pidfd] if pidfd is not None else [])
        except OSError:
            pass
        if pidfd is not None:
            os.close(pidfd)
        os.waitpid(pid, 0)
        try:
            os.killpg(pid, signal.SIGKILL)  # whatever the child started...
        except OSError:
            pass
        forkclean.after_child(scratch, keep, private)


# -- a child -----------------------------------------------------------------------------

def _child(conn: socket.socket, home: str, shell) -> None:
    """Serve one submission on ``conn``, then exit (never returns)."""
    try:
        die_with_parent()
        os.setsid()  # its own process group: the server kills whatever it leaves behind
        os.chdir(home)
        os.environ.update(HOME=home, TMPDIR=home)
        tempfile.tempdir = None
        init = recv(conn)  # the coordinator sends it once the server has sent our pidfd
        if init is None:
            os._exit(0)
        from grader.engines.fork.shell import Session

        Session(conn, shell, init).serve()
    except BaseException:  # the child's own machinery broke (as a kernel can): die, loudly
        os._exit(70)
    os._exit(0)


def take_preload(args: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """The command line without ``--preload A,B``, and the modules it named."""
    if "--preload" not in args[:-1]:
        return args, ()
    at = args.index("--preload")
    return args[:at] + args[at + 2:], tuple(filter(None, args[at + 1].split(",")))


def main(argv: list[str] | None = None) -> None:
    """``python -m grader.engines.fork.server --fd N SCRATCH [--private-tmp] [--cuda] [--preload A,B]``."""
    args, preload = take_preload(list(sys.argv[1:] if argv is None else argv))
    private, cuda = "--private-tmp" in args, "--cuda" in args
    args = [a for a in args if a not in ("--private-tmp", "--cuda")]
    if len(args) != 3 or args[0] != "--fd" or not args[1].isdigit():
        raise SystemExit("usage: python -m grader.engines.fork.server --fd N SCRATCH [--private-tmp] [--cuda] [--preload A,B]")
    serve(int(args[1]), args[2], private, preload, cuda)


if __name__ == "__main__":
    main()
