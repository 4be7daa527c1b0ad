"""What an instructor's slip cannot do to recorded grades: a --chapter the notebooks contradict, a status over a grade."""

from __future__ import annotations

import json
import zipfile

import pytest
from click.testing import CliRunner

from grader import grade, samples
from grader.cli.app import cli
from grader.engines.fork import pool as forkpool
from grader.exceptions import OptionError
from grader.intake.workspace import Workspace
from grader.record import results as record
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
