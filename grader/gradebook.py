"""The gradebook: nbgrader's database, written only by the coordinating process."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from grader.exceptions import CourseError
from grader.release import build_release

log = logging.getLogger(__name__)


def ensure_tools_on_path() -> None:
    """nbgrader runs ``alembic`` by name: make this interpreter's ``bin/`` reachable."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


@contextmanager
def open_gradebook(db_url: str) -> Iterator[Gradebook]:
    """Open the gradebook (created on first use)."""
    ensure_tools_on_path()
    with warnings.catch_warnings():
        # nbgrader 0.9 with SQLAlchemy 2.x warns "... not in session" on every submission;
        # the rows are written all the same.
        warnings.filterwarnings("ignore", message=".*not in session.*")
        with Gradebook(db_url) as gb:
            yield gb


def register_chapter(db_url: str, chapter: str, source: Path) -> None:
    """Store a chapter's cells (hidden tests included) in the gradebook, as nbgrader's
    generate_assignment does: grading restores test cells from there."""
    with open_gradebook(db_url) as gb:
        gb.update_or_create_assignment(chapter)
    try:
        build_release(chapter, source, db_url=db_url)
    except RuntimeError as exc:  # nbgrader refuses to change cells that have submissions
        raise CourseError(
            str(exc),
            where=f"chapter {chapter}",
            hint="the chapter's graded cells changed after students were graded; grade into a new --workdir",
        ) from exc


def save_scores(db_url: str, chapter: str, notebook: str, student: str, scores: dict[str, float],
                *, name: str | None = None) -> None:
    """Write one submission's automatic scores in one transaction.

    A score an instructor entered by hand (``manual_score``) is never overwritten: such a
    grade is flagged for review instead, as nbgrader does.
    """
    with open_gradebook(db_url) as gb:
        if name:  # the folder name as it came (José Núñez); nbgrader keeps it as the last name
            gb.update_or_create_student(student, last_name=name)
        else:
            gb.update_or_create_student(student)
        gb.update_or_create_submission(chapter, student)
        try:
            for grade_id, score in scores.items():
                grade = gb.find_grade(grade_id, notebook, chapter, student)
                grade.auto_score = score
                grade.needs_manual_grade = grade.manual_score is not None
            gb.db.commit()
        except Exception:
            gb.db.rollback()
            raise


def student_scores(db_url: str, chapter: str, student: str) -> tuple[float, float] | None:
    """(score, max_score) of a student's chapter, manual grades included; None if not graded."""
    with open_gradebook(db_url) as gb:
        try:
            sub = gb.find_submission(chapter, student)
        except MissingEntry:
            return None
        return float(sub.score), float(sub.max_score)
