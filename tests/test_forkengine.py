"""The fork engine: outputs as a kernel sends them, one clean child per submission, a server that holds nothing."""

from __future__ import annotations

import dataclasses
import os
import re
import secrets

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grader.engines.execution import ExecOptions
from grader.engines.fork import engine as forkengine
from grader.engines.fork import pool as forkpool
from grader.engines.fork import start as forkstart
from grader.engines.fork.child import _pidfd_pid
from grader.engines.isolation.sandbox import bubblewrap_works, process_cap
from grader.engines.kernel import engine as kernel_engine

pytestmark = pytest.mark.slow

OPTIONS = ExecOptions(cell_timeout=3)
#: the limit a child's memory cap is set on: RLIMIT_DATA where torch is a CUDA build (a GPU runner)
CAP = "RLIMIT_DATA" if process_cap(OPTIONS.memory_mb, OPTIONS.device)[1] else "RLIMIT_AS"


def notebook(*sources, tests=()):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i in tests:  # nbgrader test cells: the guard is asked before each
        nb.cells[i].metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": f"t{i}", "points": 1,
                                            "locked": True, "schema_version": 3}
    return nb


def run(*sources, engine=forkengine.execute, options=OPTIONS, tests=()):
    return engine(notebook(*sources, tests=tests), options)


def text(cell) -> str:
    """What a cell showed: streams, results and errors, in order, in one string. Consecutive
    chunks of one stream read as one, as a notebook shows them: a kernel flushes a stream on a
    timer, so one print can reach it in two messages (``%xmode``'s line did, on a busy machine)."""
    parts: list[list[str]] = []  # [label, text]
    for o in cell.outputs:
        if o.output_type == "stream":
            label, shown = f"[{o.name}]", o.text
        elif o.output_type in ("execute_result", "display_data"):
            label, shown = f"[{o.output_type}]", o.data.get("text/plain", "")
        elif o.output_type == "error":
            label, shown = "[error]", f"{o.ename}: {o.evalue}"
        else:
            continue
        if o.output_type == "stream" and parts and parts[-1][0] == label:
            parts[-1][1] += shown
        else:
            parts.append([label, shown])
    return "".join(label + shown for label, shown in parts)


OUTPUT_CELLS = (
    "print('out'); import sys; print('err', file=sys.stderr)",
    "6 * 7",
    "from IPython.display import display, Markdown\ndisplay(Markdown('*hi*')); x = 1",
    "x = 2;",
    "raise ValueError('bad value')",
    "def oops(:\n    pass",
    "import os\nos.write(1, b'straight to fd 1\\n'); None",
    "input('name? ')",
    "import sys\nsys.exit(3)",
    "import torch\ntorch.tensor([1.5, 2.0])",
    # IPython's own syntax and top-level await, which the child's shortcuts must leave to IPython
    "import asyncio\nawait asyncio.sleep(0)\n'awaited'",
    "if True:\n        a = 1\n    b = 2",
    "%xmode Plain",
    "mode = %xmode Context\nmode is None",
)


def test_outputs_match_the_kernel_engine_cell_by_cell():
    fork = run(*OUTPUT_CELLS)
    kernel = run(*OUTPUT_CELLS, engine=kernel_engine.execute)
    assert [text(c) for c in fork.nb.cells] == [text(c) for c in kernel.nb.cells]
    assert text(fork.nb.cells[4]) == "[error]ValueError: bad value"
    assert fork.nb.cells[1].outputs[0].execution_count == fork.nb.cells[1].execution_count
    assert any("bad value" in line for line in fork.nb.cells[4].outputs[0].traceback)


def test_a_print_flushed_in_chunks_is_one_output_on_both_engines():
    """A line printed in pieces, each flushed (a progress line, or a kernel's timed flush landing
    mid-print), is one stream output, as a notebook shows it: a page draws it on one line."""
    chunked = ("import sys, time\nfor i in range(3):\n    print(i, end=' '); sys.stdout.flush(); time.sleep(0.05)\n"
               "print('done')")
    for engine in (forkengine.execute, kernel_engine.execute):
        outputs = run(chunked, engine=engine).nb.cells[0].outputs
        assert [(o.output_type, o.name, o.text) for o in outputs] == [("stream", "stdout", "0 1 2 done\n")]


def test_the_child_gets_the_kernel_environment_and_nothing_else(monkeypatch):
    token = secrets.token_hex(8)
    monkeypatch.setenv("COURSE_TEST_SECRET", token)
    ex = run(
        "import os; sorted(k for k in os.environ if 'SECRET' in k)",
        "open('/proc/self/environ', 'rb').read().count(b'COURSE_TEST_SECRET')",
        "os.environ['COURSE_GRADING'], os.listdir('.'), os.getcwd() == os.environ['HOME']",
        f"import resource; resource.getrlimit(resource.{CAP})[0] // 2**20",
    )
    assert [text(c) for c in ex.nb.cells] == [
        "[execute_result][]", "[execute_result]0", "[execute_result]('1', [], True)",
        f"[execute_result]{OPTIONS.memory_mb}",
    ]


def test_each_submission_gets_a_fresh_child_that_sees_nothing_of_the_last():
    leave = run(
        "import course_utils, os, pathlib\ncourse_utils.LEFT_BEHIND = 'alice'\n"
        "pathlib.Path('answer.txt').write_text('alice')\npathlib.Path('/tmp/answer.txt').write_text('alice')\n"
        "os.getpid()",
    )
    look = run(
        "import course_utils, os\n"
        "(getattr(course_utils, 'LEFT_BEHIND', None), os.listdir('.'), os.path.exists('/tmp/answer.txt'), os.getpid())",
    )
    pid = int(text(leave.nb.cells[0]).split("]")[1])
    seen = text(look.nb.cells[0])
    assert seen.startswith("[execute_result](None, [], ")
    if bubblewrap_works():  # the server's /tmp is private and emptied after every child
        assert "False" in seen
    assert str(pid) not in seen


def _server_pid(server) -> int:
    if isinstance(server, forkstart.ZygoteServer):  # forked from the zygote; nested, its child serves
        pid = _pidfd_pid(server.pidfd)
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = f.read().split()
        return int(children[0]) if children else pid
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"grader.engines.fork.server" in argv and server.scratch.encode() in argv and b"bwrap" not in argv[0] \
                and b"grader.engines.isolation.confine" not in argv:
            return int(entry)
    raise AssertionError("no fork server process found")


def _memory_contains(pid: int, needle: bytes) -> bool:
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            if not m or "[vvar" in line or "[vsyscall" in line:
                continue
            start, end = int(m.group(1), 16), int(m.group(2), 16)
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
            except (OSError, ValueError, OverflowError):
                continue
    return False


def test_a_server_imports_what_the_batch_preloads_before_the_first_cell():
    probe = "import sys\n'xml.dom.minidom' in sys.modules"
    preloaded = run(probe, options=dataclasses.replace(OPTIONS, preload=["xml.dom.minidom"]))
    assert text(preloaded.nb.cells[0]) == "[execute_result]True"
    assert text(run(probe).nb.cells[0]) == "[execute_result]False"


def test_the_warm_server_never_holds_a_submission():
    token = "SUBMISSION-" + secrets.token_hex(12)
    ex = run(f"secret = {token!r}\nlen(secret)")
    assert text(ex.nb.cells[0]) == f"[execute_result]{len(token)}"
    with forkpool.lease(OPTIONS) as lease:
        pid = _server_pid(lease.server)
        try:
            found = _memory_contains(pid, token.encode())
        except PermissionError:
            pytest.skip("cannot read another process's memory here (ptrace restrictions)")
    assert not found, "the server's memory holds a submission's code"


def test_a_stuck_cell_is_stopped_and_a_dead_child_replaced_with_earlier_cells_replayed():
    ex = run(
        "x = 41",
        "import time\nwhile True:\n    try:\n        time.sleep(100)\n    except KeyboardInterrupt:\n        pass",
        "x += 1",
        "import os; os._exit(1)",
        "x",
    )
    assert ex.timed_out == [1] and ex.died == [3] and ex.restarts == 2
    assert ex.nb.cells[1].outputs[-1].ename == kernel_engine.TIMEOUT_ENAME
    assert text(ex.nb.cells[4]) == "[execute_result]42"


def test_an_interruptible_loop_times_out_without_a_restart():
    ex = run("n = 0\nwhile True:\n    n += 1", "n > 0")
    assert ex.timed_out == [0] and ex.restarts == 0
    assert text(ex.nb.cells[1]) == "[execute_result]True"


def test_the_guard_is_asked_before_every_test_cell_and_the_cell_runs_anyway():
    """What the guard finds is a note for a reviewer: the test cell still runs and is judged."""
    ex = run(
        "import importlib\nvars(importlib.import_module('torch'))['allclose'] = lambda *a, **k: True",
        "assert True",
        tests=(1,),
    )
    assert ex.tampered == {1: "replaced torch.allclose"}
    assert ex.nb.cells[1].execution_count


def test_servers_the_grader_stops_mid_submission_start_no_new_one_and_log_nothing(caplog, monkeypatch):
    """Ctrl-C stops every server while workers are starting children: a worker must not take
    that for a crash (a warning printed after the grader's last line, a new server started)."""
    started = []
    new_server, spawn = forkpool._new_server, forkpool.Server.spawn

    def stopped_while_asked(server, conn, timeout):  # the grader's shutdown lands as a child is asked for
        server.wait_ready()
        forkpool.shutdown()
        return spawn(server, conn, timeout)

    monkeypatch.setattr(forkpool, "_new_server", lambda options: started.append(options) or new_server(options))
    monkeypatch.setattr(forkpool.Server, "spawn", stopped_while_asked)
    with caplog.at_level("WARNING"):
        ex = run("x = 1", "x + 1")
    assert "stopped" in (ex.error or "") and not ex.died and ex.restarts == 0
    assert len(started) <= 1, "a server was started after the grader stopped them"
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == []


@pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap cannot sandbox on this machine")
def test_a_sandboxed_child_has_no_network_and_cannot_see_hidden_folders(tmp_path):
    private = tmp_path / "gradebook-folder"
    private.mkdir()
    (private / "gradebook.db").write_text("grades")
    options = ExecOptions(cell_timeout=5, hide=[str(private)])
    ex = run(
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2); net = 'online'\n"
        "except OSError:\n    net = 'offline'\nnet",
        f"import os; os.listdir({str(private)!r})",
        "open('/usr/new-file', 'w')",
        options=options,
    )
    assert text(ex.nb.cells[0]) == "[execute_result]'offline'"
    assert text(ex.nb.cells[1]) in ("[execute_result][]", f"[error]FileNotFoundError: [Errno 2] No such file or directory: {str(private)!r}")
    assert "Read-only file system" in text(ex.nb.cells[2])


def test_a_submission_that_kills_the_server_loses_that_cell_only():
    # SIGTERM: a server that is its pid namespace's init (forked from a zygote) gets no SIGKILL
    # from inside it, but it exits on SIGTERM, as every server does
    ex = run("x = 1", "import os, signal, time\nos.kill(os.getppid(), signal.SIGTERM)\ntime.sleep(2)", "x + 1")
    assert ex.died == [1] and ex.restarts == 1
    assert text(ex.nb.cells[2]) == "[execute_result]2"
    assert text(run("6 * 7").nb.cells[0]) == "[execute_result]42"


@pytest.mark.skipif(not bubblewrap_works(), reason="bubblewrap cannot sandbox on this machine")
def test_a_sandboxed_child_cannot_undo_the_sandbox_or_reach_the_server(tmp_path):
    private = tmp_path / "solutions"
    private.mkdir()
    (private / "answers.txt").write_text("the answers")
    options = ExecOptions(cell_timeout=5, hide=[str(private)])
    ex = run(
        f"import subprocess\nsubprocess.run(['umount', {str(private)!r}], capture_output=True).returncode != 0 and "
        "subprocess.run(['mount', '-o', 'remount,rw', '/'], capture_output=True).returncode != 0",
        f"import os\nos.listdir({str(private)!r})",
        "try:\n    open(f'/proc/{os.getppid()}/mem', 'rb'); seen = 'server memory open'\n"
        "except OSError as exc:\n    seen = type(exc).__name__\nseen",
        options=options,
    )
    assert text(ex.nb.cells[0]) == "[execute_result]True" and text(ex.nb.cells[2]) == "[execute_result]'PermissionError'"
    assert text(ex.nb.cells[1]) in ("[execute_result][]", f"[error]FileNotFoundError: [Errno 2] No such file or directory: {str(private)!r}")


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker`` (a child's pids are its namespace's)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_nothing_a_child_starts_outlives_its_submission():
    marker = "outlive-" + secrets.token_hex(6)
    ex = run(
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}], start_new_session=True)\n"
        "p.pid > 0",
    )
    assert text(ex.nb.cells[0]) == "[execute_result]True"
    run("1")  # the next submission on the same server starts only after the cleanup
    left = [p for p in processes_with(marker) if open(f"/proc/{p}/stat").read().split()[2] != "Z"]
    assert not left


def test_a_test_cells_error_has_a_plain_traceback_and_the_learners_mode_is_kept():
    """A test cell's traceback is formatted in IPython's Plain mode (frames, lines, message); the
    learner's cells keep the default Context mode, and a mode the learner chose (%xmode) stays theirs."""
    failing = "def f():\n    raise ValueError('bad value')\nf()"
    ex = run(failing, failing, "%xmode Minimal", failing, failing, tests=(1, 3))
    shown = [re.sub(r"\x1b\[[0-9;]*m", "", "".join(ex.nb.cells[i].outputs[-1].traceback)) for i in (0, 1, 3, 4)]
    learner, test, test_after, learner_after = shown
    assert learner.startswith("-----") and "----> 2     raise ValueError('bad value')" in learner  # Context
    assert test.startswith("Traceback (most recent call last):\n") and "    raise ValueError('bad value')\n" in test
    assert test_after.startswith("Traceback (most recent call last):\n")  # Plain, whatever the learner chose
    assert learner_after.strip() == "ValueError: bad value"  # the learner's Minimal, kept after the test
    assert all(ex.nb.cells[i].outputs[-1].evalue == "bad value" for i in (0, 1, 3, 4))


def test_for_cuda_a_child_gets_a_private_memory_cap_and_an_ordinary_cuda_check():
    """`--device cuda`: a CUDA context cannot live under an address-space cap, and the server's
    NVML-based availability check (which keeps it from starting the driver) is not the child's."""
    options = dataclasses.replace(OPTIONS, device="cuda")
    ex = run(
        "import resource as r; r.getrlimit(r.RLIMIT_DATA)[0] // 2**20, r.getrlimit(r.RLIMIT_AS)[0]",
        "import os; os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK')",
        options=options,
    )
    from grader.engines.isolation.sandbox import CUDA_CONTEXT_MB

    assert [text(c) for c in ex.nb.cells] == [f"[execute_result]({OPTIONS.memory_mb + CUDA_CONTEXT_MB}, -1)", ""]


def test_device_cuda_gives_a_submission_the_gpu_exactly_where_the_machine_has_one():
    """On the GPU runner both engines must hand a submission a working GPU (a CUDA context under
    the memory cap, in a child of a server that never started the driver); on a machine without
    one, CUDA is unavailable there and the notebooks' fallback runs. Both paths assert."""
    from grader.engines.isolation.sandbox import gpu_devices, torch_has_cuda

    has_gpu = bool(gpu_devices("cuda")) and torch_has_cuda()  # decided here without starting CUDA
    cell = ("import torch\nok = torch.cuda.is_available()\n"
            "x = torch.ones(64, 64, device='cuda') if ok else None\n"
            "print(ok, float((x @ x).sum()) if ok else '-', torch.cuda.is_initialized())")
    options = dataclasses.replace(OPTIONS, device="cuda", cell_timeout=60)
    for engine in (forkengine.execute, kernel_engine.execute):
        ex = run(cell, engine=engine, options=options)
        # every entry of ones(64, 64) @ ones(64, 64) is 64, so the sum is 64 ** 3 = 262144
        assert text(ex.nb.cells[0]) == ("[stdout]True 262144.0 True\n" if has_gpu else "[stdout]False - False\n"), engine


def test_what_learner_code_writes_to_its_file_descriptors_reaches_its_cell_and_never_the_graders_output(capfd):
    """os.write, a subprocess and sys.__stderr__ bypass Python's streams: both engines put their text
    in the cell, and none of it reaches the grader's own stdout or stderr (the instructor's terminal,
    a CI log: escape sequences, forged progress lines, workflow commands, gigabytes)."""
    cell = ("import os, subprocess, sys\nos.write(1, b'fd-one\\n'); os.write(2, b'\\x1b]0;fd-two\\x07\\n')\n"
            "subprocess.run(['sh', '-c', 'echo from-sh; echo ::error::forged >&2'])\n"
            "sys.__stderr__.write('dunder\\n'); sys.__stderr__.flush()")
    for engine in (forkengine.execute, kernel_engine.execute):
        ex = run(cell, engine=engine)
        shown = text(ex.nb.cells[0])
        assert all(s in shown for s in ("fd-one", "fd-two", "from-sh", "::error::forged", "dunder")), (engine, shown)
    leaked = "".join(capfd.readouterr())
    for s in ("fd-one", "fd-two", "from-sh", "forged", "dunder"):
        assert s not in leaked, s


def test_a_chapter_01_submission_is_one_request_per_child_not_one_per_cell(monkeypatch):
    """The coordinator sends a child its start and one run of cells; the per-cell results come back
    in the child's ledger, read once the run ends."""
    from grader import samples
    from grader.engines.fork import child as forkchild

    nb = samples.make_submission("01_tensors", dict.fromkeys(samples.answer_ids("01_tensors"), samples.SOLUTION))
    code_cells = sum(c.cell_type == "code" for c in nb.cells)
    sent, real_send = [], forkchild.send
    monkeypatch.setattr(forkchild, "send", lambda sock, message: (sent.append(message), real_send(sock, message)))
    ex = forkengine.execute(nb, dataclasses.replace(OPTIONS, cell_timeout=60))
    assert not (ex.error or ex.died or ex.timed_out or ex.restarts)
    assert code_cells > 20 and len(sent) == 2, (code_cells, [m.get("op") for m in sent])
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")


def test_each_cell_of_a_run_has_its_own_clock():
    """Three cells of 2 s each under a 3 s limit, sent in one run: none is stopped."""
    ex = run(*["import time\ntime.sleep(2)"] * 3, "'end'")
    assert ex.timed_out == [] and ex.restarts == 0
    assert text(ex.nb.cells[3]) == "[execute_result]'end'"


def test_a_child_that_lies_about_its_cell_gains_at_most_a_cell_and_costs_only_its_own_cell():
    """Learner code that writes a later cell's progress into the ledger, then hangs, is stopped
    anyway (the interrupt aims at the cell it claims, which it is not); the cells after it run."""
    liar = (
        "import os, struct, time\n"
        "fd = next(int(f) for f in os.listdir('/proc/self/fd')\n"
        "          if 'course-ledger' in os.readlink(f'/proc/self/fd/{f}'))\n"
        "for k in (1, 2):\n"
        "    os.pwrite(fd, struct.pack('<iiq', k, 2, time.monotonic_ns()), 0)\n"
        "    time.sleep(2)\n"
        "while True:\n"
        "    try:\n"
        "        time.sleep(100)\n"
        "    except KeyboardInterrupt:\n"
        "        pass"
    )
    ex = run("x = 1", liar, "x + 1", "x + 2")
    assert ex.timed_out == [1] and ex.died == [] and ex.restarts == 1
    assert [text(c) for c in ex.nb.cells[2:]] == ["[execute_result]2", "[execute_result]3"]
