"""``grades.csv``: one row per student, one column per chapter, as an LMS imports it."""

from __future__ import annotations

import csv
from pathlib import Path

from nbgrader.api import MissingEntry

from grader.gradebook import open_gradebook


def write_grades_csv(db_url: str, path: Path) -> Path:
    """Write every student's score per chapter (manual grades included) and the total.

    Columns: ``student_id``, ``student_name`` (the submission folder's name as it came), one
    per chapter (score), ``total``, ``max_total``. A chapter
    a student did not submit scores 0.
    """
    with open_gradebook(db_url) as gb:
        chapters = sorted(a.name for a in gb.assignments)
        max_by_chapter = {a.name: float(a.max_score) for a in gb.assignments}
        rows = []
        for student in sorted(gb.students, key=lambda s: s.id):
            row = {"student_id": student.id, "student_name": student.last_name or student.id}
            total = 0.0
            for chapter in chapters:
                try:
                    score = float(gb.find_submission(chapter, student.id).score)
                except MissingEntry:
                    score = 0.0
                row[chapter] = _fmt(score)
                total += score
            row["total"] = _fmt(total)
            row["max_total"] = _fmt(sum(max_by_chapter.values()))
            rows.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["student_id", "student_name", *chapters, "total", "max_total"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"
