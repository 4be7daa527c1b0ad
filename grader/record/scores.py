"""Automatic scores of many submissions written to the gradebook in one transaction.

nbgrader's :class:`~nbgrader.api.Gradebook` writes a submission through its ORM: creating one
(``update_or_create_submission``) loads the chapter's cells one lazy query at a time and
flushes object by object, ~10 ms of the coordinator's CPU per submission. Here the same rows
go into nbgrader's own tables (its ``Table`` objects, so its column defaults apply) with a few
statements per batch: the rows ``add_submission`` creates (a submitted notebook per notebook of
the chapter, a grade per graded cell, a comment per answer cell) and the automatic scores.
``tests/test_scores.py`` checks that both ways leave the same gradebook.

A score an instructor entered by hand (``manual_score``) is never overwritten: such a grade is
flagged for review instead (``needs_manual_grade``), as nbgrader does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nbgrader import api
from sqlalchemy import and_, bindparam, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from grader.exceptions import GradebookError
from grader.record import gradebook as gbmod

_CHUNK = 400  # names per IN (...) list: far below any database's limit on bound parameters

student_t = api.Student.__table__
assignment_t = api.Assignment.__table__
notebook_t = api.Notebook.__table__
base_cell_t = api.BaseCell.__table__
grade_cell_t = api.GradeCell.__table__
solution_cell_t = api.SolutionCell.__table__
task_cell_t = api.TaskCell.__table__
submission_t = api.SubmittedAssignment.__table__
submitted_nb_t = api.SubmittedNotebook.__table__
grade_t = api.Grade.__table__
comment_t = api.Comment.__table__


@dataclass(frozen=True)
class Scores:
    """One submission's automatic scores: test cell grade_id -> points."""

    chapter: str
    notebook: str
    student: str
    scores: dict[str, float]
    name: str | None = None  # the student's folder name as it came, kept as nbgrader's last name


def save(db_url: str, batch: Sequence[Scores], *, attempts: int = 3) -> None:
    """Write ``batch`` in one transaction: all of it is recorded, or none of it.

    Two graders sharing one PostgreSQL gradebook may both create the same new student or
    submission at once; the loser's transaction is rolled back and written again (the rows
    then exist).

    Raises:
        GradebookError: a chapter or test cell the gradebook does not know (the chapter was
            not registered), or the database failed.
    """
    if not batch:
        return
    with gbmod.open_gradebook(db_url) as gb:
        for attempt in range(attempts):
            try:
                with gb.engine.begin() as conn:
                    _save(conn, batch)
                return
            except IntegrityError:
                if attempt == attempts - 1:
                    raise


def _save(conn: Connection, batch: Sequence[Scores]) -> None:
    _students(conn, batch)
    for (chapter, notebook), items in _grouped(batch).items():
        assignment_id = conn.execute(select(assignment_t.c.id).where(assignment_t.c.name == chapter)).scalar()
        if assignment_id is None:
            raise GradebookError(f"the gradebook has no chapter {chapter!r}", hint="grade it with course grade")
        subs, created = _submissions(conn, assignment_id, items)
        known = [s for s in items if s.student not in created]  # their grade rows exist: scores go in by UPDATE
        grades = _grades(conn, [subs[s.student] for s in known], notebook) if known else {}
        params = []
        for item in known:
            for grade_id, score in item.scores.items():
                try:
                    grade_pk, manual = grades[(item.student, grade_id)]
                except KeyError:
                    raise _unknown_cell(grade_id, chapter, notebook) from None
                params.append({"pk": grade_pk, "auto": float(score), "review": manual is not None})
        if params:
            conn.execute(update(grade_t).where(grade_t.c.id == bindparam("pk"))
                         .values(auto_score=bindparam("auto"), needs_manual_grade=bindparam("review")), params)


def _unknown_cell(grade_id: str, chapter: str, notebook: str) -> GradebookError:
    return GradebookError(f"the gradebook has no test cell {grade_id!r} in {chapter}/{notebook}",
                          hint="the chapter changed since it was registered: grade into a new --workdir")


def _grouped(batch: Iterable[Scores]) -> dict[tuple[str, str], list[Scores]]:
    groups: dict[tuple[str, str], list[Scores]] = {}
    for item in batch:
        groups.setdefault((item.chapter, item.notebook), []).append(item)
    return groups


def _chunks(names: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(names), _CHUNK):
        yield names[i:i + _CHUNK]


def _students(conn: Connection, batch: Sequence[Scores]) -> None:
    """Create the students the gradebook lacks; keep each folder name as the last name."""
    names = {s.student: s.name for s in batch}
    known: dict[str, str | None] = {}
    for chunk in _chunks(sorted(names)):
        known.update(conn.execute(select(student_t.c.id, student_t.c.last_name).where(student_t.c.id.in_(chunk))).all())
    new = [{"id": s, "last_name": n} for s, n in names.items() if s not in known]
    if new:
        conn.execute(student_t.insert(), new)
    renamed = [{"sid": s, "last": n} for s, n in names.items() if s in known and n and known[s] != n]
    if renamed:
        conn.execute(update(student_t).where(student_t.c.id == bindparam("sid")).values(last_name=bindparam("last")),
                     renamed)


def _submissions(conn: Connection, assignment_id: str, items: Sequence[Scores]) -> tuple[dict[str, str], set[str]]:
    """student -> submission id, creating what nbgrader's ``add_submission`` creates for the new
    ones; and the students created now. A new submission's grades are written with their
    automatic scores (what the UPDATE of an existing one sets: the score, no review needed), so
    a fresh batch neither reads its rows back nor updates them."""
    students = [s.student for s in items]
    subs: dict[str, str] = {}
    for chunk in _chunks(students):
        subs.update(conn.execute(select(submission_t.c.student_id, submission_t.c.id).where(
            submission_t.c.assignment_id == assignment_id, submission_t.c.student_id.in_(chunk))).all())
    missing = {s.student: s for s in items if s.student not in subs}  # the last of a student's items, as UPDATEs leave it
    if not missing:
        return subs, set()
    layout = _layout(conn, assignment_id)
    cell_names = {notebook_name: {name for _, name in graded} for _, notebook_name, graded, _ in layout}
    rows: dict[str, list[dict]] = {"sub": [], "nb": [], "grade": [], "comment": []}
    for student, item in missing.items():
        unknown = [g for g in item.scores if g not in cell_names.get(item.notebook, set())]
        if unknown:
            raise _unknown_cell(unknown[0], item.chapter, item.notebook)
        sub_id = subs[student] = api.new_uuid()
        rows["sub"].append({"id": sub_id, "assignment_id": assignment_id, "student_id": student})
        for notebook_id, notebook_name, graded, commented in layout:
            nb_id = api.new_uuid()
            rows["nb"].append({"id": nb_id, "assignment_id": sub_id, "notebook_id": notebook_id})
            scored = notebook_name == item.notebook
            for cell_id, name in graded:
                row = {"id": api.new_uuid(), "notebook_id": nb_id, "cell_id": cell_id, "auto_score": None,
                       "needs_manual_grade": False}
                if scored and name in item.scores:
                    row["auto_score"] = float(item.scores[name])
                rows["grade"].append(row)
            rows["comment"].extend({"id": api.new_uuid(), "notebook_id": nb_id, "cell_id": c} for c in commented)
    for table, key in ((submission_t, "sub"), (submitted_nb_t, "nb"), (grade_t, "grade"), (comment_t, "comment")):
        if rows[key]:
            conn.execute(table.insert(), rows[key])
    return subs, set(missing)


def _layout(conn: Connection, assignment_id: str) -> list[tuple[str, str, list[tuple[str, str]], list[str]]]:
    """(notebook id, notebook name, graded cells as (id, name), commented cell ids) of each notebook
    of a chapter: grade and task cells get a grade, answer and task cells a comment
    (``add_submission``'s rows)."""
    def cells_of(table, notebook_id: str) -> list[tuple[str, str]]:
        return [(cid, name) for cid, name in conn.execute(
            select(table.c.id, base_cell_t.c.name).join(base_cell_t, base_cell_t.c.id == table.c.id)
            .where(base_cell_t.c.notebook_id == notebook_id)).all()]

    layout = []
    for notebook_id, name in conn.execute(select(notebook_t.c.id, notebook_t.c.name)
                                          .where(notebook_t.c.assignment_id == assignment_id)).all():
        grade_cells, solution_cells, task_cells = (cells_of(t, notebook_id) for t in (grade_cell_t, solution_cell_t, task_cell_t))
        layout.append((notebook_id, name, grade_cells + task_cells, [c for c, _ in solution_cells + task_cells]))
    return layout


def _grades(conn: Connection, submission_ids: list[str], notebook: str) -> dict[tuple[str, str], tuple[str, float | None]]:
    """(student, cell name) -> (grade id, manual score) of the submissions' ``notebook``."""
    found: dict[tuple[str, str], tuple[str, float | None]] = {}
    for chunk in _chunks(submission_ids):
        query = (
            select(submission_t.c.student_id, base_cell_t.c.name, grade_t.c.id, grade_t.c.manual_score)
            .select_from(grade_t)
            .join(submitted_nb_t, submitted_nb_t.c.id == grade_t.c.notebook_id)
            .join(submission_t, submission_t.c.id == submitted_nb_t.c.assignment_id)
            .join(notebook_t, and_(notebook_t.c.id == submitted_nb_t.c.notebook_id, notebook_t.c.name == notebook))
            .join(base_cell_t, base_cell_t.c.id == grade_t.c.cell_id)
            .where(submission_t.c.id.in_(chunk))
        )
        for student, cell, grade_pk, manual in conn.execute(query):
            found[(student, cell)] = (grade_pk, manual)
    return found


def totals(db_url: str, chapter: str, students: Sequence[str] | None = None) -> dict[str, tuple[float, float]]:
    """student -> (score, max_score) of their ``chapter``, manual grades and extra credit
    included, as nbgrader computes them; students without a submission are left out.

    nbgrader's ``SubmittedAssignment.score`` and ``max_score`` are subqueries run for every row;
    here the scores are summed in one grouped query (with nbgrader's own ``Grade.score``
    expression) and the chapter's maximum, the same for every submission, is read once.
    """
    got = func.coalesce(func.sum(api.Grade.score), 0.0)
    query = (select(submission_t.c.student_id, got)
             .select_from(submission_t)
             .join(assignment_t, assignment_t.c.id == submission_t.c.assignment_id)
             .outerjoin(submitted_nb_t, submitted_nb_t.c.assignment_id == submission_t.c.id)
             .outerjoin(grade_t, grade_t.c.notebook_id == submitted_nb_t.c.id)
             .where(assignment_t.c.name == chapter)
             .group_by(submission_t.c.student_id))
    with gbmod.open_gradebook(db_url) as gb:
        most = gb.db.execute(select(api.Assignment.max_score).where(api.Assignment.name == chapter)).scalar()
        if most is None:
            return {}
        if students is None:
            rows = gb.db.execute(query).all()
        else:
            rows = [r for chunk in _chunks(list(dict.fromkeys(students)))
                    for r in gb.db.execute(query.where(submission_t.c.student_id.in_(chunk))).all()]
    return {student: (float(score or 0.0), float(most or 0.0)) for student, score in rows}
