"""What a feedback page costs: milliseconds and kilobytes per page of ``course feedback``.

Builds the feedback of a graded class: the sample class (``course samples``: four students, every
chapter), graded here first unless ``--workdir`` names a graded workspace (``make demo``'s
``course-work/``). ``--copies K`` repeats the class K times under other student names (results and
autograded notebooks copied; a bigger class gives steadier figures). The pages are built three
times in this process, imports done, with one worker and with ``--jobs`` workers. Printed: wall
milliseconds per page, and the pages' mean and largest size (the shared stylesheet counted once).

    python benchmarks/feedback.py [--workdir course-work] [--copies 10] [--jobs 2]

Not a timed test: compare figures from one run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import grade, samples  # noqa: E402
from grader.pages import feedback  # noqa: E402


def graded_class(tmp: Path, jobs: int) -> Path:
    """The sample class, graded into a fresh workspace."""
    samples.write_samples(tmp / "samples", [])
    grade.main(tmp / "samples", tmp / "work", jobs=jobs)
    return tmp / "work"


def replicate(work: Path, dest: Path, copies: int) -> Path:
    """A copy of the workspace whose class is ``copies`` times as big (students renamed)."""
    shutil.copytree(work, dest, ignore=shutil.ignore_patterns(feedback.FEEDBACK_DIR, "feedback", "reference"))
    for folder in ("results", "autograded"):
        students = [p for p in (dest / folder).iterdir() if p.is_dir()]
        for k in range(1, copies):
            for student in students:
                shutil.copytree(student, dest / folder / f"{student.name}-{k:03d}")
    for path in (dest / "results").glob("*-[0-9][0-9][0-9]/*.json"):  # the student's name inside, too
        text = path.read_text(encoding="utf-8")
        original = path.parent.name.rsplit("-", 1)[0]
        path.write_text(text.replace(f'"student": "{original}"', f'"student": "{path.parent.name}"'), encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="a graded workspace (default: grade the sample class)")
    parser.add_argument("--copies", type=int, default=10, help="repeat the class this many times (default 10)")
    parser.add_argument("--jobs", type=int, default=2, help="workers of the parallel run (default 2)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-feedback-"))
    try:
        work = args.workdir or graded_class(tmp, args.jobs)
        work = replicate(work, tmp / "class", max(1, args.copies))
        feedback.main(work, jobs=1)  # warm: releases, caches, page cache
        for jobs in sorted({1, args.jobs}):
            times = []
            for _ in range(3):
                start = time.perf_counter()
                paths = feedback.main(work, jobs=jobs)
                times.append(time.perf_counter() - start)
            best, median = min(times), statistics.median(times)
            print(f"--jobs {jobs}: {len(paths)} pages in {median:.2f} s (best {best:.2f} s): "
                  f"{1000 * median / len(paths):.1f} ms/page (best {1000 * best / len(paths):.1f})")
        sizes = [p.stat().st_size for p in paths]
        css = (feedback.feedback_dir(work) / feedback.STYLESHEET).stat().st_size
        print(f"page size: mean {statistics.mean(sizes) / 1024:.1f} KB, largest {max(sizes) / 1024:.1f} KB "
              f"(+ {css / 1024:.1f} KB stylesheet shared by all pages)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
