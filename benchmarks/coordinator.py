"""What the coordinating process costs per submission, with execution taken out.

A null engine stands in for the fork children: it returns, for every submission, one execution
recorded for real (a perfect chapter-01 notebook), so what is measured is only the coordinator's
own work -- intake, preparation, the verdict, the gradebook and result files -- through the fork
engine's path (``--jobs 2``: two worker threads hand results back as they would from children). The batch is graded twice in fresh workspaces (``--students`` and twice as many), and the
marginal cost per submission is the difference divided by the extra submissions, so start-up
(imports, releases, the chapter's registration) is left out. Printed: submissions per second and
the coordinator's CPU milliseconds per submission (its own process, children excluded).

    python benchmarks/coordinator.py [--students 1000] [--db-url postgresql://...]

Not a timed test: compare figures from one run.
"""

from __future__ import annotations

import argparse
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
from grader.engines.execution import Execution  # noqa: E402
from grader.engines.fork import pool as forkpool  # noqa: E402
from grader.execute import watchdog  # noqa: E402
from grader.prepare.release import dumps  # noqa: E402

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


def timed_batch(tmp: Path, students: int, db_url: str | None) -> tuple[float, float, int]:
    """Grade ``students`` copies with the null engine; (wall s, CPU s, graded)."""
    subs, work = tmp / f"subs-{students}", tmp / f"work-{students}"
    # students of their own, new to the gradebook: one PostgreSQL database may serve both batches and
    # several runs, and each still measures new submissions (not the regrade of an earlier run's)
    write_batch(subs, students, prefix=f"b{students}-{RUN}-")
    shutil.copytree(tmp / "warm" / "reference", work / "reference")  # the solution's run, cached
    wall, cpu = time.perf_counter(), cpu_seconds()
    reports = grade.main(subs, work, db_url=db_url, jobs=2, engine="fork")
    return time.perf_counter() - wall, cpu_seconds() - cpu, sum(r.status == "graded" and r.score == r.max_score
                                                                 for r in reports)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=1000, help="submissions in the smaller batch (default 1000)")
    parser.add_argument("--db-url", default=None, help="gradebook URL (default: SQLite in each workspace); "
                                                       "each batch writes students of its own")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-coordinator-"))
    try:
        write_batch(tmp / "warm-subs", 1)  # one real execution: the reference and the canned notebook
        grade.main(tmp / "warm-subs", tmp / "warm", jobs=1, engine="fork")
        executed = next((tmp / "warm" / "autograded").rglob("*.ipynb"))
        canned = nbformat.read(str(executed), as_version=4)

        def null_engine(nb, options, engine):  # the grader only reads an executed notebook
            return Execution(nb=canned)

        watchdog.execute_notebook = null_engine
        forkpool.prestart = lambda *a, **k: None  # no warm server: nothing is executed
        forkpool.shutdown()
        small = timed_batch(tmp, args.students, args.db_url)
        large = timed_batch(tmp, 2 * args.students, args.db_url)
        extra = args.students
        wall = (large[0] - small[0]) / extra
        cpu = (large[1] - small[1]) / extra
        print(f"null engine, {CHAPTER}, gradebook {'SQLite' if not args.db_url else args.db_url.split(':')[0]}")
        for n, (w, c, ok) in ((args.students, small), (2 * args.students, large)):
            print(f"  {n:5d} submissions: {w:7.1f} s wall, {c:7.1f} s CPU, {ok} scored full")
        print(f"marginal: {1 / wall if wall > 0 else float('inf'):.1f} submissions/s, "
              f"{1000 * cpu:.1f} ms of coordinator CPU per submission (target: >= 100/s, <= 10 ms)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
