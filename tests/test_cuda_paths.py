"""What `--device cuda` and a CUDA build of torch change in confinement, checked without a GPU.

Measured on a GPU machine (H200, torch 2.11+cu130; see docs/isolation.md, GPUs): under a 2 GiB
address-space cap a CUDA build of torch cannot even be imported, and a fork server that imported
``torch.utils.benchmark`` had started the CUDA driver, so that its children were refused CUDA.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from grader.engines.fork import server as forkserver
from grader.engines.isolation import sandbox
from grader.engines.isolation.sandbox import (
    CUDA_CONTEXT_MB,
    Sandbox,
    budget_mb,
    isolation_summary,
    process_cap,
)


def test_the_cap_is_on_the_address_space_only_where_torch_is_a_cpu_build(monkeypatch):
    monkeypatch.setattr(sandbox, "torch_has_cuda", lambda: False)
    assert process_cap(2048, "cpu") == (2048, False)
    assert process_cap(None, "cpu") == (None, False) and process_cap(0, "cuda") == (None, False)
    monkeypatch.setattr(sandbox, "torch_has_cuda", lambda: True)
    assert process_cap(2048, "cpu") == (2048, True)
    # a CUDA context's own host memory comes on top of what the learner may use, in the
    # per-process cap and in the submission's cgroup budget alike
    assert process_cap(2048, "cuda") == (2048 + CUDA_CONTEXT_MB, True)
    assert budget_mb(2048, "cuda") == 2048 + CUDA_CONTEXT_MB
    assert budget_mb(2048, "cpu") == 2048 and budget_mb(None, "cuda") is None


def test_a_cuda_build_is_recognised_by_its_libraries(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    pkg = tmp_path / "torch"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")

    def fake(name, *a, **k):
        return importlib.util.spec_from_file_location("torch", pkg / "__init__.py") if name == "torch" else real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    sandbox.torch_has_cuda.cache_clear()
    try:
        assert not sandbox.torch_has_cuda()
        sandbox.torch_has_cuda.cache_clear()
        (pkg / "lib" / "libtorch_cuda.so").write_bytes(b"")
        assert sandbox.torch_has_cuda()
    finally:
        sandbox.torch_has_cuda.cache_clear()


def test_the_launcher_caps_private_memory_when_told_and_the_address_space_otherwise(tmp_path):
    probe = "import resource as r; print(r.getrlimit(r.RLIMIT_AS)[0], r.getrlimit(r.RLIMIT_DATA)[0])"
    for data_only, expected in ((False, f"{3000 * 2**20} {resource.RLIM_INFINITY}"),
                                (True, f"{resource.RLIM_INFINITY} {3000 * 2**20}")):
        box = Sandbox(workdir=tmp_path, memory_mb=3000, isolate=False, data_only=data_only)
        cmd = box.wrap([sys.executable, "-c", probe])
        assert ("--data-only" in cmd) is data_only
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert out.stdout.split() == expected.split()


def test_a_memory_bomb_is_still_stopped_under_the_private_memory_cap(tmp_path):
    box = Sandbox(workdir=tmp_path, memory_mb=1000, isolate=False, data_only=True)
    code = "b = bytearray(2 * 2**30); print('allocated')"
    done = subprocess.run(box.wrap([sys.executable, "-c", code]), capture_output=True, text=True)
    assert done.returncode != 0 and "MemoryError" in done.stderr and "allocated" not in done.stdout


def test_the_isolation_line_names_the_cap_in_use(monkeypatch):
    monkeypatch.setattr(sandbox, "cgroup_mode", lambda: None)
    monkeypatch.setattr(sandbox, "torch_has_cuda", lambda: False)
    assert "(RLIMIT_AS)" in isolation_summary("cpu")
    line = isolation_summary("cuda")
    assert "RLIMIT_DATA" in line and "shared memory not counted" in line
    monkeypatch.setattr(sandbox, "gpu_devices", lambda device: ())
    assert "NO /dev/nvidia* node: CUDA unavailable" in isolation_summary("cuda")
    monkeypatch.setattr(sandbox, "gpu_devices", lambda device: ("/dev/nvidia0", "/dev/nvidiactl"))
    assert "GPU device nodes bound: /dev/nvidia0, /dev/nvidiactl" in isolation_summary("cuda")
    monkeypatch.setattr(sandbox, "torch_has_cuda", lambda: True)
    assert "CPU build" not in isolation_summary("cuda")
    monkeypatch.setattr(sandbox, "torch_has_cuda", lambda: False)
    assert "torch here is a CPU build: the notebooks run on the CPU" in isolation_summary("cuda")
    assert "CPU build" not in isolation_summary("cpu")


def test_a_server_whose_children_would_be_refused_cuda_says_why(monkeypatch):
    torch = pytest.importorskip("torch")
    assert forkserver.cuda_fork_problem() is None
    # what torch answers in a child forked after the driver started (the probe child inherits the patch)
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    assert "driver was started while preloading" in forkserver.cuda_fork_problem()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert "initialised while preloading" in forkserver.cuda_fork_problem()


def test_kernel_engine_workers_take_the_coordinators_findings_and_never_probe(monkeypatch):
    """Each of the kernel engine's worker processes used to probe bubblewrap (and cgroups) itself
    before its first kernel: eight at once with --jobs 8, each probe a bubblewrap and an
    interpreter, and a worker whose probe timed out on a busy machine (30 s) would have started its
    kernels without the sandbox the batch's isolation line promised. A worker now starts with the
    coordinator's answers."""
    from grader.engines.isolation import budget
    from grader.execute import dispatch

    def no_probe(*a, **k):
        raise AssertionError("a worker probed again")

    monkeypatch.setattr(sandbox.subprocess, "run", no_probe)
    monkeypatch.setattr(budget, "_cgroup_mode", no_probe)
    monkeypatch.setattr(sandbox, "_assumed_level", None)
    monkeypatch.setattr(budget, "_assumed_mode", budget._ASSUMED_NOTHING)
    import signal

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # the worker's Ctrl-C handler, not ours
    try:
        dispatch._worker_init("plain", None)
        assert sandbox.sandbox_level() == "plain" and sandbox.bubblewrap_works()
        assert budget.cgroup_mode() is None
        dispatch._worker_init("", "v1")
        assert sandbox.sandbox_level() == "" and budget.cgroup_mode() == "v1"
    finally:
        sandbox.sandbox_level.cache_clear()
        budget.cgroup_mode.cache_clear()
