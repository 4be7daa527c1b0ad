"""Grading kernels are confined: private folders hidden, nothing outside writable, no network."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grader.engines.execution import ExecOptions
from grader.engines.isolation.budget import Budget, cgroup_mode, sweep_stale
from grader.engines.isolation.sandbox import (
    Sandbox,
    bubblewrap_works,
    bwrap_args,
    gpu_devices,
    isolation_summary,
    process_cap,
)
from grader.engines.kernel.engine import execute

pytestmark = pytest.mark.slow


def run_cells(sources, **options):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    ex = execute(nb, ExecOptions(cell_timeout=20, **options))
    assert ex.error is None, ex.error
    return [
        "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        + "".join(f"{o.ename}: {o.evalue}" for o in c.outputs if o.output_type == "error")
        for c in ex.nb.cells
    ]


def test_the_memory_cap_applies_without_a_sandbox_too():
    cap = "RLIMIT_DATA" if process_cap(1500, "cpu")[1] else "RLIMIT_AS"  # DATA where torch is a CUDA build
    (out,) = run_cells([f"import resource; print(resource.getrlimit(resource.{cap})[0] // 2**20)"], isolate=False, memory_mb=1500)
    assert out.strip() == "1500"


def test_with_device_cuda_a_kernel_gets_a_private_memory_cap_and_a_bomb_still_fails():
    from grader.engines.isolation.sandbox import CUDA_CONTEXT_MB

    size, bomb = run_cells(["import resource as r; print(r.getrlimit(r.RLIMIT_DATA)[0] // 2**20, r.getrlimit(r.RLIMIT_AS)[0])",
                            "b = bytearray(5 * 2**30)"], memory_mb=1536, device="cuda")
    assert size.split() == [str(1536 + CUDA_CONTEXT_MB), "-1"]
    assert bomb.startswith("MemoryError")


def test_a_kernel_prints_no_connection_banner_into_the_graders_output(capfd):
    (out,) = run_cells(["print('hello')"])
    assert out == "hello\n"
    printed = "".join(capfd.readouterr())
    assert "connect another client" not in printed and "Ctrl-C will not work" not in printed


def test_the_wrapped_command_names_the_limits_and_builds_its_root_from_what_it_needs(tmp_path):
    box = Sandbox(workdir=tmp_path / "w", runtime_dir=tmp_path / "r", hide=[tmp_path], memory_mb=100)
    cmd = box.wrap(["python", "-m", "ipykernel_launcher"])
    assert "grader.engines.isolation.confine" in cmd and cmd[-3:] == ["python", "-m", "ipykernel_launcher"]
    assert cmd[cmd.index("--memory-mb") + 1] == "100"
    if bubblewrap_works():
        bw = cmd[cmd.index("bwrap"):]
        for flag in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
                     "--die-with-parent", "--new-session"):
            assert flag in bw, flag
        assert bw[bw.index("--uid") + 1] != "0" and bw[bw.index("--cap-drop") + 1] == "ALL"
        binds = {bw[i + 2] for i, a in enumerate(bw) if a in ("--ro-bind", "--bind", "--ro-bind-try")}
        assert "/" not in binds
        repo = str(Path(__file__).resolve().parent.parent)
        assert repo not in binds and not any(b.startswith(repo + "/.git") or b.startswith(repo + "/solutions") for b in binds)
        assert {repo + "/grader", repo + "/course_utils"} <= binds
        assert bw[bw.index("/tmp") - 1] == "--tmpfs" and bw[bw.index("/tmp") - 3] == "--size"


@pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap cannot sandbox on this machine: " + isolation_summary())
def test_private_folders_are_hidden_and_the_rest_is_read_only(tmp_path):
    private = tmp_path / "course-work"
    private.mkdir()
    (private / "gradebook.db").write_text("secret grades")
    repo_file = Path(__file__).resolve().parent / "planted-by-a-kernel.txt"
    outs = run_cells(
        [
            f"import os; print(sorted(os.listdir({str(private)!r})))",
            f"open({str(repo_file)!r}, 'w').write('x')",
            f"open({str(tmp_path / 'planted.txt')!r}, 'w').write('x')",  # lands in the sandbox's own /tmp
            "open('mine.txt', 'w').write('ok'); print(open('mine.txt').read())",
        ],
        hide=[str(private)],
    )
    assert outs[0].strip() == "[]" or "FileNotFoundError" in outs[0]  # not even there
    assert ("Read-only file system" in outs[1] or "No such file" in outs[1]) and not repo_file.exists()
    assert not (tmp_path / "planted.txt").exists()
    assert outs[3].strip() == "ok"


@pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap cannot sandbox on this machine: " + isolation_summary())
def test_the_kernel_has_no_network():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    try:
        (out,) = run_cells([f"import socket\ns = socket.socket()\ns.settimeout(3)\ns.connect(('127.0.0.1', {port}))\nprint('connected')"])
    finally:
        server.close()
    assert "connected" not in out and "Error" in out


def test_no_sandbox_is_refused_without_the_unsafe_flag(tmp_path):
    from click.testing import CliRunner

    from grader.cli.app import cli

    (tmp_path / "subs").mkdir()
    done = CliRunner().invoke(cli, ["grade", str(tmp_path / "subs"), "--workdir", str(tmp_path / "w"), "--no-sandbox"])
    assert done.exit_code != 0 and "--unsafe-no-sandbox" in done.output


def test_the_gradebook_url_comes_from_a_file_or_the_environment_and_leaves_it(tmp_path, monkeypatch):
    from grader.cli.app import DB_URL_ENV, resolve_db_url

    monkeypatch.setenv(DB_URL_ENV, "postgresql://u:secret@db/grades")
    assert resolve_db_url(None, None) == "postgresql://u:secret@db/grades"
    assert DB_URL_ENV not in __import__("os").environ  # nothing started later inherits it
    url_file = tmp_path / "db-url"
    url_file.write_text("postgresql://u:other@db/grades\n")
    assert resolve_db_url(None, url_file) == "postgresql://u:other@db/grades"
    assert resolve_db_url("sqlite:///x.db", None) == "sqlite:///x.db"


def test_the_isolation_line_says_what_holds():
    line = isolation_summary()
    if bubblewrap_works():
        assert "pid" in line and "user" in line and "uid 1000" in line and "no keyrings" in line
    else:
        assert line.startswith("NO sandbox")
    assert ("cgroup v" in line) or ("NO cgroup" in line)


@pytest.mark.skipif(not cgroup_mode(), reason="no writable cgroup hierarchy here")
def test_budgets_left_by_a_killed_grader_are_swept_and_live_ones_kept():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale, live = Budget(64), Budget(64)
    for budget, pid in ((stale, dead.pid), (live, os.getpid())):  # rename: as if made by that pid
        renamed = []
        for d in budget.dirs:
            new = os.path.join(os.path.dirname(d), f"course-{pid}-{secrets.token_hex(4)}")
            os.rename(d, new)
            renamed.append(new)
        budget.dirs = renamed
    kept = list(live.dirs)
    try:
        assert sweep_stale(cgroup_mode()) >= len(stale.dirs)
        assert not any(os.path.exists(d) for d in stale.dirs)
        assert all(os.path.exists(d) for d in kept)
    finally:
        stale.close()
        live.close()


def test_gpu_device_nodes_are_bound_only_for_cuda_and_before_dev_turns_read_only(tmp_path, monkeypatch):
    assert gpu_devices("cpu") == ()
    box = Sandbox(workdir=tmp_path, devices=("/dev/nvidia0", "/dev/nvidiactl"))
    args = bwrap_args(box.workdir, devices=box.devices)
    binds = [args[i + 1] for i, a in enumerate(args) if a == "--dev-bind-try"]
    assert binds == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert args.index("--dev-bind-try") < args.index("--remount-ro")  # the first remount is /dev's
    assert "--dev-bind-try" not in bwrap_args(box.workdir)


@pytest.mark.skipif(not bubblewrap_works() or not os.path.exists("/dev/kmsg"),
                    reason="needs bubblewrap and a device node outside bubblewrap's minimal /dev")
def test_a_bound_device_node_is_there_and_others_are_not(tmp_path):
    code = [sys.executable, "-c", "import os; print(os.path.exists('/dev/kmsg'))"]
    with_node = subprocess.run(Sandbox(workdir=tmp_path, devices=("/dev/kmsg",), memory_mb=None).wrap(code),
                               capture_output=True, text=True, timeout=60)
    without = subprocess.run(Sandbox(workdir=tmp_path, memory_mb=None).wrap(code), capture_output=True, text=True,
                             timeout=60)
    assert (with_node.stdout.strip(), without.stdout.strip()) == ("True", "False"), (with_node.stderr, without.stderr)


# --- where no cgroup can be had (the GPU machines): the processes of a submission together --------

@pytest.fixture
def no_cgroup(monkeypatch):
    """This machine as one without a cgroup: every engine takes the no-cgroup path."""
    from grader.engines.isolation import budget

    monkeypatch.setattr(budget, "_assumed_mode", None)
    budget.cgroup_mode.cache_clear()
    assert budget.cgroup_mode() is None
    yield
    budget.cgroup_mode.cache_clear()


def _leftovers(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and "pytest" not in cmdline:
                found.append(int(name))
    return found


def _execute(engine: str, sources: list[str], **options):
    from grader.engines.fork import engine as fork

    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    run = fork.execute if engine == "fork" else execute
    ex = run(nb, ExecOptions(cell_timeout=40, **options))
    assert ex.error is None, ex.error
    texts = ["".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
             + "".join(f"{o.ename}: {o.evalue}" for o in c.outputs if o.output_type == "error") for c in ex.nb.cells]
    return ex, texts


@pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap cannot sandbox on this machine: " + isolation_summary())
def test_without_a_cgroup_a_submission_that_starts_too_many_processes_is_killed_whole(no_cgroup):
    from grader.engines.isolation.budget import PIDS_MAX

    marker = f"{secrets.randbelow(10**6) + 10**6}.25"  # sleep's argument: ours alone
    ex, texts = _execute("kernel", [
        f"import subprocess\nprocs = [subprocess.Popen(['sleep', '{marker}']) for _ in range({PIDS_MAX + 60})]\n"
        "print('all started')\nimport time; time.sleep(30)",
        "print('the next cell ran')",
    ])
    # as root (this machine's grader) RLIMIT_NPROC does not hold and the watch kills the kernel's
    # whole sandbox; as another user the limit refuses the fork first
    # (the watch looks twice a second: the spawns may all be done before it sees them, so "all
    # started" may be printed; what holds is that the cell is stopped and nothing of it survives)
    assert 0 in ex.died or "Resource temporarily unavailable" in texts[0], (ex, texts)
    assert texts[1] == "the next cell ran\n"
    assert _leftovers(f"sleep {marker}") == []


@pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap cannot sandbox on this machine: " + isolation_summary())
@pytest.mark.parametrize("engine", ["kernel", "fork"])
def test_without_a_cgroup_memory_spread_over_processes_is_budgeted_together(no_cgroup, engine):
    # four processes of 600 MiB each: every one under the 1536 MiB cap of a process, together over it
    marker = f"course_hog_{secrets.token_hex(4)}"
    hog = f"import time; {marker} = b'x' * (600 * 2**20); time.sleep(60)"
    ex, texts = _execute(engine, [
        f"import subprocess, sys, time\nprocs = [subprocess.Popen([sys.executable, '-c', {hog!r}]) for _ in range(4)]\n"
        "time.sleep(30)\nprint('all alive')",
        "print('the next cell ran')",
    ], memory_mb=1536)
    assert 0 in ex.died, (ex, texts)
    assert "all alive" not in texts[0]
    assert texts[1] == "the next cell ran\n"
    assert _leftovers(marker) == []


def test_the_tree_watch_sees_every_process_below_its_root_and_kills_them_all():
    from grader.engines.isolation.treewatch import TreeWatch, descendants

    # a shell with three sleeping children, one of which has a child of its own
    root = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & sh -c 'sleep 60 & wait' & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(descendants(root.pid)) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(descendants(root.pid)) == 5
        watch = TreeWatch(root.pid, memory_mb=4096, tasks=100)
        assert watch.check() is None and 0 < watch.peak_memory < 4096 * 2**20
        kills = []
        watch = TreeWatch(root.pid, memory_mb=None, tasks=4, interval=0.05, on_kill=kills.append).start()
        root.wait(timeout=10)
        watch.stop()
        assert kills and "5 processes and threads, over the cap of 4" in kills[0]
        assert descendants(root.pid) == []
    finally:
        root.kill()
        root.wait()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not bubblewrap_works(),
                    reason="needs root, setpriv and bubblewrap")
def test_rlimit_nproc_counts_the_sandboxs_own_processes_except_for_root():
    """What the kernel engine's ``--nproc`` relies on: set inside bubblewrap's user namespace,
    RLIMIT_NPROC counts that sandbox's processes (not the host user's others), for any host user
    but root, whose processes Linux never limits so (the sandbox's uid 1000 is the host's root when
    the grader runs as root)."""
    probe = ("import os, time\nn = 0\nfor _ in range(40):\n    try:\n        pid = os.fork()\n"
             "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n"
             "    n += 1\nprint(n)\n")
    bwrap = ["bwrap", "--unshare-user", "--uid", "1000", "--gid", "1000", "--unshare-pid", "--ro-bind", "/", "/",
             "--dev", "/dev", "--proc", "/proc", "--chdir", "/", "prlimit", "--nproc=20:20", "/usr/bin/python3", "-c", probe]
    others = [subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "sleep", "5"])
              for _ in range(30)]  # the same host user's processes elsewhere: not counted
    try:
        as_nobody = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", *bwrap],
                                   capture_output=True, text=True, timeout=60)
        as_root = subprocess.run(bwrap, capture_output=True, text=True, timeout=60)
    finally:
        for p in others:
            p.kill()
            p.wait()
    assert 10 < int(as_nobody.stdout) < 20, as_nobody.stderr
    assert int(as_root.stdout) == 40, as_root.stderr


def test_a_sandboxed_kernel_caps_its_processes_inside_the_sandbox(tmp_path, monkeypatch):
    from grader.engines.isolation import confine
    from grader.engines.kernel.client import SandboxedKernelManager

    km = SandboxedKernelManager(kernel_name="python3")
    km.sandbox = Sandbox(workdir=tmp_path, memory_mb=None)
    monkeypatch.setattr(Sandbox, "sandboxed", lambda self: True)
    cmd = km.format_kernel_cmd()
    assert cmd[cmd.index("--kernel") + 1: cmd.index("--kernel") + 3] == ["--nproc", "256"]
    monkeypatch.setattr(Sandbox, "sandboxed", lambda self: False)
    cmd = km.format_kernel_cmd()
    assert "--nproc" not in cmd  # outside a user namespace of its own it would count the host user's processes
    done = subprocess.run([sys.executable, "-c", "from grader.engines.isolation.confine import cap_processes; cap_processes(77); "
                           "import resource; print(resource.getrlimit(resource.RLIMIT_NPROC))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "(77, 77)" and confine.cap_processes


def test_a_probe_started_early_answers_once_and_a_refused_batch_leaves_none_behind(monkeypatch):
    """``course grade`` probes bubblewrap while it checks: the first question takes that answer
    (no second probe); a batch refused meanwhile waits for its probe, and what no one took is
    dropped, so a later question probes afresh."""
    from grader.engines.isolation import ahead
    from grader.engines.isolation import sandbox as mod

    calls: list[int] = []
    monkeypatch.setattr(mod, "probe_level", lambda: calls.append(1) or (time.sleep(0.2), "plain")[1])
    mod.sandbox_level.cache_clear()
    try:
        with ahead.probing(True, mod.probe_level):
            assert mod.sandbox_level() == "plain" and mod.sandbox_level() == "plain"
        assert calls == [1]
        mod.sandbox_level.cache_clear()
        with pytest.raises(RuntimeError), ahead.probing(True, mod.probe_level):
            raise RuntimeError("refused")
        assert calls == [1, 1]
        assert not [t for t in threading.enumerate() if t.name == "bwrap-probe"]
        assert ahead.take() is None
    finally:
        mod.sandbox_level.cache_clear()
