"""`make gpu-check` (ci/gpu_check.py): its CPU mode on one chapter, end to end, and the parts a GPU
machine relies on (the plan for CUDA, the grade comparison, a step past its time) without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gpu_check
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_cpu_mode_checks_one_chapter_and_prints_one_summary(tmp_path):
    done = subprocess.run([sys.executable, "ci/gpu_check.py", "01", "--device", "cpu", "--fast", "--jobs", "2",
                           "--report-dir", str(tmp_path / "reports"), "--workdir", str(tmp_path / "work")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = done.stdout[done.stdout.index("\nstep"):].strip().splitlines()
    rows = {line.split("  ")[0].strip(): line.split() for line in table[1:]}
    assert list(rows) == ["notebooks", "samples", "grade fork cpu", "grade kernel cpu", "same grades", "tests (cpu)", "all"]
    assert all(row[-1] == "ok" or "ok" in row for row in rows.values()), table
    assert "2 executions, 0 failed" in done.stdout and "4 of 4 graded" in done.stdout
    assert "4 submissions, same grades in fork cpu, kernel cpu" in done.stdout and " passed" in done.stdout
    summary = json.loads((tmp_path / "reports" / "gpu-check" / "summary.json").read_text())
    assert summary["device"] == "cpu" and summary["fast"] is True
    assert [s["status"] for s in summary["steps"]] == ["ok"] * 6
    assert summary["wall_seconds"] < gpu_check.BUDGET
    assert (tmp_path / "reports" / "gpu-check" / "summary.md").read_text().startswith("# gpu-check on CPU")


def test_on_a_gpu_it_grades_with_both_engines_on_cuda_and_once_on_the_cpu(tmp_path):
    steps = gpu_check.plan(["01_tensors"], "cuda", False, 4, sys.executable, tmp_path, tmp_path, 4)
    names = [s.name for s in steps]
    assert names == ["notebooks", "samples", "grade fork cuda", "grade kernel cuda", "grade fork cpu", "same grades",
                     "tests (cuda)"]
    notebooks = steps[0].cmd
    assert notebooks[1] == "ci/run_notebooks.py" and "--fast" not in notebooks  # full size
    assert notebooks[notebooks.index("--device") + 1] == "cuda"
    kernel = steps[3].cmd
    assert kernel[kernel.index("--engine") + 1] == "kernel" and kernel[kernel.index("--device") + 1] == "cuda"
    assert steps[4].cmd[steps[4].cmd.index("--device") + 1] == "cpu"
    assert steps[-1].env == {"COURSE_DEVICE": "cuda"} and "tests/test_cuda_paths.py" in steps[-1].cmd


def test_grades_that_differ_between_runs_fail_the_check(tmp_path):
    def write(run: str, score: float) -> Path:
        folder = tmp_path / run / "results" / "alice"
        folder.mkdir(parents=True)
        (folder / "01_tensors.json").write_text(json.dumps({
            "student": "alice", "chapter": "01_tensors", "status": "graded", "score": score,
            "tests": [{"grade_id": "t1", "status": "passed" if score else "failed"}]}))
        return tmp_path / run

    runs = {"kernel cuda": write("a", 10.0), "fork cuda": write("b", 10.0)}
    assert gpu_check.compare(runs, "kernel cuda")() == (True, "1 submissions, same grades in kernel cuda, fork cuda")
    runs["fork cpu"] = write("c", 0.0)
    ok, detail = gpu_check.compare(runs, "kernel cuda")()
    assert not ok and "alice/01_tensors: kernel cuda ('graded', 10.0) vs fork cpu ('graded', 0.0)" in detail


def test_a_step_past_its_time_is_interrupted_and_everything_it_started_is_killed(tmp_path):
    marker = f"{time.time_ns() % 10**6 + 10**6}.5"
    # a child in a session of its own, as a kernel is: out of the step's process group
    step = gpu_check.Step("slow", [sys.executable, "-c", f"import subprocess, time; subprocess.Popen(['sleep', '{marker}'], "
                                                         "start_new_session=True); time.sleep(60)"], timeout=2)
    start = time.monotonic()
    gpu_check.run_step(step, time.monotonic() + 60, tmp_path)
    assert step.status == "timed out" and time.monotonic() - start < 20
    left = [p for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(p)]
    assert left == [], [_cmdline(p) for p in left]
    assert gpu_check.run_all([gpu_check.Step("late", ["true"]), gpu_check.Step("after", ["true"], needs=("late",))],
                             budget=1, logs=tmp_path) < 5  # nothing starts with under 5 s of the budget left


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_without_a_gpu_it_says_so_and_runs_the_cpu_mode(tmp_path, monkeypatch, capsys):
    planned = {}
    monkeypatch.setattr(gpu_check, "probe_device", lambda python: {"torch": "2.13.0+cpu", "cuda_build": None,
                                                                   "cuda": False, "name": None, "count": 0})
    monkeypatch.setattr(gpu_check, "plan", lambda chapters, device, fast, *a: planned.update(device=device, fast=fast) or [])
    monkeypatch.setattr(gpu_check, "run_all", lambda steps, budget, logs, serial=False: 0.0)
    monkeypatch.setattr(gpu_check, "table", lambda steps, wall, header: header)
    assert gpu_check.main(["01", "--report-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no GPU found (torch here is a CPU build, torch 2.13.0+cpu): running the CPU mode (--device cpu --fast)" in out
    assert planned == {"device": "cpu", "fast": True}
    assert gpu_check.main(["01", "--device", "cuda", "--report-dir", str(tmp_path)]) == 2
    assert "finds no GPU" in capsys.readouterr().err
