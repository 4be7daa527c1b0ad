"""A real class's downloads: students keyed by the LMS's own identity, every file a row, ids unique."""

from __future__ import annotations

import csv
import io
import itertools
import json
import types
import zipfile

import pytest
from click.testing import CliRunner

from grader import grade, samples
from grader.cli.app import cli
from grader.intake import ids
from grader.intake.lms import extract_lms_zip, member_name
from grader.intake.submissions import SKIPPED, SUPERSEDED, discover

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

def timed_zip(path, members: dict):
    """``members``: name -> (data, the member's time, as Moodle keeps the upload's)."""
    with zipfile.ZipFile(path, "w") as z:
        for name, (data, when) in members.items():
            z.writestr(zipfile.ZipInfo(name, date_time=when), data)
    return path


EARLY, LATER = (2026, 11, 20, 9, 0, 0), (2026, 11, 21, 9, 0, 0)
CANVAS_GRADEBOOK = ("Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (23),Tensors (1234),Current Score\n"
                    "    Points Possible,,,,,10.00,100.00,\n"
                    '"Smith, John",11111,,jsmith,XC 101,8.00,,80.00\n'
                    '"Doe, Jane",22222,,jdoe,XC 101,7.00,,70.00\n'
                    '"Nobody, Here",44444,,nobody,XC 101,,5.00,\n')
MOODLE_WORKSHEET = ('Identifier,"Full name","Email address",Status,Grade,"Maximum Grade","Grade can be changed",'
                    '"Last modified (submission)","Last modified (grade)","Feedback comments"\r\n'
                    'Participant 23456,"José Núñez",j@example.org,"Submitted for grading",,100.00,Yes,-,-,\r\n'
                    'Participant 34567,"Ann Lee",a@example.org,"Submitted for grading",,100.00,Yes,-,-,\r\n')


@pytest.mark.slow
def test_a_canvas_and_a_moodle_zip_grade_one_row_per_student_with_the_latest_file(tmp_path):
    canvas = make_zip(tmp_path / "canvas.zip", {
        "smithjohn_11111_500_tensors.ipynb": SOLVED,
        "smithjohn_33333_501_tensors.ipynb": UNTOUCHED,
        "doejane_LATE_22222_503_tensors-1.ipynb": SOLVED,
        "doejane_22222_502_tensors.ipynb": UNTOUCHED,
        "doejane_22222_504_notes.txt": "my notes",
    })
    moodle = timed_zip(tmp_path / "moodle.zip", {
        "José Núñez_23456_assignsubmission_file_/tensors.ipynb": (SOLVED, EARLY),
        "José Núñez_23456_assignsubmission_onlinetext_/onlinetext.html": ("<p>done</p>", EARLY),
        "Ann Lee_34567_assignsubmission_file_/tensors.ipynb": (UNTOUCHED, EARLY),
        "Ann Lee_34567_assignsubmission_file_/tensors (1).ipynb": (SOLVED, LATER),
        "Eve_23456_assignsubmission_file_ M_56789_assignsubmission_file_/tensors.ipynb": (UNTOUCHED, LATER),
    })
    work = tmp_path / "work"
    reports = [r for zp in (canvas, moodle) for r in grade.main(zp, work, jobs=2, engine="fork", cell_timeout=20)]
    students = {r.student: r for r in reports if r.status not in (SKIPPED, SUPERSEDED)}
    assert sorted(r.student for r in reports if r.status not in (SKIPPED, SUPERSEDED)) == sorted(students), "one row each"
    full = students["canvas-11111"].max_score
    assert full > 0
    assert {s: (r.status, r.score) for s, r in students.items()} == {
        "canvas-11111": ("graded", full), "canvas-22222": ("graded", full), "canvas-33333": ("graded", 0),
        "moodle-23456": ("graded", full), "moodle-34567": ("graded", full), "moodle-56789": ("graded", 0)}, \
        "the victim keeps their own notebook; Ann's later copy is graded"
    assert students["canvas-22222"].late and not students["canvas-11111"].late
    assert sorted((r.student, r.status) for r in reports if r.status in (SKIPPED, SUPERSEDED)) == [
        ("canvas-22222", SKIPPED), ("canvas-22222", SUPERSEDED), ("moodle-23456", SKIPPED),
        ("moodle-34567", SUPERSEDED)]
    result = CliRunner().invoke(cli, ["export", "--workdir", str(work), "--out", str(work / "grades.csv")])
    assert result.exit_code == 0, result.output
    with (work / "grades.csv").open(encoding="utf-8") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert {s: r["student_name"] for s, r in rows.items()} == {
        "canvas-11111": "smithjohn", "canvas-22222": "doejane", "canvas-33333": "smithjohn",
        "moodle-23456": "José Núñez", "moodle-34567": "Ann Lee", "moodle-56789": "Eve_23456_assignsubmission_file_ M"}
    assert rows["canvas-22222"]["late"] == CH and float(rows["canvas-22222"][CH]) == full
    assert rows["moodle-34567"]["files"] == f"{CH}: tensors (1).ipynb (superseded: tensors.ipynb)"
    assert rows["canvas-22222"]["files"] == f"{CH}: tensors-1.ipynb (superseded: tensors.ipynb)"
    report = (work / "report" / "report.md")
    assert CliRunner().invoke(cli, ["report", "--workdir", str(work)]).exit_code == 0
    assert f"| Ann Lee (moodle-34567) | {CH} | tensors (1).ipynb | tensors.ipynb |" in report.read_text()
    with (work / "results.csv").open(encoding="utf-8") as fh:
        results = list(csv.DictReader(fh))
    assert {r["student"] for r in results} == set(rows)

    (tmp_path / "gradebook.csv").write_text(CANVAS_GRADEBOOK)
    (tmp_path / "worksheet.csv").write_bytes(MOODLE_WORKSHEET.encode())
    for lms, src in (("canvas", "gradebook.csv"), ("moodle", "worksheet.csv")):
        result = CliRunner().invoke(cli, ["export", "--workdir", str(work), f"--{lms}", str(tmp_path / src)]
                                    + (["--column", "Tensors"] if lms == "canvas" else []))
        assert result.exit_code == 0, result.output
    canvas_out = list(csv.reader((work / f"canvas-{CH}.csv").open(encoding="utf-8", newline="")))
    canvas_in = list(csv.reader(io.StringIO(CANVAS_GRADEBOOK)))
    want = {(2, 6): f"{full:g}", (3, 6): f"{full:g}"}  # Smith (11111) and Doe (22222); Nobody untouched
    assert [(r, c, v) for r, row in enumerate(canvas_out) for c, v in enumerate(row) if v != canvas_in[r][c]] == [
        (r, c, v) for (r, c), v in want.items()]
    moodle_out = (work / f"moodle-{CH}.csv").read_bytes().decode()
    assert moodle_out == MOODLE_WORKSHEET.replace("grading\",,", f"grading\",{full:.2f},"), "CRLF and the rest kept"
