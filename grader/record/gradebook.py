"""The gradebook: nbgrader's database, written only by the coordinating process."""

from __future__ import annotations

import atexit
import logging
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from nbformat import NotebookNode
from nbgrader import api as nbgrader_api
from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy import event

from grader.exceptions import CourseError, GradebookError
from grader.prepare.release import build_release

log = logging.getLogger(__name__)


def ensure_tools_on_path() -> None:
    """nbgrader runs ``alembic`` by name: make this interpreter's ``bin/`` reachable."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def alembic_head() -> str:
    """The schema revision nbgrader stamps on a new gradebook, read in this process.

    nbgrader asks for it by running the ``alembic heads`` command, a fresh interpreter that
    imports SQLAlchemy and alembic: 2.5-5 s on this kind of machine, paid by every batch that
    creates a gradebook. The head is the one revision of nbgrader's migration scripts that no
    other names as its ``down_revision``: read from their text in ~1 ms; alembic's own
    ``ScriptDirectory`` (whose import costs ~0.3 s) answers when the scripts do not name exactly
    one head (a test compares both with the command).
    """
    global _head
    if _head is None:
        scripts = Path(nbgrader_api.__file__).parent / "alembic"
        heads = _heads_named_in(scripts / "versions")
        if len(heads) == 1:
            _head = heads.pop()
        else:
            from alembic.script import ScriptDirectory

            _head = ScriptDirectory(str(scripts)).get_current_head()
    return _head


def _heads_named_in(versions: Path) -> set[str]:
    """The revisions of the migration scripts in ``versions`` that no script revises."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in versions.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        revision = re.search(r"^revision\s*(?::[^=]*)?=\s*['\"]([0-9A-Za-z_]+)['\"]", text, re.M)
        down = re.search(r"^down_revision\s*(?::[^=]*)?=\s*(.*)$", text, re.M)
        if revision is None or down is None:
            return set()  # not a script as alembic writes them: let alembic read it
        revisions.add(revision.group(1))
        revised.update(re.findall(r"['\"]([0-9A-Za-z_]+)['\"]", down.group(1)))
    return revisions - revised


_head: str | None = None
nbgrader_api.get_alembic_version = alembic_head  # what Gradebook() calls when it creates a database


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
                gb = _create(db_url)
                _tune_sqlite(gb, db_url)
                _add_indexes(gb)
                _open[key] = (gb, _sqlite_file_id(db_url))
        try:
            yield gb
        finally:
            gb.db.rollback()


def _create(db_url: str, attempts: int = 5) -> Gradebook:
    """nbgrader's ``Gradebook(db_url)``, which creates the tables of a new database.

    Two graders opening one new database at once (two workspaces on one PostgreSQL gradebook)
    can both try to create a table: the loser's "already exists" means the other created it,
    so it opens again. (Two ``course grade`` on one workspace never get here: the workspace's
    lock keeps the second one out.)
    """
    for attempt in range(attempts):
        try:
            return Gradebook(db_url)
        except Exception as exc:  # sqlalchemy's OperationalError / ProgrammingError / IntegrityError
            if attempt == attempts - 1 or "already exists" not in str(exc) and "UNIQUE constraint" not in str(exc):
                raise
            log.info("the gradebook was being created by another grader; opening it again (%s)", exc)
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def check(db_url: str, *, create: bool) -> None:
    """Fail early, in one sentence, on a gradebook that cannot work: a malformed URL, an unknown
    database or driver, a server that cannot be reached, an SQLite file whose folder is missing.

    Args:
        db_url: the gradebook's SQLAlchemy URL.
        create: whether the gradebook may be created (``course grade``); otherwise it must exist
            and hold nbgrader's tables, so that reading it never creates an empty one.

    Raises:
        GradebookError: saying what is wrong with which URL (its password masked) and what to pass.
    """
    from sqlalchemy import create_engine, inspect
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    from grader.intake.workspace import mask

    shown = mask(db_url)
    example = "e.g. sqlite:////path/to/gradebook.db or postgresql://USER@HOST/DB"
    try:
        url = make_url(db_url)
        dialect = url.get_dialect()
    except NoSuchModuleError as exc:  # (an ArgumentError too)
        raise GradebookError(f"{shown!r}: unknown database kind {url.drivername!r}", hint=example) from exc
    except (ArgumentError, ValueError) as exc:
        raise GradebookError(f"{shown!r} is not a database URL", hint=example) from exc
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        raise GradebookError(f"{shown}: the database driver is not installed ({exc})",
                             hint="install the course with its [grader] extra (psycopg for PostgreSQL)") from exc
    if url.get_backend_name() == "sqlite":
        path = url.database
        if not path or path == ":memory:":
            raise GradebookError(f"{shown}: an in-memory SQLite gradebook keeps no grades", hint=example)
        file = Path(path)
        if not create and not file.is_file():
            raise GradebookError(f"no gradebook at {file}",
                                 hint="pass the --db-url the workspace was graded with, or grade first")
        if create and not file.parent.is_dir():
            raise GradebookError(f"{shown}: the folder {file.parent} does not exist", hint="create it first")
    connect_args = {"connect_timeout": 10} if url.get_backend_name() == "postgresql" else {}
    engine = create_engine(url, connect_args=connect_args)
    try:
        with engine.connect() as conn:
            tables = inspect(conn).get_table_names()
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise GradebookError(f"cannot open the gradebook {shown}: {first[0] if first else type(exc).__name__}",
                             hint="check the host, port, database name and credentials, and that the server runs") from exc
    finally:
        engine.dispose()
    if not create and "assignment" not in tables:
        raise GradebookError(f"the gradebook {shown} holds no grades (it has no nbgrader tables)",
                             hint="pass the --db-url the workspace was graded with, or grade first")


def _tune_sqlite(gb: Gradebook, db_url: str) -> None:
    """An SQLite gradebook in write-ahead-log mode, synced at checkpoints, not at every commit.

    A batch commits a few times per submission; in SQLite's default mode each commit waits for
    the disk several times, which cost more wall time than all of the coordinator's own work.
    In WAL mode with ``synchronous=NORMAL`` a crash or power cut can lose the last commits but
    never corrupts the file, and a lost commit only means that submission is graded again (its
    result file is written after the commit, see :mod:`grader.record.results`). Readers (formgrader, a
    second grader) keep working alongside the writer. WAL needs a local file system.
    """
    if not db_url.startswith("sqlite"):
        return

    @event.listens_for(gb.engine, "connect")
    def _pragmas(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    gb.db.remove()
    gb.engine.dispose()  # connections opened before the listener get it on their next opening


#: (table, column): what recording a batch looks rows up by, which nbgrader's schema indexes only
#: as the second column of a unique pair, so that each lookup scanned the whole gradebook (90 ms
#: for the totals of 64 students in a PostgreSQL gradebook of 36,750 grades, growing with it)
INDEXED = (("grade", "notebook_id"), ("comment", "notebook_id"), ("submitted_notebook", "assignment_id"),
           ("submitted_assignment", "student_id"))


def _add_indexes(gb: Gradebook) -> None:
    """Add the indexes of :data:`INDEXED` the gradebook lacks (nbgrader ignores extra indexes). An
    optimisation only: a gradebook this grader may not change, or another grader indexing it at
    the same moment, is left as it is."""
    from sqlalchemy import inspect, text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with gb.engine.connect() as conn:  # asked first: creating one, even "IF NOT EXISTS", locks its table
            have = {(t, i["name"]) for t in {t for t, _ in INDEXED} for i in inspect(conn).get_indexes(t)}
    except SQLAlchemyError as exc:
        log.debug("indexes not read: %s", exc)
        return
    for table, column in INDEXED:  # DDL of our own: an Index object would join nbgrader's own tables' metadata
        name = f"course_{table}_{column}"
        if (table, name) in have:
            continue
        try:
            with gb.engine.begin() as conn:
                conn.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({column})"))
        except SQLAlchemyError as exc:
            log.debug("index on %s.%s not added: %s", table, column, exc)


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


def register_chapter(db_url: str, chapter: str, source: Path) -> NotebookNode:
    """Store a chapter's cells (hidden tests included) in the gradebook, as nbgrader's
    generate_assignment does: grading restores test cells from there. Returns the chapter's
    student release, built on the way (storing the cells changes none)."""
    with open_gradebook(db_url) as gb:
        gb.update_or_create_assignment(chapter)
    try:
        return build_release(chapter, source, db_url=db_url)
    except RuntimeError as exc:  # nbgrader refuses to change cells that have submissions
        raise CourseError(
            str(exc),
            where=f"chapter {chapter}",
            hint="the chapter's graded cells changed after students were graded; grade into a new --workdir",
        ) from exc


@dataclass(frozen=True)
class ChapterCells:
    """A chapter's cells as the gradebook stores them, read once per batch.

    It answers the few questions nbgrader's ``OverwriteCells`` and ``OverwriteKernelspec`` ask
    a :class:`~nbgrader.api.Gradebook` (``find_notebook``, ``find_source_cell``,
    ``find_graded_cell``), so that preparing a submission reads no database: they opened one
    and queried it once per cell, for every submission.
    """

    notebook: SimpleNamespace
    by_name: dict[str, SimpleNamespace]
    graded: dict[str, SimpleNamespace]

    def find_notebook(self, notebook: str, assignment: str) -> SimpleNamespace:
        return self.notebook

    def find_source_cell(self, name: str, notebook: str, assignment: str) -> SimpleNamespace:
        try:
            return self.by_name[name]
        except KeyError:
            raise MissingEntry() from None

    def find_graded_cell(self, name: str, notebook: str, assignment: str) -> SimpleNamespace:
        try:
            return self.graded[name]
        except KeyError:
            raise MissingEntry() from None


def chapter_cells(db_url: str, chapter: str, notebook: str) -> ChapterCells:
    """A :class:`ChapterCells` of ``chapter``'s notebook, as registered in the gradebook now."""
    with open_gradebook(db_url) as gb:
        nb = gb.find_notebook(notebook, chapter)

        def copy(cell, *names: str) -> SimpleNamespace:
            return SimpleNamespace(**{n: getattr(cell, n) for n in names})

        source = [copy(c, "name", "cell_type", "locked", "checksum", "source") for c in nb.source_cells]
        grade = [copy(c, "name", "max_score") for c in nb.grade_cells]
        task = [copy(c, "name", "max_score") for c in nb.task_cells]
        solution = [copy(c, "name") for c in nb.solution_cells]
        snapshot = SimpleNamespace(source_cells=source, grade_cells=grade, task_cells=task,
                                   solution_cells=solution, kernelspec=nb.kernelspec)
    return ChapterCells(snapshot, {c.name: c for c in source}, {c.name: c for c in grade + task})
