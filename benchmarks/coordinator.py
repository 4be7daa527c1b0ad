"""What the coordinating process costs per submission: with execution taken out, and on the fork path.

A null engine stands in for the fork children: it returns, for every submission, one execution
recorded for real (a perfect chapter-01 notebook), so what is measured is only the coordinator's
own work -- intake, preparation, the verdict, the gradebook and result files -- through the fork
engine's path (``--jobs 2``: two worker threads hand results back as they would from children).
The batch is graded twice in fresh workspaces (``--students`` and twice as many), and the
marginal cost per submission is the difference divided by the extra submissions, so start-up
(imports, releases, the chapter's registration) is left out. Printed: submissions per second and
the coordinator's CPU milliseconds per submission (its own process, children excluded).

With ``--fork N`` the real fork path is measured first, as ``course grade --engine fork --jobs 2``
runs it: N, then 3 × N chapter-01 submissions (the solution's run cached, the warm servers started
and stopped by each batch), and the marginal CPU of the grading process itself between the two
(the zygote, its servers and their children excluded), with the marginal submissions per second.

With ``--stages`` both print where the coordinator's CPU goes, stage by stage: each stage's own
thread CPU, marginal per submission between the two batches (the fork path's stages include the
worker threads that drive the children). Every figure is printed with the load average beside it:
the machine may be shared, and CPU time, not wall time, is what compares across runs.

Logging is set up as ``course`` sets it up (warnings, nbgrader's chatter off), and start-up's
objects are frozen out of the collector's scans as ``course grade`` freezes them, so that what is
timed is what ``course grade`` does. Targets: <= 10 ms a submission on the fork path, >= 100
submissions a second with the null engine.

    python benchmarks/coordinator.py [--students 1000] [--fork 40] [--stages] [--db-url postgresql://...]

Not a timed test: compare figures from one run.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import os
import resource
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from grader import grade, project, samples  # noqa: E402
from grader.cli.base import setup_logging  # noqa: E402
from grader.engines.execution import Execution  # noqa: E402
from grader.engines.fork import child as forkchild  # noqa: E402
from grader.engines.fork import engine as forkengine  # noqa: E402
from grader.engines.fork import pool as forkpool  # noqa: E402
from grader.execute import watchdog  # noqa: E402
from grader.prepare import pipeline, submission  # noqa: E402
from grader.prepare.release import dumps  # noqa: E402
from grader.record import results, scores  # noqa: E402
from grader.verdict import judge  # noqa: E402

CHAPTER = "01_tensors"
RUN = secrets.token_hex(3)


def write_batch(dest: Path, students: int, prefix: str = "s") -> None:
    nb = samples.make_submission(CHAPTER, dict.fromkeys(samples.answer_ids(CHAPTER), samples.SOLUTION))
    text = dumps(nb)
    name = project.source_notebook(CHAPTER).name
    for k in range(students):
        path = dest / f"{prefix}{k:05d}" / CHAPTER / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_batch(tmp: Path, students: int, db_url: str | None, tag: str = "null") -> tuple[float, float, int]:
    """Grade ``students`` copies on the fork path; (wall s, CPU s of this process, scored full)."""
    subs, work = tmp / f"subs-{tag}-{students}", tmp / f"work-{tag}-{students}"
    # students of their own, new to the gradebook: one PostgreSQL database may serve both batches and
    # several runs, and each still measures new submissions (not the regrade of an earlier run's)
    write_batch(subs, students, prefix=f"{tag}{students}-{RUN}-")
    shutil.copytree(tmp / "warm" / "reference", work / "reference")  # the solution's run, cached
    wall, cpu = time.perf_counter(), cpu_seconds()
    reports = grade.main(subs, work, db_url=db_url, jobs=2, engine="fork", on_start=lambda n: gc.freeze())  # as `course`
    forkpool.shutdown()  # as the command ends: its servers stop
    return time.perf_counter() - wall, cpu_seconds() - cpu, sum(r.status == "graded" and r.score == r.max_score
                                                                 for r in reports)


def timed_stages() -> collections.Counter:
    """Wrap the coordinator's per-submission stages so that each adds its thread CPU to the counter
    returned (a stage inside another counts in both)."""
    spent: collections.Counter = collections.Counter()

    def timed(name, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.thread_time() - start
        return wrapper

    steps = [(step, "preprocess", f"  {step.__name__}") for step in pipeline.SANITIZE]
    stages = [(grade, "read_submission", "read the submission"), (grade, "chapter_belongs", "check its chapter"),
              (grade, "prepare", "prepare: sanitise, put the tests in"), *steps,
              (submission, "grading_notebook", "  the tests put in"), (grade, "learner_findings", "static scan"),
              (grade.outcome, "scored", "verdict, executed notebook written"), (judge.rules, "violation", "  rules about how"),
              (judge, "judge", "  the checks compared"), (results.Recorder, "flush", "record: gradebook, result files"),
              (scores, "save", "  the gradebook"), (forkengine._Runner, "run", "fork path: drive the children"),
              (forkchild.Child, "__init__", "  start a child"), (forkchild.Child, "run", "  a run of cells: request, wait, results read"),
              (forkengine, "_outputs", "  its outputs rebuilt")]
    for owner, name, label in stages:
        spent[label] = 0.0  # printed in this order
        setattr(owner, name, timed(label, getattr(owner, name)))
    return spent


def marginal(title: str, small: tuple[float, float, int], large: tuple[float, float, int], n: int, big: int) -> None:
    """Print both batches and the marginal figures between them."""
    wall = (large[0] - small[0]) / (big - n)
    cpu = (large[1] - small[1]) / (big - n)
    print(title)
    for count, (w, c, ok) in ((n, small), (big, large)):
        print(f"  {count:5d} submissions: {w:7.1f} s wall, {c:7.1f} s CPU, {ok} scored full")
    print(f"  marginal: {1 / wall if wall > 0 else float('inf'):.1f} submissions/s (wall), "
          f"{1000 * cpu:.1f} ms of coordinator CPU per submission "
          f"(one coordinator core: {1 / cpu if cpu > 0 else float('inf'):.0f} submissions/s)")


def pair(tmp: Path, n: int, big: int, db_url: str | None, tag: str, spent: collections.Counter | None):
    """Grade a batch of ``n``, then one of ``big``: both results, and each stage's marginal CPU
    (seconds per extra submission; empty without ``spent``)."""
    before = collections.Counter(spent or {})
    small = timed_batch(tmp, n, db_url, tag=tag)
    middle = collections.Counter(spent or {})
    large = timed_batch(tmp, big, db_url, tag=tag)
    by_stage = {label: ((spent[label] - middle[label]) - (middle[label] - before[label])) / (big - n)
                for label in spent or {}}
    return small, large, by_stage


def print_stages(by_stage: dict[str, float]) -> None:
    if by_stage:
        print("  by stage, marginal ms of CPU per submission (a stage inside another counts in both):")
        for label, seconds in by_stage.items():
            print(f"    {1000 * seconds:6.2f}  {label}")


def load() -> str:
    """The load average now, printed beside every figure (the machine may be shared)."""
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=1000, help="submissions in the smaller null-engine batch "
                                                                   "(default 1000)")
    parser.add_argument("--fork", type=int, default=0, metavar="N",
                        help="also measure the real fork path: N, then 3 x N submissions (0: not measured; docs/engines.md gives 40)")
    parser.add_argument("--stages", action="store_true", help="print where the coordinator's CPU goes, stage by stage")
    parser.add_argument("--db-url", default=None, help="gradebook URL (default: SQLite in each workspace); "
                                                       "each batch writes students of its own")
    args = parser.parse_args(argv)
    setup_logging(0)
    gradebook = "SQLite" if not args.db_url else args.db_url.split(":")[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-coordinator-"))
    try:
        write_batch(tmp / "warm-subs", 1)  # one real execution: the reference and the canned notebook
        grade.main(tmp / "warm-subs", tmp / "warm", jobs=1, engine="fork")
        forkpool.shutdown()
        spent = timed_stages() if args.stages else None
        if args.fork:
            print(f"[{load()}]")
            small, large, by_stage = pair(tmp, args.fork, 3 * args.fork, args.db_url, "fork", spent)
            marginal(f"fork engine, --jobs 2, {CHAPTER}, gradebook {gradebook} (target: <= 10 ms) [{load()}]",
                     small, large, args.fork, 3 * args.fork)
            print_stages(by_stage)
        executed = next((tmp / "warm" / "autograded").rglob("*.ipynb"))
        canned = nbformat.read(str(executed), as_version=4)

        def null_engine(nb, options, engine):  # the grader only reads an executed notebook
            return Execution(nb=canned)

        watchdog.execute_notebook = null_engine
        forkpool.prestart = lambda *a, **k: None  # no warm server: nothing is executed
        print(f"[{load()}]")
        small, large, by_stage = pair(tmp, args.students, 2 * args.students, args.db_url, "null", spent)
        marginal(f"null engine, {CHAPTER}, gradebook {gradebook} (target: >= 100/s, <= 10 ms) [{load()}]",
                 small, large, args.students, 2 * args.students)
        print_stages(by_stage)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
