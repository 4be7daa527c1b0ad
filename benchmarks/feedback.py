"""What a feedback page costs: milliseconds and kilobytes per page of ``course feedback``.

Builds the feedback of a graded class: the sample class (``course samples``: four students, every
chapter), graded here first unless ``--workdir`` names a graded workspace (``make demo``'s
``course-work/``). ``--copies K`` repeats the class K times under other student names (results and
autograded notebooks copied; a bigger class gives steadier figures). The pages are built three
times in this process, imports done, with one worker and with ``--jobs`` workers. Printed: wall
milliseconds per page, and the pages' mean and largest size (the shared stylesheet counted once).
Then one page per chapter (its release with the hidden tests inside, every test failed), rendered
five times: the median milliseconds against the target of 50 ms a page.

    python benchmarks/feedback.py [--workdir course-work] [--copies 10] [--jobs 2]

Not a timed test: compare figures from one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import cells, grade, project, samples  # noqa: E402
from grader.pages import feedback  # noqa: E402
from grader.prepare import release  # noqa: E402

#: what one chapter's page may cost to render, median of five (ms)
PAGE_TARGET_MS = 50


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


def chapter_page_ms(chapter: str, tmp: Path) -> tuple[float, int]:
    """(median ms of five renders, bytes) of ``chapter``'s page: its release as autograde leaves it
    (hidden tests inside), every test failed."""
    source = project.source_notebook(chapter)
    nb = json.loads(release.dumps(release.build_release(chapter, source)))
    graded = json.loads(source.read_text(encoding="utf-8"))
    by_id = {cells.grade_id(c): c for c in graded["cells"] if cells.is_test(c)}
    nb["cells"] = [by_id.get(cells.grade_id(c), c) if cells.is_test(c) else c for c in nb["cells"]]
    tests = [{"grade_id": cells.grade_id(c), "points": 0.0, "max_points": cells.points(c), "status": "failed",
              "reason": "NotImplementedError: not answered yet", "note": ""} for c in nb["cells"] if cells.is_test(c)]
    result = {"student": "bob", "chapter": chapter, "status": "graded", "score": 0.0,
              "max_score": sum(t["max_points"] for t in tests), "message": "", "tests": tests}
    src = tmp / f"{chapter}.ipynb"
    src.write_text(json.dumps(nb), encoding="utf-8")
    visible = feedback.visible_tests(chapter, source)
    times, size = [], 0
    for _ in range(5):
        start = time.perf_counter()
        size = feedback.render((result, str(src), visible, str(tmp / f"{chapter}.html")))
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times), size


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
        for chapter in project.chapters():
            ms, size = chapter_page_ms(chapter, tmp)
            verdict = "ok" if ms <= PAGE_TARGET_MS else f"OVER the {PAGE_TARGET_MS} ms target"
            print(f"{chapter}: one page in {ms:.1f} ms (median of 5), {size / 1024:.0f} KB: {verdict}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
