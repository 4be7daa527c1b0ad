"""The gradebook: nbgrader's database, written only by the coordinating process."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
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


#: One open gradebook per process and URL. nbgrader's ``Gradebook()`` makes a new engine and
#: checks every table on each opening (~30 ms, and a pool of connections that outlives it):
#: a batch opened it four times per submission.
_open: dict[tuple[int, str], tuple[Gradebook, tuple[int, int] | None]] = {}
_lock = threading.Lock()


@contextmanager
def open_gradebook(db_url: str) -> Iterator[Gradebook]:
    """The gradebook (created on first use), kept open for this process.

    Whatever the block did not commit is rolled back when it ends, so no transaction (nor an
    SQLite lock another grader would wait for) is held between two uses.
    """
    ensure_tools_on_path()
    with warnings.catch_warnings():
        # nbgrader 0.9 with SQLAlchemy 2.x warns "... not in session" on every submission;
        # the rows are written all the same.
        warnings.filterwarnings("ignore", message=".*not in session.*")
        key = (os.getpid(), db_url)
        with _lock:
            gb, file_id = _open.get(key, (None, None))
            if gb is not None and file_id != _sqlite_file_id(db_url):  # the file was removed or replaced
                gb.close()
                gb.engine.dispose()
                gb = None
            if gb is None:
                gb = Gradebook(db_url)
                _open[key] = (gb, _sqlite_file_id(db_url))
        try:
            yield gb
        finally:
            gb.db.rollback()


def close_all() -> None:
    """Close the gradebooks this process opened (their engines and connections too)."""
    with _lock:
        for (pid, _), (gb, _file) in list(_open.items()):
            if pid == os.getpid():
                gb.close()
                gb.engine.dispose()
        _open.clear()


atexit.register(close_all)


def _sqlite_file_id(db_url: str) -> tuple[int, int] | None:
    """(device, inode) of an SQLite gradebook's file; None for other databases or no file yet."""
    if not db_url.startswith("sqlite:///"):
        return None
    try:
        st = os.stat(db_url[len("sqlite:///"):])
    except OSError:
        return None
    return st.st_dev, st.st_ino


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
