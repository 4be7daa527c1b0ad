"""An LMS zip read by its structure: whose file it is comes from the LMS's fields, never from a learner's name."""

from __future__ import annotations

import zipfile

import pytest

from grader.exceptions import SubmissionError
from grader.intake.lms import extract_lms_zip
from grader.intake.lms_names import CANVAS, MOODLE, parse_lms_name, zip_format
from grader.intake.submissions import SKIPPED, SUPERSEDED

EXPECTED = {"01_tensors": "tensors.ipynb", "02_dtypes": "dtypes.ipynb"}
EARLY, LATER = (2026, 11, 20, 9, 0, 0), (2026, 11, 21, 9, 0, 0)


def make_zip(path, members: dict):
    """``members``: name -> data, or name -> (data, the member's time)."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            data, when = data if isinstance(data, tuple) else (data, EARLY)
            z.writestr(zipfile.ZipInfo(name, date_time=when), data)
    return path


def rows_of(members: dict, tmp_path, **kw):
    return extract_lms_zip(make_zip(tmp_path / "class.zip", members), tmp_path / "out", EXPECTED, **kw)


def graded(rows):
    return {r.student: r for r in rows if r.path is not None}


def test_a_moodle_display_name_holding_another_participants_marker_is_its_own_participant(tmp_path):
    rows = rows_of({"Victim_1001_assignsubmission_file_/tensors.ipynb": "victim",
                    "Eve_1001_assignsubmission_file_ Mallory_2002_assignsubmission_file_/tensors.ipynb": "eve"},
                   tmp_path)
    got = graded(rows)
    assert got["moodle-1001"].path.read_text() == "victim" and got["moodle-1001"].name == "Victim"
    assert got["moodle-2002"].path.read_text() == "eve"
    assert got["moodle-2002"].name == "Eve_1001_assignsubmission_file_ Mallory"
    assert not [r for r in rows if r.status], "nobody's file superseded by another's"


def test_a_canvas_file_named_like_a_moodle_member_is_read_as_canvas(tmp_path):
    rows = rows_of({"smithjohn_11111_500_tensors.ipynb": "honest",
                    "eve_LATE_3003_77_x_1001_assignsubmission_file_tensors.ipynb": "eve"}, tmp_path)
    got = graded(rows)
    assert sorted(got) == ["canvas-11111", "canvas-3003"]
    assert got["canvas-3003"].late and got["canvas-3003"].name == "eve"
    assert got["canvas-11111"].path.read_text() == "honest"


def test_one_format_per_zip_and_a_member_that_fits_it_not_is_refused_by_name(tmp_path):
    hostile = "=HYPERLINK(x)_" + "y" * 200 + ".ipynb"
    rows = rows_of({"Ann Lee_34567_assignsubmission_file_/tensors.ipynb": "ann",
                    "Bo Ek_45678_assignsubmission_file_/tensors.ipynb": "bo",
                    "doejane_22222_1_tensors.ipynb": "canvas-looking, in a Moodle zip",
                    hostile: "?"}, tmp_path)
    assert sorted(graded(rows)) == ["moodle-34567", "moodle-45678"]
    refused = [r.problem for r in rows if r.status == SKIPPED]
    assert refused[0] == "doejane_22222_1_tensors.ipynb skipped: not named as Moodle names submissions"
    assert refused[1].startswith("=HYPERLINK(x)_yyy") and len(refused[1]) < 140, "named, capped"
    assert zip_format(["a/b", "x_1_assignsubmission_file_/t.ipynb", "y_2_assignsubmission_file_/t.ipynb",
                       "a_1_2_t.ipynb"]) == MOODLE
    assert zip_format(["a_1_2_t.ipynb"]) == CANVAS and zip_format(["t.ipynb"]) is None
    assert parse_lms_name("A_1_assignsubmission_file_B_2_assignsubmission_file_t.ipynb") is None, "two ways: neither"


def test_a_zip_named_as_neither_lms_is_refused_in_one_line(tmp_path):
    with pytest.raises(SubmissionError, match="neither"):
        rows_of({"tensors.ipynb": "{}", "alice/tensors.ipynb": "{}"}, tmp_path, chapter="01_tensors")


@pytest.mark.parametrize("copy_is_later", [True, False])
def test_moodle_grades_the_upload_with_the_latest_time_whatever_its_name(tmp_path, copy_is_later):
    folder = "Ann Lee_34567_assignsubmission_file_/"
    rows = rows_of({folder + "dtypes.ipynb": ("plain", EARLY if copy_is_later else LATER),
                    folder + "dtypes (1).ipynb": ("copy", LATER if copy_is_later else EARLY)}, tmp_path)
    [best] = graded(rows).values()
    want, other = ("dtypes (1).ipynb", "dtypes.ipynb") if copy_is_later else ("dtypes.ipynb", "dtypes (1).ipynb")
    assert (best.chapter, best.file, best.superseded) == ("02_dtypes", want, [other])
    assert best.path.read_text() == ("copy" if copy_is_later else "plain")
    [old] = [r for r in rows if r.status == SUPERSEDED]
    assert old.problem == f"{other} superseded by {want}, a later upload"


def test_canvas_grades_the_highest_submission_id_across_names(tmp_path):
    rows = rows_of({"doejane_22222_501_tensors (1).ipynb": "newer", "doejane_22222_500_tensors.ipynb": "older",
                    "roe_5_8_tensors-1.ipynb": "re-upload", "roe_5_9_tensors.ipynb": "first"}, tmp_path)
    got = graded(rows)
    assert got["canvas-22222"].path.read_text() == "newer" and got["canvas-22222"].superseded == ["tensors.ipynb"]
    assert got["canvas-5"].path.read_text() == "re-upload", "Canvas's -N marks a re-upload of the same name"
