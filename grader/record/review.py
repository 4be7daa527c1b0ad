"""What people wrote into the gradebook: manual scores, comments, grades that need a review.

Formgrader (or any nbgrader tool) writes a manual score, extra credit and comments into the
gradebook; feedback pages, ``results.csv`` and the class report read them from here, in one
query each, so that what a learner reads always adds up to the score the gradebook holds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import (
    Assignment,
    BaseCell,
    Comment,
    Grade,
    GradeCell,
    Student,
    SubmittedAssignment,
    SubmittedNotebook,
)

from grader.record.gradebook import open_gradebook

_grade_cells = GradeCell.__table__  # the table alone: joining the mapped subclass re-joins base_cell


@dataclass(frozen=True)
class CellGrade:
    """One test's grade as the gradebook holds it."""

    auto: float | None
    manual: float | None
    extra: float | None
    needs_manual: bool
    max_points: float

    @property
    def points(self) -> float:
        """The score nbgrader counts: the manual score when there is one, plus extra credit."""
        base = self.manual if self.manual is not None else (self.auto or 0.0)
        return float(base) + float(self.extra or 0.0)


@dataclass
class Review:
    """Every grade and comment of a gradebook, by (student, chapter) and cell name."""

    grades: dict[tuple[str, str], dict[str, CellGrade]] = field(default_factory=dict)
    comments: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    def of(self, student: str, chapter: str) -> tuple[dict[str, CellGrade], dict[str, str]]:
        """(grades by test, comments by cell) of one submission; empty when it is not in the gradebook."""
        key = (student, chapter)
        return self.grades.get(key, {}), self.comments.get(key, {})

    def needs_review(self) -> list[tuple[str, str, str, str]]:
        """(student, chapter, test, why) for each grade nbgrader flags ``needs_manual_grade``."""
        out = []
        for (student, chapter), grades in sorted(self.grades.items()):
            for gid, g in sorted(grades.items()):
                if g.needs_manual:
                    why = (f"manual grade {g.manual:g} kept; the grader now gives {g.auto or 0:g}"
                           if g.manual is not None else "no score yet (nbgrader: needs manual grade)")
                    out.append((student, chapter, gid, why))
        return out


def _sqlite_missing(db_url: str) -> bool:
    return db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).exists()


def _per_cell(gb, model, *columns):
    """A query of ``model``'s rows (a grade or a comment of one cell of one submitted notebook) as
    (student id, chapter, cell name, *columns)."""
    return (
        gb.db.query(Student.id, Assignment.name, BaseCell.name, *columns)
        .select_from(model)
        .join(SubmittedNotebook, model.notebook_id == SubmittedNotebook.id)
        .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
        .join(Student, SubmittedAssignment.student_id == Student.id)
        .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id)
        .join(BaseCell, model.cell_id == BaseCell.id)
    )


def read(db_url: str) -> Review:
    """Read every grade and comment (two queries); an SQLite gradebook not yet made reads as empty."""
    review = Review()
    if _sqlite_missing(db_url):
        return review
    grades: dict[tuple[str, str], dict[str, CellGrade]] = defaultdict(dict)
    comments: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    with open_gradebook(db_url) as gb:
        rows = (
            _per_cell(gb, Grade, Grade.auto_score, Grade.manual_score, Grade.extra_credit, Grade.needs_manual_grade,
                      _grade_cells.c.max_score)
            .outerjoin(_grade_cells, _grade_cells.c.id == BaseCell.id)
            .all()
        )
        for student, chapter, name, auto, manual, extra, needs, max_score in rows:
            grades[(student, chapter)][name] = CellGrade(auto, manual, extra, bool(needs), float(max_score or 0))
        rows = (
            _per_cell(gb, Comment, Comment.manual_comment, Comment.auto_comment)
            .all()
        )
        for student, chapter, name, manual, auto in rows:
            text = manual if manual is not None else auto
            if text and text.strip():
                comments[(student, chapter)][name] = text.strip()
    review.grades, review.comments = dict(grades), dict(comments)
    return review


def merge(result: dict, grades: dict[str, CellGrade], comments: dict[str, str]) -> dict:
    """A result (``results/<student>/<chapter>.json``) with the gradebook's word on each test.

    Each test gets the gradebook's points (a manual score wins, extra credit is added), a
    ``manual`` flag, and the comment written on its exercise (the answer cell ``exK_name`` of
    test ``test_exK_name``, or the test cell itself). ``score`` and ``max_score`` become the sums
    of the rows, so a page always adds up. Comments on other cells go to ``comments``.
    """
    out = dict(result)
    tests, used = [], set()
    for t in result.get("tests", []):
        t = dict(t)
        gid = t["grade_id"]
        g = grades.get(gid)
        if g is not None:
            t["auto_points"] = float(t.get("points", 0.0))
            t["points"] = g.points
            t["manual"] = g.manual is not None or bool(g.extra)
            t["needs_review"] = g.needs_manual
        answer = gid[len("test_"):] if gid.startswith("test_") else None
        said = [comments[c] for c in (answer, gid) if c in comments]
        used.update(c for c in (answer, gid) if c in comments)
        t["comment"] = "\n".join(said)
        tests.append(t)
    out["tests"] = tests
    out["comments"] = {c: text for c, text in comments.items() if c not in used}
    if tests and grades:
        out["score"] = sum(t["points"] for t in tests)
        out["max_score"] = sum(t["max_points"] for t in tests)
    return out
