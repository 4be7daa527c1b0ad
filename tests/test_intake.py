"""grader.intake.lms: LMS downloads become <student>/<chapter>/<notebook> submissions."""

from __future__ import annotations

import zipfile

import pytest

from grader.exceptions import SubmissionError
from grader.intake.lms import extract_lms_zip, lms_zip_chapter
from grader.intake.lms_names import LmsFile, parse_lms_name
from grader.intake.submissions import SKIPPED

EXPECTED = {"01_tensors": "tensors.ipynb", "02_dtypes": "dtypes.ipynb"}


@pytest.mark.parametrize(
    ("member", "parsed"),
    [
        ("doejane_12345_67890_tensors.ipynb", LmsFile("canvas-12345", "doejane", "tensors.ipynb", submission=67890)),
        ("doejane_LATE_12345_67890_tensors-1.ipynb",
         LmsFile("canvas-12345", "doejane", "tensors-1.ipynb", late=True, submission=67890)),
        ("Jane Doe_4242_assignsubmission_file_/tensors.ipynb", LmsFile("moodle-4242", "Jane Doe", "tensors.ipynb")),
        ("Jane Doe_4242_assignsubmission_file_tensors.ipynb", LmsFile("moodle-4242", "Jane Doe", "tensors.ipynb")),
        ("random.ipynb", None),
    ],
)
def test_canvas_and_moodle_names(member, parsed):
    assert parse_lms_name(member) == parsed


def make_zip(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_a_canvas_zip_unpacks_per_student_and_skips_what_it_must(tmp_path):
    """Each skipped file is a row of its own, with its reason (it used to be a log line only)."""
    zp = make_zip(tmp_path / "subs.zip", {
        "doejane_1_2_tensors.ipynb": "{}",
        "smithbob_LATE_3_4_tensors-1.ipynb": "{}",
        "smithbob_3_5_notes.txt": "hi",
        "../evil_5_6_tensors.ipynb": "{}",
        "README.txt": "hello",
    })
    dest = tmp_path / "out"
    rows = extract_lms_zip(zp, dest, EXPECTED)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.ipynb")) == [
        "canvas-1/01_tensors/tensors.ipynb", "canvas-3/01_tensors/tensors-1.ipynb"]
    graded = [s for s in rows if s.path is not None]
    assert [(s.student, s.name, s.chapter, s.path.name) for s in graded] == [
        ("canvas-1", "doejane", "01_tensors", "tensors.ipynb"), ("canvas-3", "smithbob", "01_tensors", "tensors-1.ipynb")]
    assert "expected tensors.ipynb" in graded[1].note and "not graded: notes.txt" in graded[1].note
    assert (graded[0].late, graded[1].late) == (False, True), "Canvas's _LATE_ is recorded, not dropped"
    assert graded[1].note.startswith("submitted late")
    skipped = {s.problem.split(" skipped: ")[0]: (s.student, s.status, s.problem.split(" skipped: ")[1])
               for s in rows if s.path is None}
    assert skipped == {"notes.txt": ("canvas-3", SKIPPED, "not a notebook"),
                       "../evil_5_6_tensors.ipynb": ("-", SKIPPED, "unsafe path"),
                       "README.txt": ("-", SKIPPED, "not named as Canvas names submissions")}


def test_a_moodle_zip_with_folders_unpacks(tmp_path):
    zp = make_zip(tmp_path / "m.zip", {"Jane Doe_77_assignsubmission_file_/dtypes.ipynb": "{}"})
    [row] = extract_lms_zip(zp, tmp_path / "out", EXPECTED)
    assert (row.student, row.name, row.chapter) == ("moodle-77", "Jane Doe", "02_dtypes")
    assert row.path == tmp_path / "out" / "moodle-77" / "02_dtypes" / "dtypes.ipynb" and row.path.exists()


def test_an_unclear_chapter_or_a_broken_zip_is_a_clear_error(tmp_path):
    zp = make_zip(tmp_path / "mixed.zip", {"a_1_2_tensors.ipynb": "{}", "b_3_4_dtypes.ipynb": "{}"})
    with pytest.raises(SubmissionError, match="--chapter"):
        extract_lms_zip(zp, tmp_path / "o1", EXPECTED)
    rows = extract_lms_zip(zp, tmp_path / "o2", EXPECTED, chapter="01_tensors")
    assert len(list((tmp_path / "o2").rglob("*.ipynb"))) == 2, "the grader tells a wrong chapter by its cells"
    assert [(r.student, r.chapter) for r in rows] == [("canvas-1", "01_tensors"), ("canvas-3", "01_tensors")]
    with pytest.raises(SubmissionError, match="not a chapter of this course"):
        extract_lms_zip(zp, tmp_path / "o4", EXPECTED, chapter="99_nothing")
    (tmp_path / "bad.zip").write_text("not a zip")
    with pytest.raises(SubmissionError, match="not a readable zip"):
        extract_lms_zip(tmp_path / "bad.zip", tmp_path / "o3", EXPECTED)


def test_the_chapter_of_a_zip_is_told_from_its_names_as_unpacking_will_guess_it(tmp_path):
    """What the fork servers are prestarted for (their preload) before the zip is unpacked."""
    canvas = make_zip(tmp_path / "c.zip", {"a_1_2_dtypes.ipynb": "{}", "b_LATE_3_4_dtypes-1.ipynb": "{}",
                                           "b_3_5_notes.txt": "x", "../evil_5_6_tensors.ipynb": "{}"})
    assert lms_zip_chapter(canvas, EXPECTED) == "02_dtypes"
    extract_lms_zip(canvas, tmp_path / "out", EXPECTED)
    assert {p.parent.name for p in (tmp_path / "out").rglob("*.ipynb")} == {"02_dtypes"}
    mixed = make_zip(tmp_path / "mixed.zip", {"a_1_2_tensors.ipynb": "{}", "b_3_4_dtypes.ipynb": "{}"})
    assert lms_zip_chapter(mixed, EXPECTED) is None
    (tmp_path / "bad.zip").write_text("not a zip")
    assert lms_zip_chapter(tmp_path / "bad.zip", EXPECTED) is None
