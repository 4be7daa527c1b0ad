"""What a refused `course grade` costs, next to `python -c "import torch"` (median of N runs each).

Every refusal is checked before a fork server or sandbox starts, most of them before the grader
(and torch with it) is imported; a rerun with nothing new to grade starts no server. Each case
is a whole `course grade` command in a fresh interpreter, start-up and exit included, on the
tests' mini course; the cases are interleaved so that a noisy machine affects them alike. Not a
timed test: compare the figures of one run with each other.

    python benchmarks/refusals.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
COURSE = str(Path(sys.executable).parent / "course")


def run(args: list[str], expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}, expected {expect}\n{done.stderr}")
    return took


def setup(tmp: Path) -> dict[str, tuple[list[str], int]]:
    """The cases: name -> (command, expected exit status); a workspace graded once for the last two."""
    subs = tmp / "subs" / "alice" / "00_mini"
    subs.mkdir(parents=True)
    shutil.copy(MINI / "00_mini" / "mini.ipynb", subs / "mini.ipynb")
    subs = tmp / "subs"
    (tmp / "empty").mkdir()
    (tmp / "grades.csv").write_text("student,score\n")
    (tmp / "busy").mkdir()
    graded = tmp / "graded"
    print("grading the mini chapter once (for the rerun cases) ...", file=sys.stderr)
    run([COURSE, "grade", str(subs), "--workdir", str(graded), "--solutions", str(MINI), "--jobs", "1"], 0)
    grade = [COURSE, "grade"]
    fresh = ["--workdir", str(tmp / "w"), "--solutions", str(MINI)]
    return {
        "import torch (baseline)": ([sys.executable, "-c", "import torch"], 0),
        "--timeout 0": (grade + [str(subs), *fresh, "--timeout", "0"], 2),
        "--chapter unknown": (grade + [str(subs), *fresh, "--chapter", "99_nope"], 2),
        "empty submissions folder": (grade + [str(tmp / "empty"), *fresh], 2),
        "submissions not a zip": (grade + [str(tmp / "grades.csv"), *fresh], 2),
        "unwritable --workdir": (grade + [str(subs), "--workdir", str(tmp / "grades.csv" / "w"),
                                          "--solutions", str(MINI)], 2),
        "busy workspace (lock held)": (grade + [str(subs), "--workdir", str(tmp / "busy"), "--solutions", str(MINI)],
                                       75),
        "--timeout changed vs workspace": (grade + [str(subs), "--workdir", str(graded), "--timeout", "30"], 2),
        "rerun, nothing changed (exit 0)": (grade + [str(subs), "--workdir", str(graded)], 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="refusals-") as name:
        tmp = Path(name)
        cases = setup(tmp)
        lock = os.open(tmp / "busy" / "workspace.lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(lock, fcntl.LOCK_EX)  # the "other batch" holding the busy workspace
        run(*cases["import torch (baseline)"])  # warm the page cache
        times: dict[str, list[float]] = {case: [] for case in cases}
        for _ in range(args.repeat):
            for case, (command, expect) in cases.items():
                times[case].append(run(command, expect))
        os.close(lock)
    base = statistics.median(times["import torch (baseline)"])
    width = max(map(len, cases))
    print(f"{'case':<{width}}  {'median s':>8}  {'x import torch':>14}")
    for case, got in times.items():
        median = statistics.median(got)
        print(f"{case:<{width}}  {median:8.2f}  {median / base:14.2f}")
    print(f"({args.repeat} runs each, interleaved; {os.cpu_count()} CPUs; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
