"""What an instructor's slip cannot do to recorded grades: a --chapter the notebooks contradict, a status over a grade."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import grade, samples
from grader.cli.app import cli
from grader.engines.fork import pool as forkpool
from grader.exceptions import OptionError
from grader.intake.workspace import Workspace
from grader.pages import report
from grader.record import export, review, scores
from grader.record import gradebook as gbmod
from grader.record import results as record
from grader.verdict import outcome
from grader.verdict.outcome import Report

CH = "01_tensors"


def chapter_one_zip(path, count: int = 3):
    solved = json.dumps(samples.make_submission(CH, dict.fromkeys(samples.answer_ids(CH), samples.SOLUTION)))
    with zipfile.ZipFile(path, "w") as z:
        for k in range(count):
            z.writestr(f"learner{k}_{100 + k}_{500 + k}_tensors.ipynb", solved)
        z.writestr("odd_999_599_dtypes.ipynb", json.dumps(samples.make_submission("02_dtypes", {})))
    return path


def test_a_chapter_the_notebooks_contradict_is_refused_before_anything_is_recorded(tmp_path):
    work = tmp_path / "work"
    with pytest.raises(OptionError, match=f"3 of the 4 notebook\\(s\\) recognised are chapter {CH}'s"):
        grade.main(chapter_one_zip(tmp_path / "c.zip"), work, chapter="02_dtypes", engine="fork")
    assert not (work / "gradebook.db").exists() and not (work / "results").exists()


def test_the_cli_refuses_a_contradicting_chapter_with_exit_2_naming_the_chapter(tmp_path, monkeypatch):
    monkeypatch.setattr(forkpool, "prestart", lambda options, count: None)
    result = CliRunner().invoke(cli, ["grade", str(chapter_one_zip(tmp_path / "c.zip")), "--chapter", "02_dtypes",
                                      "--workdir", str(tmp_path / "w")])
    assert result.exit_code == 2, result.output
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert f"chapter {CH}'s" in line and "--chapter 02_dtypes" in line


@pytest.mark.parametrize("status", ["missing", "unreadable", "wrong chapter", "error"])
def test_no_status_but_a_grade_replaces_a_recorded_grade(tmp_path, status):
    ws = Workspace(tmp_path / "work")
    path = ws.result_path("canvas-1", CH)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"student": "canvas-1", "chapter": CH, "status": "graded", "score": 90, "max_score": 100}))
    seen = []
    recorder = record.Recorder(ws, f"sqlite:///{tmp_path / 'no' / 'such' / 'gradebook.db'}", seen.append)
    report = Report("canvas-1", CH, status, message="why")
    recorder.add(report, tmp_path / "unused.ipynb")
    recorder.flush()  # the gradebook above cannot even be opened: nothing was written to it
    assert json.loads(path.read_text())["score"] == 90
    assert seen == [report] and report.score == 90 and report.message == "why; the grade recorded earlier is kept"


def test_course_grades_csv_and_the_report_say_the_same_status_for_every_chapter(tmp_path):
    """Not submitted, missing, unreadable, error: a status in both, never a number in one and a word in the other."""
    source = Path(__file__).parent / "fixtures" / "course" / "solutions" / "00_mini" / "mini.ipynb"
    work = tmp_path / "work"
    work.mkdir()
    db = f"sqlite:///{work / 'gradebook.db'}"
    gbmod.check(db, create=True)
    points = outcome.test_points(source)
    statuses = {("ann", "00_a"): "graded", ("ann", "00_b"): "unreadable", ("bob", "00_a"): "missing",
                ("cat", "00_a"): "error"}
    for chapter in ("00_a", "00_b"):
        gbmod.register_chapter(db, chapter, source)
    for (student, chapter), status in statuses.items():
        scores.save(db, [scores.Scores(chapter, source.stem, student, dict.fromkeys(points, 1.0))])
        path = work / "results" / student / f"{chapter}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"student": student, "chapter": chapter, "status": status, "score": 2.0,
                                    "max_score": 10.0, "message": "why", "tests": []}))
    with export.write_grades_csv(db, work / "grades.csv", workdir=work).open(encoding="utf-8") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    head, table = report.student_table(report.build(report.load_results(work), review.read(db)))
    for line in table:
        student = line[1]
        for chapter in ("00_a", "00_b"):
            cell = line[head.index(chapter)]
            said = dict(p.split(": ") for p in rows[student]["not_graded"].split(";") if p).get(chapter)
            if cell == "—":
                assert said == "not submitted" and rows[student][chapter] == "", (student, chapter)
            elif said is None:
                assert rows[student][chapter] == cell, (student, chapter)
            else:
                assert said == cell and rows[student][chapter] == "", (student, chapter)
    assert rows["cat"]["total"] == "incomplete" and rows["ann"]["00_b"] == ""

