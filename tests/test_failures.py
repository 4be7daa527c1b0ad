"""A failure is never a number: a batch whose chapter solution fails one of its own tests where it runs.

The mini chapter's solution is broken here (a hidden test raises MemoryError, as a memory cap or a
GPU that does not work makes it do on some machines). Nothing a learner did decides that, so no
learner gets a score for the chapter: the grade files leave it empty and say why, `course grade`
ends with a warning, the pages say "not graded yet" in a learner's words, and the workspace's
grader.log holds the cause.
"""

from __future__ import annotations

import csv
import logging
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from grader import cells, samples
from grader.cli.app import cli

pytestmark = pytest.mark.slow

CH = "00_mini"
MINI = Path(__file__).resolve().parent / "fixtures" / "course" / "solutions"
BIN = Path(sys.executable).parent


def put(root: Path, student: str, nb) -> None:
    path = root / student / CH / "mini.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """A class of two (a perfect and an untouched notebook) graded against a solution that fails
    test_ex1_double where it runs, then `course feedback`."""
    from grader.engines.fork import pool as forkpool

    tmp = tmp_path_factory.mktemp("failures")
    solutions = tmp / "solutions"
    import shutil

    shutil.copytree(MINI, solutions)
    source = solutions / CH / "mini.ipynb"
    nb = nbformat.read(str(source), as_version=4)
    test = next(c for c in nb.cells if cells.grade_id(c) == "test_ex1_double")
    test.source = test.source.replace("### BEGIN HIDDEN TESTS",
                                      "### BEGIN HIDDEN TESTS\nraise MemoryError('cannot allocate 64 MiB')", 1)
    nbformat.write(nb, str(source))
    subs, work = tmp / "subs", tmp / "work"
    answers = dict.fromkeys(samples.answer_ids(CH, solutions), samples.SOLUTION)
    put(subs, "alice", samples.make_submission(CH, answers, solutions_dir=solutions))
    put(subs, "bob", samples.make_submission(CH, {}, solutions_dir=solutions))
    runner = CliRunner()
    try:
        graded = runner.invoke(cli, ["grade", str(subs), "--workdir", str(work), "--solutions", str(solutions),
                                     "--jobs", "1"])
    finally:
        forkpool.shutdown()
    assert graded.exit_code == 0, graded.output
    pages = runner.invoke(cli, ["feedback", "--workdir", str(work), "--jobs", "1"])
    assert pages.exit_code == 0, pages.output
    exported = runner.invoke(cli, ["export", "--workdir", str(work)])
    return {"work": work, "grade": graded, "export": exported}


def rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_course_grades_csv_leaves_the_chapter_empty_and_the_total_incomplete(broken):
    got = {r["student_id"]: r for r in rows(broken["work"] / "course-grades.csv")}
    assert set(got) == {"alice", "bob"}
    for row in got.values():
        assert row[CH] == "", row  # not 0: no score was given
        assert row["total"] == "incomplete" and row["max_total"] == "10"
        assert row["not_graded"] == f"{CH}: error"


def test_results_csv_has_no_points_for_them_and_says_their_status(broken):
    got = rows(broken["work"] / "results.csv")
    assert {r["student"] for r in got} == {"alice", "bob"} and len(got) == 4
    assert all(r["points"] == "" and r["submission"] == "error" and r["max"] in ("4", "6") for r in got)
    unjudged = {r["student"]: r["status"] for r in got if r["test"] == "test_ex1_double"}
    assert unjudged == {"alice": "no reference", "bob": "no reference"}


def test_course_grade_ends_with_a_warning_naming_how_many_and_why(broken):
    result, work = broken["grade"], broken["work"]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("warning: 2 submission(s) not graded"), result.stderr
    assert "test_ex1_double" in last and f"the cause is in {work / 'grader.log'}" in last
    assert "alice/00_mini" in last and "bob/00_mini" in last
    table = [line.split() for line in result.stdout.splitlines() if line.startswith(("alice", "bob"))]
    assert [(t[2], t[3]) for t in table] == [("-", "error"), ("-", "error")], result.stdout  # no score shown
    assert "the cause is in" in broken["export"].stderr and broken["export"].exit_code == 0


def test_grader_log_holds_the_failing_test_and_its_error(broken):
    log = (broken["work"] / "grader.log").read_text(encoding="utf-8")
    line = next(line for line in log.splitlines() if "fails its own test" in line)
    assert "ERROR grader.verdict.reference" in line and CH in line
    assert "test_ex1_double: MemoryError: cannot allocate 64 MiB" in line
    recorded = (broken["work"] / "results" / "alice" / f"{CH}.json").read_text(encoding="utf-8")
    assert str(broken["work"] / "grader.log") in recorded  # the result points to the file that exists


def test_the_learners_page_says_not_graded_yet_without_instructor_wording(broken):
    page = (broken["work"] / "course-feedback" / "alice" / CH / "mini.html").read_text(encoding="utf-8")
    assert "Score: not graded yet" in page
    for said in ("Score: 0", "0 / 4", "instructor", "grader.log", "grader's log", "solution"):
        assert said not in page, said
    assert "not graded yet" in page.split("<table>")[1]  # the test not judged says so on its row


def test_verbose_shows_the_graders_lines_and_no_sql(broken):
    from grader.cli.base import setup_logging

    try:
        setup_logging(1)
        assert logging.getLogger("grader.verdict.reference").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("sqlalchemy.engine.Engine").isEnabledFor(logging.INFO)
        assert not logging.getLogger("alembic.runtime.migration").isEnabledFor(logging.INFO)
    finally:
        setup_logging(0)
    done = subprocess.run([str(BIN / "course"), "-vv", "export", "--workdir", str(broken["work"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "SELECT" not in done.stderr and "PRAGMA" not in done.stderr
    assert len(done.stderr.splitlines()) < 40, done.stderr
