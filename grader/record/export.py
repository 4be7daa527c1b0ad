"""The grades as files: ``course-grades.csv`` (one row per student, one column per chapter, with
every status the report shows) and ``results.csv`` (one row per test: what passed, what failed and why).

Neither is named as nbgrader's ``nbgrader export`` names its ``grades.csv``, so running it in the
workspace never overwrites ours (:mod:`grader.intake.interop`). Every cell goes through
:func:`grader.escaping.csv_cell`: no name or reason opens as a formula.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from nbgrader.api import MissingEntry

from grader.escaping import csv_cell
from grader.exceptions import GradebookError
from grader.intake.workspace import LOG, mask
from grader.record import results as record
from grader.record import review
from grader.record.gradebook import open_gradebook

#: Columns of results.csv, in order.
RESULT_COLUMNS = ["student", "chapter", "test", "points", "max", "status", "reason", "manual", "comment", "late",
                  "submission"]
#: A submission's status when the grader could not grade it: it has no score (graded again next run).
NOT_GRADED = ("error",)
#: The total of a student with a submission not graded.
INCOMPLETE = "incomplete"
GRADED = "graded"
#: A chapter with no submission of the student's at all (the report's "—").
NOT_SUBMITTED = "not submitted"


def write_grades_csv(db_url: str, path: Path, *, workdir: Path | None = None) -> Path:
    """Write every student's score per chapter (manual grades included) and the total.

    Columns: ``student_id``, ``student_name`` (the name as it came: a folder's, an LMS's display
    name), one per chapter (score), ``total``, ``max_total``, ``late`` (the chapters an LMS marked
    late, ``;``-separated), ``not_graded`` (every chapter without a grade, ``chapter: status``:
    ``not submitted``, ``missing``, ``unreadable``, ``wrong chapter``, ``error``, as the report
    says them), ``files`` (the file graded where an LMS's download named it, and the uploads it
    superseded); all but the scores read from the workspace's results when ``workdir`` is
    given. Only a grade is a number: a chapter without one has an empty cell. A submission the
    grader could not grade (``error``) makes the student's ``total`` ``incomplete`` until it is
    graded again. This file is the grader's own; ``course export --canvas/--moodle`` fills an
    LMS's own file (:mod:`grader.record.lms_export`).
    """
    results = {(str(r.get("student")), str(r.get("chapter"))): r for r in _results(workdir)} if workdir else None
    with open_gradebook(db_url) as gb:
        chapters = sorted(a.name for a in gb.assignments)
        max_by_chapter = {a.name: float(a.max_score) for a in gb.assignments}
        rows = []
        for student in sorted(gb.students, key=lambda s: s.id):
            row = {"student_id": student.id, "student_name": student.last_name or student.id}
            total, missing, files, late, retried = 0.0, [], [], [], False
            for chapter in chapters:
                result = results.get((student.id, chapter)) if results is not None else None
                status = _status(gb, student.id, chapter, result, results is not None)
                if status != GRADED:
                    row[chapter] = ""
                    missing.append(f"{chapter}: {status}")
                    retried |= status in NOT_GRADED
                else:
                    score = float(gb.find_submission(chapter, student.id).score)
                    row[chapter] = _fmt(score)
                    total += score
                if result and result.get("file"):
                    old = [str(f) for f in result.get("superseded") or []]
                    files.append(f"{chapter}: {result['file']}" + (f" (superseded: {', '.join(old)})" if old else ""))
                if result and result.get("late") is True:
                    late.append(chapter)
            row["total"] = INCOMPLETE if retried else _fmt(total)
            row["max_total"] = _fmt(sum(max_by_chapter.values()))
            row["late"] = ";".join(late)
            row["not_graded"] = ";".join(missing)
            row["files"] = ";".join(files)
            rows.append(row)
    if not rows:  # a header-only file would look like a class without grades
        raise GradebookError(f"the gradebook {mask(db_url)} holds no graded student; {path.name} not written",
                             hint="pass the --db-url the workspace was graded with, or grade first")
    return write_csv(path, ["student_id", "student_name", *chapters, "total", "max_total", "late", "not_graded",
                            "files"], rows)


def _status(gb, student: str, chapter: str, result: dict | None, have_results: bool) -> str:
    """A student's chapter as the report says it: ``graded``, its result's status, or ``not submitted``."""
    if result is not None:
        return str(result.get("status") or GRADED)
    try:
        gb.find_submission(chapter, student)
    except MissingEntry:
        return NOT_SUBMITTED
    return NOT_SUBMITTED if have_results else GRADED


def write_csv(path: Path, columns: list[str], rows: Iterable[dict]) -> Path:
    """Write ``rows`` (column -> value) under a header of ``columns``, every cell (the header's too)
    through :func:`grader.escaping.csv_cell`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([csv_cell(c) for c in columns])
        writer.writerows([csv_cell(row.get(c, "")) for c in columns] for row in rows)
    return path


def errors(workdir: Path) -> list[tuple[str, str]]:
    """(student, chapter) of each submission whose recorded result is an error, not a grade (the
    notebook could not be run, or the chapter's solution failed a test here): it has no score in
    course-grades.csv until it is graded again."""
    return [(student, chapter) for student, chapter, _, _ in not_graded(workdir)]


def not_graded(workdir: Path) -> list[tuple[str, str, str, str]]:
    """(student, chapter, status, why) of each recorded submission the grader could not grade."""
    return [(str(r.get("student")), str(r.get("chapter")), str(r.get("status")), str(r.get("message") or ""))
            for r in _results(workdir) if r.get("status") in NOT_GRADED]


def not_graded_warning(failed: list[tuple], workdir: Path) -> str:
    """The ``warning:`` line ``course grade`` and ``course export`` end with: how many submissions
    the grader could not grade, why (each distinct reason once, with its count), where the cause
    is logged, and what to do. ``failed``: (student, chapter, ..., why) tuples."""
    causes: dict[str, list[str]] = {}
    for item in failed:
        student, chapter, why = item[0], item[1], item[-1]
        causes.setdefault(_cause(why), []).append(f"{student}/{chapter}")
    said = "; ".join(f"{cause} ({len(who)}: {', '.join(who[:3])}{', ...' if len(who) > 3 else ''})"
                     for cause, who in sorted(causes.items(), key=lambda kv: -len(kv[1])))
    return (f"warning: {len(failed)} submission(s) not graded, so no score (an empty cell in course-grades.csv, "
            f"total \"{INCOMPLETE}\"): {said}; the cause is in {workdir / LOG}; once it is fixed, the next "
            "`course grade` grades them again")


def _cause(message: str) -> str:
    """A result's message as the warning line's reason: without its pointer to the log and what to
    do (the line says both once), on one line, at most 200 characters."""
    text = re.sub(r"\s*\((?:see|the cause is in) [^)]*\)|; the cause is in [^);]*|; grade again once it does$|"
                  r"^not graded in full: ", "",
                  " ".join((message or "").split())).strip(" ;")
    return (text[:197] + "..." if len(text) > 200 else text) or "the grader failed"


def _results(workdir: Path) -> Iterator[dict]:
    """The workspace's recorded results (``results/<student>/<chapter>.json``), unreadable ones left out."""
    for result_path in sorted((workdir / "results").glob("*/*.json")):
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(result, dict):
            yield result


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def write_results_csv(workdir: Path, db_url: str, path: Path) -> Path:
    """Write one row per (student, chapter, test): the long format a spreadsheet filters.

    Columns (:data:`RESULT_COLUMNS`): ``points`` and ``max`` as the gradebook counts them (a
    manual grade wins, extra credit added); ``status`` and ``reason`` as the grader decided
    (``passed``, ``failed``, ``error``, ``timed out``, ``not run``, ...); ``manual`` is ``yes``
    when the points were set by hand; ``comment`` what was written on the exercise in formgrader;
    ``late`` ``yes`` for a submission the LMS marked late; ``submission`` the submission's status
    (``graded``, ``unreadable``, ``wrong chapter``, ``missing``, ``error``). A submission that was
    not graded (unreadable, wrong chapter) has its tests as ``not run`` with the reason; one the
    grader could not grade (``error``) has no points: every one of its ``points`` cells is empty.
    """
    marks = review.read(db_url)
    rows = []
    for result_path in sorted((workdir / "results").glob("*/*.json")):
        result = json.loads(result_path.read_text(encoding="utf-8"))
        merged = review.merge(result, *marks.of(result["student"], result["chapter"]))
        scored = result.get("status") not in NOT_GRADED
        for t in merged.get("tests", []):
            rows.append({
                "student": result["student"], "chapter": result["chapter"], "test": t["grade_id"],
                "points": _fmt(t["points"]) if scored else "", "max": _fmt(t["max_points"]), "status": t["status"],
                "reason": t.get("reason", ""), "manual": "yes" if t.get("manual") else "",
                "comment": t.get("comment", ""), "late": "yes" if result.get("late") else "",
                "submission": result.get("status", ""),
            })
    for entry in record.read_intake(workdir):  # a folder or file that was not a submission, and why
        rows.append({"student": str(entry.get("student", "")), "chapter": str(entry.get("chapter", "")), "test": "",
                     "points": "", "max": "", "status": str(entry.get("status", "")),
                     "reason": str(entry.get("reason", "")), "manual": "", "comment": "",
                     "late": "yes" if entry.get("late") is True else "", "submission": str(entry.get("status", ""))})
    return write_csv(path, RESULT_COLUMNS, rows)
