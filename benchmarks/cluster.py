"""Throughput as a Dask cluster grows: the coordinator feeding 1, 2, ... worker processes.

``course grade --scheduler ADDRESS`` executes notebooks on a Dask cluster's workers (each
runs the fork engine: a warm server per worker process) while this process prepares,
judges and records. Here a ``LocalCluster`` with process workers stands in for the cluster:
the same batch of chapter-01 submissions is graded with 1, 2, ... workers (one thread
each), in one workspace whose solution run is cached, and the script prints submissions per
second for each size and its speed-up over one worker. On a machine with C cores the curve
can only climb up to C workers; beyond one machine the same coordinator feeds a real
cluster (see docs/engines.md, Performance, for what one coordinator can feed).

    python benchmarks/cluster.py [--students 24] [--workers 1,2]

Not a timed test: compare figures from one run.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.coordinator import write_batch  # noqa: E402
from grader import grade  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=24, help="submissions per batch (default 24)")
    cores = os.cpu_count() or 1
    parser.add_argument("--workers", default=",".join(str(n) for n in range(1, cores + 1)),
                        help=f"cluster sizes to try, comma-separated (default 1..{cores}: this machine's cores)")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.workers.split(",")]
    logging.getLogger("distributed").setLevel(logging.ERROR)
    from distributed import LocalCluster

    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    try:
        subs, work, warm = tmp / "subs", tmp / "work", tmp / "warm"
        write_batch(subs, args.students)
        write_batch(warm, 2 * max(sizes))  # so that every worker gets one
        grade.main(warm, work, jobs=1, engine="fork")  # the solution's run, cached in the workspace
        rows = []
        for n in sizes:
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
                # every worker starts its fork server (imports torch) on its first task: not timed
                grade.main(warm, work, engine="fork", scheduler=cluster.scheduler_address, force=True)
                start = time.perf_counter()
                reports = grade.main(subs, work, engine="fork", scheduler=cluster.scheduler_address, force=True)
                wall = time.perf_counter() - start
            full = sum(r.status == "graded" and r.score == r.max_score for r in reports)
            rows.append((n, wall, full))
        base = args.students / rows[0][1]
        print(f"fork engine on a Dask LocalCluster (process workers, 1 thread each), {args.students} chapter-01 "
              f"submissions, {cores} CPU core(s)")
        for n, wall, full in rows:
            rate = args.students / wall
            print(f"  {n:2d} worker(s): {wall:6.1f} s, {rate:5.2f} submissions/s, {rate / base:4.2f}x one worker, "
                  f"{full}/{args.students} scored full")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
