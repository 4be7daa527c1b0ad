"""One command that checks a GPU machine: ``python ci/gpu_check.py`` (``make gpu-check``).

On a machine with a GPU (no network needed: everything comes from the checkout and its venv):

* every chapter at full size on CUDA (``ci/run_notebooks.py --device cuda``): the solutions pass,
  the releases fail each of their tests;
* the sample class (``course samples``) graded on CUDA with both engines, and on the CPU with the
  fork engine: the three must give the same grades (status, score, each test's status);
* the tests of what CUDA changes in confinement (``tests/test_cuda_paths.py``) and of the timeline
  drawn from CUDA events (``tests/test_timeline.py``), with
  ``COURSE_DEVICE=cuda``.

The steps run at once where they can (the gradings beside the notebooks; ``--serial`` runs one at a
time), each under its own timeout and all under one budget (8 minutes by default); a step past its
time is interrupted as Ctrl-C would (a grading records what it finished), then killed with every
process it started. It ends with one table -- step, status, seconds, what it found -- also written
to ``REPORT_DIR/gpu-check/summary.json`` and ``summary.md``, each step's output beside them; the exit
status is 1 when a step failed, 2 when the command line is wrong.

Without a GPU it says so and runs its CPU mode (``--device cpu --fast``: the same steps on the CPU,
the two engines compared with each other), which ``make test`` exercises on one chapter
(``tests/test_gpu_check.py``).

    python ci/gpu_check.py [CHAPTER ...] [--device auto|cuda|cpu] [--fast] [--jobs N]
                           [--budget SECONDS] [--serial] [--workdir DIR] [--report-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 480  # seconds for the whole check
OK, FAILED, TIMED_OUT, SKIPPED = "ok", "FAILED", "timed out", "skipped"

PROBE = """
import json, torch
cuda = torch.cuda.is_available()
print(json.dumps({"torch": torch.__version__, "cuda_build": torch.version.cuda, "cuda": cuda,
                  "name": torch.cuda.get_device_name(0) if cuda else None,
                  "count": torch.cuda.device_count() if cuda else 0}))
"""


@dataclass
class Step:
    """One step: a command (or a function of the steps before it), its timeout and what it needs."""

    name: str
    cmd: list[str] | None = None
    timeout: float = 300.0
    needs: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    #: reads what the step left and says what it found: (ok, detail)
    judge: Callable[[Step], tuple[bool, str]] | None = None
    #: a step run in this process instead of a command: (ok, detail)
    func: Callable[[], tuple[bool, str]] | None = None
    status: str = "pending"
    seconds: float = 0.0
    detail: str = ""
    log: str = ""


# -- running a step --------------------------------------------------------------------------

def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a kernel a grading started sits in a session of its own)."""
    sys.path.insert(0, str(ROOT))
    try:
        from grader.engines.isolation.treewatch import descendants
    finally:
        sys.path.pop(0)
    return descendants(pid)


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Interrupt the step as Ctrl-C does (its process group), then kill whatever is left of it."""
    below = _tree(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except OSError:
        pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    left = set(below) | set(_tree(proc.pid))
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    deadline = time.monotonic() + 5
    while left and time.monotonic() < deadline:  # the killed ones that are not our children: until gone
        left = {pid for pid in left if _running(pid)}
        time.sleep(0.02)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def run_step(step: Step, deadline: float, logs: Path) -> None:
    """Run ``step`` within its timeout and before ``deadline``; sets its status, time and detail."""
    left = deadline - time.monotonic()
    if left < 5:
        step.status, step.detail = SKIPPED, "no time left in the check's budget"
        return
    start = time.monotonic()
    try:
        if step.func is not None:
            ok, step.detail = step.func()
            step.status = OK if ok else FAILED
            return
        step.log = str(logs / (step.name.replace(" ", "_").replace("/", "-") + ".log"))
        env = {**os.environ, **step.env}
        with open(step.log, "wb") as out:
            proc = subprocess.Popen(step.cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
            limit = min(step.timeout, left)
            try:
                code = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                _stop(proc)
                step.status = TIMED_OUT
                step.detail = f"stopped after {limit:.0f} s" + (" (the check's budget)" if limit < step.timeout else "")
                return
        ok, detail = step.judge(step) if step.judge is not None else (True, "")
        if code != 0:
            ok, detail = False, f"exit status {code}" + (f"; {detail}" if detail else "") + f"; {_tail(step.log)}"
        step.status, step.detail = (OK if ok else FAILED), detail
    except Exception as exc:  # noqa: BLE001 -- a step that cannot run is a failed step, not a failed check
        step.status, step.detail = FAILED, f"{type(exc).__name__}: {exc}"
    finally:
        step.seconds = time.monotonic() - start


def _tail(path: str, lines: int = 3, width: int = 200) -> str:
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line[:width] for line in text[-lines:])


def run_all(steps: list[Step], budget: float, logs: Path, serial: bool = False) -> float:
    """Run every step once its needs are done (each in a thread; one at a time with ``serial``);
    a step whose need did not pass is skipped. Returns the wall-clock seconds."""
    start = time.monotonic()
    deadline = start + budget
    done = {s.name: threading.Event() for s in steps}
    by_name = {s.name: s for s in steps}
    one_at_a_time = threading.Lock()

    def go(step: Step) -> None:
        try:
            for need in step.needs:
                done[need].wait()
            failed = [n for n in step.needs if by_name[n].status != OK]
            if failed:
                step.status, step.detail = SKIPPED, f"needs {', '.join(failed)}"
                return
            if serial:
                with one_at_a_time:
                    run_step(step, deadline, logs)
            else:
                run_step(step, deadline, logs)
            print(f"[gpu-check] {step.name}: {step.status} in {step.seconds:.1f} s", flush=True)
        finally:
            done[step.name].set()

    threads = [threading.Thread(target=go, args=(s,), name=s.name, daemon=True) for s in steps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - start


# -- what the steps are ----------------------------------------------------------------------

def probe_device(python: str, timeout: float = 180) -> dict:
    """What torch here finds (in a process of its own: this one never starts CUDA)."""
    done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"torch could not be imported: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def notebooks_judge(report_dir: Path) -> Callable[[Step], tuple[bool, str]]:
    def judge(step: Step) -> tuple[bool, str]:
        try:
            summary = json.loads((report_dir / "summary.json").read_text())
        except (OSError, ValueError):
            return False, "no summary.json written"
        results = summary.get("results", [])
        failed = [f"{r['chapter']} {r['mode']}" for r in results if not r.get("ok")]
        skipped = [r for r in results if r.get("skipped")]
        detail = (f"{len(results)} executions, {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "")
                  + (f", {len(skipped)} skipped by the manifest" if skipped else ""))
        return not failed and bool(results), detail
    return judge


def read_grades(workdir: Path) -> dict[tuple[str, str], tuple]:
    """(student, chapter) -> (status, score, ((test, status), ...)) from a workspace's results."""
    grades = {}
    for path in sorted((workdir / "results").glob("*/*.json")):
        r = json.loads(path.read_text())
        grades[(r["student"], r["chapter"])] = (r["status"], r["score"],
                                                tuple((t["grade_id"], t["status"]) for t in r.get("tests", [])))
    return grades


def grading_judge(workdir: Path, expected: int) -> Callable[[Step], tuple[bool, str]]:
    def judge(step: Step) -> tuple[bool, str]:
        grades = read_grades(workdir)
        errors = sorted(f"{s}/{c}" for (s, c), g in grades.items() if g[0] != "graded")
        line = next((line for line in Path(step.log).read_text(errors="replace").splitlines()
                     if line.startswith("isolation:")), "")
        detail = f"{len(grades)} of {expected} graded" + (f", {len(errors)} not: {', '.join(errors[:4])}" if errors else "")
        return len(grades) == expected and not errors, detail + (f"; {isolation(line)}" if line else "")
    return judge


def isolation(line: str) -> str:
    """The grader's ``isolation:`` line, in a few words."""
    words = ["bubblewrap" if "bubblewrap:" in line else "NO sandbox"]
    found = re.search(r"cgroup (v\d) budget", line)
    words.append(f"cgroup {found.group(1)}" if found else "no cgroup (process tree watched)")
    if "GPU device nodes bound" in line:
        words.append("GPU nodes bound")
    elif "NO /dev/nvidia" in line:
        words.append("no GPU node")
    return ", ".join(words)


def pytest_judge(step: Step) -> tuple[bool, str]:
    last = _tail(step.log, lines=1)
    return True, last.strip("= ")


def samples_judge(folder: Path, expected: int) -> Callable[[Step], tuple[bool, str]]:
    def judge(step: Step) -> tuple[bool, str]:
        found = len(list(folder.glob("*/*/*.ipynb")))
        return found == expected, f"{found} notebooks written"
    return judge


def compare(runs: dict[str, Path], reference: str) -> Callable[[], tuple[bool, str]]:
    """The runs must give the reference run's grades, submission by submission."""
    def check() -> tuple[bool, str]:
        base = read_grades(runs[reference])
        differ = []
        for name, workdir in runs.items():
            if name == reference:
                continue
            other = read_grades(workdir)
            for key in sorted(set(base) | set(other)):
                if base.get(key) != other.get(key):
                    a, b = base.get(key), other.get(key)
                    differ.append(f"{key[0]}/{key[1]}: {reference} {a[:2] if a else None} vs {name} {b[:2] if b else None}")
        if differ:
            return False, f"{len(differ)} differ: " + "; ".join(differ[:3])
        return bool(base), f"{len(base)} submissions, same grades in {', '.join(runs)}"
    return check


def plan(chapters: list[str], device: str, fast: bool, jobs: int, python: str, work: Path, reports: Path,
         expected: int) -> list[Step]:
    """The check's steps for ``device`` (``cuda``: full size, both engines on CUDA and the fork engine
    on the CPU; ``cpu``: both engines on the CPU)."""
    course = [python, "-m", "grader.cli.app"]
    samples = work / "samples"
    steps = [
        Step("notebooks", [python, "ci/run_notebooks.py", *chapters, "--device", device, "--jobs", str(jobs),
                           "--report-dir", str(reports / "notebooks"), *(["--fast"] if fast else [])],
             timeout=BUDGET - 30, env={"COURSE_DEVICE": device}, judge=notebooks_judge(reports / "notebooks")),
        Step("samples", [*course, "samples", str(samples), *chapters], timeout=120, judge=samples_judge(samples, expected)),
    ]
    runs = {f"{engine} {device}": work / f"grade-{engine}-{device}" for engine in ("fork", "kernel")}
    if device != "cpu":
        runs["fork cpu"] = work / "grade-fork-cpu"
    for name, workdir in runs.items():
        engine, on = name.split()
        steps.append(Step(f"grade {name}", [*course, "grade", str(samples), "--workdir", str(workdir), "--device", on,
                                             "--engine", engine, "--jobs", str(jobs), "--force"],
                          timeout=BUDGET - 60, needs=("samples",), judge=grading_judge(workdir, expected)))
    steps.append(Step("same grades", func=compare(runs, f"kernel {device}"), needs=tuple(f"grade {n}" for n in runs)))
    steps.append(Step(f"tests ({device})", [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not browser", "tests/test_cuda_paths.py",
                                            "tests/test_timeline.py"],
                      timeout=180, env={"COURSE_DEVICE": device}, judge=pytest_judge))
    return steps


def table(steps: list[Step], wall: float, header: str) -> str:
    width = max(len(s.name) for s in steps) + 2
    lines = [header, "", f"{'step':<{width}}{'status':<11}{'seconds':>8}  detail"]
    for s in steps:
        lines.append(f"{s.name:<{width}}{s.status:<11}{s.seconds:>8.1f}  {s.detail}")
    ok = all(s.status == OK for s in steps)
    lines.append(f"{'all':<{width}}{(OK if ok else FAILED):<11}{wall:>8.1f}  "
                 + ("every step passed" if ok else f"{sum(s.status != OK for s in steps)} step(s) did not pass"))
    return "\n".join(lines)


def markdown(steps: list[Step], wall: float, header: str) -> str:
    lines = [f"# {header}", "", "| step | status | seconds | detail |", "|---|---|---:|---|"]
    lines += [f"| {s.name} | {s.status} | {s.seconds:.1f} | {s.detail.replace('|', '/')} |" for s in steps]
    lines.append(f"| all | {OK if all(s.status == OK for s in steps) else FAILED} | {wall:.1f} | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapters (01 or 01_tensors); all by default")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                        help="cuda: fail without a GPU; auto (default): cuda where torch finds one, else the CPU mode")
    parser.add_argument("--fast", action="store_true", help="FAST sizes (the CPU mode's default)")
    parser.add_argument("--jobs", type=int, default=0, help="notebooks and submissions at once per step "
                                                             "(default: a quarter of the CPUs, at least 2)")
    parser.add_argument("--budget", type=float, default=BUDGET, help=f"seconds for the whole check (default {BUDGET})")
    parser.add_argument("--serial", action="store_true", help="one step at a time")
    parser.add_argument("--workdir", type=Path, default=None, help="where the samples and workspaces go (default: a temporary folder)")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "ci-reports", help="the summary goes to REPORT_DIR/gpu-check/")
    args = parser.parse_args(argv)
    python = sys.executable
    try:
        found = probe_device(python)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return 2
    device, fast = args.device, args.fast
    if device == "auto":
        device = "cuda" if found["cuda"] else "cpu"
        if not found["cuda"]:
            why = "torch here is a CPU build" if not found["cuda_build"] else "torch finds no GPU"
            print(f"gpu-check: no GPU found ({why}, torch {found['torch']}): running the CPU mode (--device cpu --fast)")
            fast = True
    elif device == "cuda" and not found["cuda"]:
        print(f"gpu-check: --device cuda, but torch {found['torch']} finds no GPU", file=sys.stderr)
        return 2
    jobs = args.jobs or max(2, (os.cpu_count() or 2) // 4)
    sys.path.insert(0, str(ROOT))
    from grader import project

    chapters = list(project.resolve_chapters(args.chapters or None))
    expected = 4 * len(chapters)  # perfect, partial, untouched, broken
    reports = args.report_dir / "gpu-check"
    shutil.rmtree(reports, ignore_errors=True)
    reports.mkdir(parents=True)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    shutil.rmtree(work / "samples", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    on = (f"{found['name']}, torch {found['torch']} (CUDA {found['cuda_build']})" if device == "cuda"
          else f"CPU, torch {found['torch']}")
    header = (f"gpu-check on {on}: {len(chapters)} chapter(s), {'FAST' if fast else 'full'} size, "
              f"--jobs {jobs}, budget {args.budget:.0f} s{', one step at a time' if args.serial else ''}")
    print(f"[gpu-check] {header}", flush=True)
    steps = plan(chapters, device, fast, jobs, python, work, reports, expected)
    wall = run_all(steps, args.budget, reports, args.serial)
    print()
    print(table(steps, wall, header))
    (reports / "summary.json").write_text(json.dumps({"device": device, "fast": fast, "jobs": jobs, "found": found,
                                                      "wall_seconds": wall, "steps": [
                                                          {k: v for k, v in asdict(s).items() if k not in ("judge", "func")}
                                                          for s in steps]}, indent=2, default=str) + "\n")
    (reports / "summary.md").write_text(markdown(steps, wall, header))
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(s.status == OK for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
