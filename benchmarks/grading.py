"""Grading throughput: plain ``nbgrader autograde`` against ``course grade``'s two engines.

One batch of chapter-01 submissions (perfect, partial, untouched, a syntax error, one wrong
answer, in turn) is graded three times, side by side in one run:

1. plain ``nbgrader autograde`` as shipped (serial), in an nbgrader course directory;
2. ``course grade --engine kernel --jobs J`` (a Jupyter kernel per submission);
3. ``course grade --engine fork --jobs J`` (a warm interpreter forks a child per submission);
4. the same again with ``--force`` in that workspace: the solution's reference run is cached
   there, as in an instructor's second batch of the same chapter;
5. ``course grade --engine fork`` with ``COURSE_FORK_ZYGOTE=0``: every server started in a
   sandbox of its own and importing torch itself, as before the zygote (``fork-own``).

Each is timed as a whole command, start-up included, and the script prints seconds per
submission and each engine's throughput relative to nbgrader. Not a timed test: the machine
is shared and noisy, so compare the figures of one run with each other.

    python benchmarks/grading.py [--students 40] [--jobs 2] [--only nbgrader,kernel,fork,fork-again,fork-own] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import project, samples  # noqa: E402
from grader.prepare.release import dumps  # noqa: E402

CHAPTER = "01_tensors"
KINDS = ("perfect", "partial", "untouched", "syntax", "wrong")
BIN = Path(sys.executable).parent


def build_batch(dest: Path, students: int) -> dict[str, str]:
    """Write ``students`` chapter-01 submissions under ``dest``; returns student -> kind."""
    ids = samples.answer_ids(CHAPTER)
    wrong = json.loads((ROOT / "tests" / "fixtures" / "wrong_answers" / f"{CHAPTER}.json").read_text())
    name = project.source_notebook(CHAPTER).name
    kinds = {}
    for k in range(students):
        kind = KINDS[k % len(KINDS)]
        if kind == "perfect":
            answers = dict.fromkeys(ids, samples.SOLUTION)
        elif kind == "partial":
            answers = dict.fromkeys(ids[: len(ids) // 2], samples.SOLUTION)
        elif kind == "untouched":
            answers = {}
        elif kind == "syntax":
            answers = {ids[0]: "def oops(:\n    return 1\n"}
        else:  # all solved but one, which makes a classic mistake
            mistake = wrong[(k // len(KINDS)) % len(wrong)]
            answers = dict.fromkeys(ids, samples.SOLUTION)
            answers[mistake["grade_id"]] = mistake["source"]
        student = f"s{k:03d}_{kind}"
        nb = samples.make_submission(CHAPTER, answers)
        path = dest / student / CHAPTER / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps(nb), encoding="utf-8")
        kinds[student] = kind
    return kinds


def tools_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")  # nbgrader runs alembic by name
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def fast(nb_text: str) -> str:
    """The notebook with ``FAST = True`` in its parameters cell: what ``course grade`` injects."""
    nb = json.loads(nb_text)
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            cell["source"] = "".join(cell["source"]).replace("FAST = False", "FAST = True")
    return json.dumps(nb)


def run_nbgrader(subs: Path, work: Path) -> float:
    """Plain ``nbgrader autograde`` (serial, as shipped); returns its wall-clock seconds."""
    course = work / "nbgrader"
    (course / "source" / CHAPTER).mkdir(parents=True)
    source = project.source_notebook(CHAPTER)
    shutil.copy(source, course / "source" / CHAPTER / source.name)
    (course / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\nc.CourseDirectory.course_id = 'bench'\n"
    )
    env = tools_env()
    subprocess.run([str(BIN / "nbgrader"), "generate_assignment", CHAPTER, "--force"],
                   cwd=course, env=env, check=True, capture_output=True)
    for nb in sorted(subs.glob(f"*/{CHAPTER}/*.ipynb")):
        dest = course / "submitted" / nb.parent.parent.name / CHAPTER / source.name
        dest.parent.mkdir(parents=True)
        dest.write_text(fast(nb.read_text(encoding="utf-8")), encoding="utf-8")
    start = time.perf_counter()
    done = subprocess.run([str(BIN / "nbgrader"), "autograde", CHAPTER], cwd=course, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"nbgrader autograde failed:\n{done.stderr[-3000:]}")
    return seconds


def run_course(subs: Path, work: Path, engine: str, jobs: int, again: bool = False,
               env: dict[str, str] | None = None) -> tuple[float, dict[str, float]]:
    """``course grade --engine ENGINE --jobs J``; returns its seconds and the scores.

    ``again``: re-grade everything (``--force``) in the workspace of the first run, where the
    solution's reference run is cached. ``env``: variables set for it.
    """
    out = work / engine
    cmd = [str(BIN / "course"), "grade", str(subs), "--workdir", str(out), "--engine", engine, "--jobs", str(jobs)]
    cmd += ["--force"] if again else []
    start = time.perf_counter()
    done = subprocess.run(cmd, env={**tools_env(), **(env or {})}, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"course grade --engine {engine} failed:\n{done.stderr[-3000:]}")
    scores = {}
    for path in (out / "results").glob(f"*/{CHAPTER}.json"):
        data = json.loads(path.read_text())
        scores[data["student"]] = (data["status"], data["score"], tuple(t["status"] for t in data["tests"]))
    return seconds, scores


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=40, help="submissions in the batch (default 40)")
    parser.add_argument("--jobs", type=int, default=2, help="--jobs of course grade (default 2)")
    parser.add_argument("--only", default="nbgrader,kernel,fork,fork-again,fork-own",
                        help="comma-separated subset to run (fork-again: fork once more, reference cached; "
                             "fork-own: fork with a sandbox per server, no zygote)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the batch and workspaces in this folder")
    args = parser.parse_args(argv)
    which = [w.strip() for w in args.only.split(",") if w.strip()]

    tmp = Path(tempfile.mkdtemp(prefix="bench-grading-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        subs = tmp / "submissions"
        shutil.rmtree(subs, ignore_errors=True)
        kinds = build_batch(subs, args.students)
        n = len(kinds)
        print(f"batch: {n} submissions of {CHAPTER} ({', '.join(KINDS)} in turn); {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        rows, grades = [], {}
        for what in which:
            work = tmp / f"work-{what.removesuffix('-again')}"
            if not what.endswith("-again"):
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir()
            if what == "nbgrader":
                seconds = run_nbgrader(subs, work)
                label = "nbgrader autograde (serial)"
            elif what == "fork-own":
                seconds, grades[what] = run_course(subs, work, "fork", args.jobs, env={"COURSE_FORK_ZYGOTE": "0"})
                label = "course grade --engine fork, a sandbox per server (no zygote)"
            elif what.endswith("-again"):
                engine = what.removesuffix("-again")
                seconds, _ = run_course(subs, work, engine, args.jobs, again=True)
                label = "  the same, again (--force; reference cached)"
            else:
                seconds, grades[what] = run_course(subs, work, what, args.jobs)
                label = f"course grade --engine {what} --jobs {args.jobs}"
            rows.append((what, label, seconds))
            print(f"  {label}: {seconds:.1f} s", flush=True)
        base = next((s for w, _, s in rows if w == "nbgrader"), None)
        width = max(len(label) for _, label, _ in rows)
        print(f"\n{'':{width}} {'total s':>8} {'s/submission':>13} {'throughput vs nbgrader':>23}")
        for _what, label, seconds in rows:
            ratio = f"{base / seconds:.2f}x" if base else "-"
            print(f"{label:{width}} {seconds:8.1f} {seconds / n:13.3f} {ratio:>23}")
        if len(grades) >= 2:
            (first, a), *others = grades.items()
            for other, b in others:
                same = sum(a.get(s) == b.get(s) for s in kinds)
                print(f"\n{first} and {other} agree on {same}/{n} submissions (status, score and every test's status)")
                if same != n:
                    for s in kinds:
                        if a.get(s) != b.get(s):
                            print(f"  {s}: {a.get(s)} != {b.get(s)}")
                    raise SystemExit(1)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
