"""nbgrader's own tools on a course workspace: nothing of ours overwritten, no hidden test shown,
and a manual grade from formgrader reaching the feedback, results.csv and the class report."""

from __future__ import annotations

import csv
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import cells, samples
from grader.intake import interop
from grader.pages import feedback
from grader.prepare.release import read
from grader.record.gradebook import open_gradebook

pytestmark = pytest.mark.slow

CH = "00_mini"
BIN = Path(sys.executable).parent
MINI = Path(__file__).parent / "fixtures" / "course" / "solutions"
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """The mini class (perfect, partial, untouched, syntax error) graded with `course grade`, then `course feedback`."""
    tmp = tmp_path_factory.mktemp("interop")
    shutil.copytree(MINI, tmp / "solutions")
    samples.write_samples(tmp / "subs", solutions_dir=tmp / "solutions")
    graded = run("course", "grade", str(tmp / "subs"), "--workdir", str(tmp / "work"), "--jobs", "2",
                 "--solutions", str(tmp / "solutions"))
    assert graded.returncode == 0, graded.stderr[-3000:]
    made = run("course", "feedback", "--workdir", str(tmp / "work"), "--solutions", str(tmp / "solutions"))
    assert made.returncode == 0, made.stderr[-3000:]
    return tmp / "work"


def hidden_lines() -> list[str]:
    lines = []
    for c in read(MINI / CH / "mini.ipynb").cells:
        if cells.is_test(c):
            _, part = cells.split_hidden(cells.source_text(c))
            lines += [line.strip() for line in part.splitlines() if len(line.strip()) > 20]
    return lines


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_ours_never_sit_where_nbgrader_writes(work):
    assert (work / interop.GRADES_CSV).is_file() and (work / interop.RESULTS_CSV).is_file()
    assert not (work / "grades.csv").exists() and not (work / "feedback").exists()
    assert len(list(feedback.feedback_dir(work).rglob("*.html"))) == 4


def test_nbgrader_generate_feedback_refuses_and_writes_nothing(work):
    autograded = (work / "autograded" / "bob" / CH / "mini.ipynb").read_text()
    assert any(line in autograded for line in hidden_lines()), "the danger is real: autograded notebooks hold hidden tests"
    ours = snapshot(feedback.feedback_dir(work))
    for argv, cwd in [
        (["nbgrader", "generate_feedback", CH], work),
        (["nbgrader", "generate_feedback", CH, "--force"], work),
        (["nbgrader", "generate_feedback", CH, "--force", f"--CourseDirectory.root={work}"], work.parent),
        # with the hook switched off on the command line, the refusing preprocessor still stops it
        (["nbgrader", "generate_feedback", CH, "--force", "--GenerateFeedback.pre_convert_hook=None"], work),
    ]:
        proc = run(*argv, cwd=cwd)
        assert proc.returncode != 0, f"{argv}: {proc.stderr[-2000:]}"
        assert "course feedback" in proc.stderr and "hidden tests" in proc.stderr, proc.stderr[-2000:]
        pages = list((work / "feedback").rglob("*.html")) if (work / "feedback").exists() else []
        assert not pages, f"{argv} wrote {pages}"
    assert snapshot(feedback.feedback_dir(work)) == ours, "our pages were touched"


def test_nbgrader_export_leaves_our_csv_files_alone(work):
    ours = {name: (work / name).read_bytes() for name in (interop.GRADES_CSV, interop.RESULTS_CSV)}
    proc = run("nbgrader", "export", cwd=work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (work / "grades.csv").is_file(), "nbgrader wrote its own file"
    assert {name: (work / name).read_bytes() for name in ours} == ours


def test_a_manual_grade_and_comment_reach_feedback_results_and_report(work):
    with open_gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:  # what formgrader's API does
        g = gb.find_grade("test_ex2_row_sums", "mini", CH, "bob")
        g.manual_score, g.needs_manual_grade = 3.0, False
        gb.find_comment("ex2_row_sums", "mini", CH, "bob").manual_comment = "Close: keepdim was missing."
        gb.find_grade("test_ex1_double", "mini", CH, "carol").needs_manual_grade = True  # flagged for a person
        gb.db.commit()
    for argv in (["feedback", "--solutions", str(work.parent / "solutions")], ["export"], ["report"]):
        proc = run("course", *argv, "--workdir", str(work))
        assert proc.returncode == 0, proc.stderr[-2000:]

    page = html.unescape((feedback.feedback_dir(work) / "bob" / CH / "mini.html").read_text())
    score = re.search(r"Score: ([\d.]+) / ([\d.]+)", page)
    rows = [float(p) for p in re.findall(r'<td class="num">([\d.]+) / [\d.]+', page)]
    assert score and (float(score[1]), float(score[2])) == (7.0, 10.0), score
    assert sum(rows) == 7.0 and rows == [4.0, 3.0], "the rows add up to the score"
    assert "Close: keepdim was missing." in page and "manual" in page

    rows = list(csv.DictReader((work / interop.RESULTS_CSV).open(encoding="utf-8")))
    assert list(rows[0])[:7] == ["student", "chapter", "test", "points", "max", "status", "reason"]
    bob = {r["test"]: r for r in rows if r["student"] == "bob"}
    assert (bob["test_ex2_row_sums"]["points"], bob["test_ex2_row_sums"]["manual"]) == ("3", "yes")
    assert bob["test_ex2_row_sums"]["comment"] == "Close: keepdim was missing."
    assert bob["test_ex2_row_sums"]["status"] == "failed" and bob["test_ex2_row_sums"]["reason"]
    assert len(rows) == 4 * 2, "a row per student and test"
    grades = {r["student_id"]: r for r in csv.DictReader((work / interop.GRADES_CSV).open(encoding="utf-8"))}
    assert grades["bob"][CH] == "7"

    report = (work / "report" / "report.html").read_text(encoding="utf-8")
    review = report.split('id="needs-review"')[1]
    assert "carol" in review and "test_ex1_double" in review and "needs manual grade" in review
    assert "<script" not in report and 'src="http' not in report
    assert report.count("data:image/svg+xml;base64,") == 1, "one plot per chapter"
