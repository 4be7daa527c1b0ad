"""A real class's downloads: students keyed by the LMS's own identity, every file a row, ids unique."""

from __future__ import annotations

import csv
import itertools
import json
import types
import zipfile

import pytest

from grader import grade, samples
from grader.intake import ids
from grader.intake.lms import extract_lms_zip, member_name
from grader.intake.submissions import SKIPPED, SUPERSEDED, discover
from grader.record import export

CH = "01_tensors"
EXPECTED = {CH: "tensors.ipynb", "02_dtypes": "dtypes.ipynb"}


def notebook(solved: bool) -> str:
    """A learner's notebook of the chapter: every exercise solved, or the release untouched."""
    answers = dict.fromkeys(samples.answer_ids(CH), samples.SOLUTION) if solved else {}
    return json.dumps(samples.make_submission(CH, answers))


SOLVED, UNTOUCHED = notebook(True), notebook(False)


def make_zip(path, members: dict[str, str]):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def rows_of(zip_members: dict[str, str], tmp_path, **kw):
    return extract_lms_zip(make_zip(tmp_path / "class.zip", zip_members), tmp_path / "out", EXPECTED, **kw)


def graded(rows):
    return {r.student: r for r in rows if r.path is not None}


# --- Canvas ------------------------------------------------------------------------------

def test_two_canvas_users_with_the_same_login_part_are_two_students(tmp_path):
    rows = rows_of({"smithjohn_11111_1_tensors.ipynb": SOLVED, "smithjohn_33333_2_tensors.ipynb": UNTOUCHED}, tmp_path)
    assert [(r.student, r.name, r.status) for r in rows] == [("canvas-11111", "smithjohn", None),
                                                             ("canvas-33333", "smithjohn", None)]
    assert graded(rows)["canvas-11111"].path.read_text() == SOLVED
    assert graded(rows)["canvas-33333"].path.read_text() == UNTOUCHED


@pytest.mark.parametrize("order", [1, -1])
def test_the_latest_upload_is_graded_and_the_earlier_one_is_listed_as_superseded(tmp_path, order):
    members = {"doejane_22222_500_tensors.ipynb": UNTOUCHED, "doejane_LATE_22222_501_tensors-1.ipynb": SOLVED}
    rows = rows_of(dict(list(members.items())[::order]), tmp_path)
    [best] = [r for r in rows if r.path is not None]
    assert (best.student, best.name, best.path.name, best.late) == ("canvas-22222", "doejane", "tensors-1.ipynb", True)
    assert best.path.read_text() == SOLVED, "the newer upload, whatever the order in the zip"
    assert best.note.startswith("submitted late") and "latest of 2 uploads" in best.note
    [old] = [r for r in rows if r.status == SUPERSEDED]
    assert old.student == "canvas-22222" and old.problem == "tensors.ipynb superseded by tensors-1.ipynb, a later upload"


def test_canvas_suffixes_count_as_numbers_then_the_submission_id_decides(tmp_path):
    rows = rows_of({"a_1_10_tensors-9.ipynb": "9", "a_1_11_tensors-10.ipynb": "10", "a_1_12_tensors-2.ipynb": "2",
                    "b_2_20_tensors-1.ipynb": "older", "b_2_21_tensors-1.ipynb": "newer"}, tmp_path)
    assert graded(rows)["canvas-1"].path.read_text() == "10"
    assert graded(rows)["canvas-2"].path.read_text() == "newer"
    assert sum(r.status == SUPERSEDED for r in rows) == 3


def test_every_file_not_graded_is_a_row_with_its_reason(tmp_path):
    rows = rows_of({"doejane_22222_1_tensors.ipynb": SOLVED, "doejane_22222_2_notes.txt": "x",
                    "doejane_22222_3_dtypes.ipynb": "{}", "roe_5_6_essay.pdf": "x", "README.txt": "x",
                    "__MACOSX/._doejane_22222_1_tensors.ipynb": "x"}, tmp_path, chapter=CH)
    shown = [(r.student, r.status, r.problem) for r in rows if r.path is None]
    assert shown == [
        ("-", SKIPPED, "README.txt skipped: not named as Canvas names submissions"),
        ("canvas-22222", SKIPPED, "dtypes.ipynb skipped: the notebook of 02_dtypes, not of this chapter "
                                  "(tensors.ipynb is graded)"),
        ("canvas-22222", SKIPPED, "notes.txt skipped: not a notebook"),
        ("canvas-5", None, "no notebook among the files submitted (essay.pdf)"),  # a student's row: recorded
    ], "__MACOSX (the archiver's resource forks) is no one's file"
    assert {r.chapter for r in rows} == {CH}


# --- Moodle ------------------------------------------------------------------------------

def test_a_moodle_student_is_keyed_by_participant_id_and_keeps_the_name(tmp_path):
    nfd = "Jose\u0301 Nu\u0301n\u0303ez"  # as a Mac may write it
    rows = rows_of({f"{nfd}_23456_assignsubmission_file_/tensors.ipynb": SOLVED,
                    "José Núñez_23456_assignsubmission_onlinetext_/onlinetext.html": "<p>hi</p>",
                    "José Núñez_45678_assignsubmission_file_/tensors.ipynb": UNTOUCHED,
                    "Ann Lee_34567_assignsubmission_onlinetext_/onlinetext.html": "<p>no file</p>"}, tmp_path)
    assert [(r.student, r.name, r.status, r.path is not None) for r in rows] == [
        ("moodle-23456", "José Núñez", None, True), ("moodle-23456", "José Núñez", SKIPPED, False),
        ("moodle-34567", "Ann Lee", None, False), ("moodle-45678", "José Núñez", None, True)]
    assert rows[0].path == tmp_path / "out" / "moodle-23456" / CH / "tensors.ipynb"
    assert rows[2].problem == "no notebook among the files submitted (onlinetext.html)"


def test_a_name_zipped_without_the_utf8_flag_is_read_as_utf8():
    member = types.SimpleNamespace(flag_bits=0, filename="José_1_assignsubmission_file_/t.ipynb".encode().decode("cp437"))
    assert member_name(member) == "José_1_assignsubmission_file_/t.ipynb"


# --- folders ----------------------------------------------------------------------------

def put(root, folder, chapter=CH, name="tensors.ipynb"):
    path = root / folder / chapter / name
    path.parent.mkdir(parents=True)
    path.write_text("{}")


def test_two_folders_that_normalise_alike_get_two_ids_whatever_the_listing_order(tmp_path):
    for folder in ("Zzz Victim Perfect", "zzz_victim_perfect", "José Núñez", "Jose Nunez", "Ann Lee"):
        put(tmp_path, folder)
    subs = discover(tmp_path, EXPECTED)
    got = {s.name or s.student: s for s in subs}
    assert len(subs) == 5 and len({s.student for s in subs}) == 5
    assert got["zzz_victim_perfect"].student == "zzz_victim_perfect" and got["zzz_victim_perfect"].note is None
    victim = got["Zzz Victim Perfect"]
    assert victim.student.startswith("zzz_victim_perfect-") and victim.name == "Zzz Victim Perfect"
    assert f"folder 'Zzz Victim Perfect' is student {victim.student}" in victim.note
    alike = {got["José Núñez"].student, got["Jose Nunez"].student}
    assert len(alike) == 2 and all(s.startswith("jose_nunez-") for s in alike), "neither takes jose_nunez from the other"
    assert got["Ann Lee"].student == "ann_lee" and got["Ann Lee"].note is None
    folders = list(got)
    first = ids.folder_ids(folders)
    assert all(ids.folder_ids(p) == first for p in itertools.permutations(folders))


def test_a_hidden_folder_is_a_status_line_and_system_folders_are_none(tmp_path):
    for folder in ("alice", ".bob", "__MACOSX", ".ipynb_checkpoints"):
        put(tmp_path, folder)
    subs = discover(tmp_path, EXPECTED)
    assert [(s.student, s.chapter, s.status) for s in subs] == [(".bob", "-", SKIPPED), ("alice", CH, None)]
    assert subs[0].problem.startswith("hidden folder .bob/ skipped")


# --- end to end -------------------------------------------------------------------------

@pytest.mark.slow
def test_a_canvas_and_a_moodle_zip_grade_one_row_per_student_with_the_latest_file(tmp_path):
    canvas = make_zip(tmp_path / "canvas.zip", {
        "smithjohn_11111_500_tensors.ipynb": SOLVED,
        "smithjohn_33333_501_tensors.ipynb": UNTOUCHED,
        "doejane_LATE_22222_503_tensors-1.ipynb": SOLVED,
        "doejane_22222_502_tensors.ipynb": UNTOUCHED,
        "doejane_22222_504_notes.txt": "my notes",
    })
    moodle = make_zip(tmp_path / "moodle.zip", {
        "José Núñez_23456_assignsubmission_file_/tensors.ipynb": SOLVED,
        "José Núñez_23456_assignsubmission_onlinetext_/onlinetext.html": "<p>done</p>",
        "Ann Lee_34567_assignsubmission_file_/tensors.ipynb": UNTOUCHED,
    })
    work = tmp_path / "work"
    reports = [r for zp in (canvas, moodle) for r in grade.main(zp, work, jobs=2, engine="fork", cell_timeout=20)]
    students = {r.student: r for r in reports if r.status not in (SKIPPED, SUPERSEDED)}
    assert sorted(r.student for r in reports if r.status not in (SKIPPED, SUPERSEDED)) == sorted(students), "one row each"
    assert {s: r.status for s, r in students.items()} == dict.fromkeys(
        ["canvas-11111", "canvas-22222", "canvas-33333", "moodle-23456", "moodle-34567"], "graded")
    full = students["canvas-11111"].max_score
    assert full > 0
    assert {s: r.score for s, r in students.items()} == {"canvas-11111": full, "canvas-22222": full, "canvas-33333": 0,
                                                         "moodle-23456": full, "moodle-34567": 0}
    assert students["canvas-22222"].late and not students["canvas-11111"].late
    assert sorted((r.student, r.status) for r in reports if r.status in (SKIPPED, SUPERSEDED)) == [
        ("canvas-22222", SKIPPED), ("canvas-22222", SUPERSEDED), ("moodle-23456", SKIPPED)]
    db_url = grade.Workspace(work).default_db_url()
    with export.write_grades_csv(db_url, work / "grades.csv", workdir=work).open(encoding="utf-8") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert {s: r["student_name"] for s, r in rows.items()} == {
        "canvas-11111": "smithjohn", "canvas-22222": "doejane", "canvas-33333": "smithjohn",
        "moodle-23456": "José Núñez", "moodle-34567": "Ann Lee"}
    assert rows["canvas-22222"]["late"] == CH and float(rows["canvas-22222"][CH]) == full
    with export.write_results_csv(work, db_url, work / "results.csv").open(encoding="utf-8") as fh:
        results = list(csv.DictReader(fh))
    assert {r["student"] for r in results} == set(rows)
    assert sorted((r["student"], r["submission"]) for r in results if not r["test"]) == [
        ("canvas-22222", SKIPPED), ("canvas-22222", SUPERSEDED), ("moodle-23456", SKIPPED)], "every file not graded is a row"
