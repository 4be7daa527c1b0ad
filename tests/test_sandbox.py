"""Grading kernels are confined: private folders hidden, nothing outside writable, no network."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grader.execute import ExecOptions, execute
from grader.sandbox import Sandbox, bubblewrap_works, isolation_summary

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
    (out,) = run_cells(["import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)"], isolate=False, memory_mb=1500)
    assert out.strip() == "1500"


def test_the_wrapped_command_names_the_limits_and_hides_private_folders(tmp_path):
    box = Sandbox(workdir=tmp_path / "w", runtime_dir=tmp_path / "r", hide=[tmp_path], memory_mb=100)
    cmd = box.wrap(["python", "-m", "ipykernel_launcher"])
    assert "grader.limits" in cmd and cmd[-3:] == ["python", "-m", "ipykernel_launcher"]
    assert cmd[cmd.index("--memory-mb") + 1] == "100"
    if bubblewrap_works():
        assert cmd[0] == "bwrap" and "--unshare-net" in cmd
        hidden = str(tmp_path.resolve())
        assert cmd[cmd.index(hidden) - 1] == "--tmpfs"


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
    assert outs[0].strip() == "[]"
    assert "Read-only file system" in outs[1] and not repo_file.exists()
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
