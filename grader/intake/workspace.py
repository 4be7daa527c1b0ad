"""The grading workspace: its folders, what it remembers between commands, and its lock.

``course grade`` writes ``workspace.json`` into the workspace: the gradebook's URL (never its
password: where the password came from instead) and the grading options. ``export``,
``feedback`` and ``report`` read the gradebook from there, and a later ``grade`` that is not
told otherwise grades with the same options, so a rerun re-grades nothing it recorded.
A ``workspace.lock`` (``fcntl.flock``) keeps a second ``course grade`` out while one runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.exceptions import GradebookError, OptionError, WorkspaceBusy, WorkspaceError
from grader.intake import interop

SETTINGS = "workspace.json"
LOCK = "workspace.lock"
#: The batch's log in the workspace: what the grader met, with causes (a solution failing its
#: own test, the traceback of a submission it could not score); appended to by every batch.
LOG = "grader.log"
DB_URL_ENV = "COURSE_DB_URL"
FORMAT = 1

#: The smallest ``--memory-mb`` (other than 0, no cap) a grading run accepts. Measured on this
#: project's machines (torch 2.13.0 CPU, 2 cores, cgroup v1): the chapter-01 perfect submission
#: graded in full under ``--engine kernel`` with a cap of 1296 MiB and lost every test at 1280
#: (the kernel's address space after ``import torch`` and ipykernel's threads is most of it;
#: the fork engine's children need far less). The floor leaves a margin for other machines.
MEMORY_FLOOR_MB = 1536
MEMORY_MEASURED_MB = 1296

#: Grading options a workspace remembers; a later ``course grade`` not given one uses the remembered value.
REMEMBERED_OPTIONS = ("cell_timeout", "memory_mb", "device", "engine")


@dataclass
class Workspace:
    """The folders of a grading run (nbgrader's course-directory names) and what it remembers."""

    root: Path

    @property
    def submitted(self) -> Path:
        return self.root / "submitted"

    def intake(self, lms_zip: Path) -> Path:
        """Where an LMS zip of submissions is unpacked."""
        return self.root / "intake" / lms_zip.stem

    def hidden(self, submissions: Path, solutions_dir: Path) -> list[str]:
        """The folders a sandbox hides from the submissions it runs: this workspace, the
        submissions (a zip's: where it is unpacked) and the chapters' solutions."""
        if submissions.is_file():
            submissions = self.intake(submissions)
        return sorted({str(p.resolve()) for p in (self.root, submissions, solutions_dir)})

    @property
    def autograded(self) -> Path:
        return self.root / "autograded"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def feedback(self) -> Path:
        """Our pages: never nbgrader's ``feedback/`` (see :mod:`grader.intake.interop`)."""
        return self.root / interop.FEEDBACK_DIR

    @property
    def settings_path(self) -> Path:
        return self.root / SETTINGS

    def default_db_url(self) -> str:
        return f"sqlite:///{(self.root / 'gradebook.db').resolve()}"

    def result_path(self, student: str, chapter: str) -> Path:
        return self.results / student / f"{chapter}.json"

    def graded(self) -> bool:
        """Whether a ``course grade`` ever ran here (one that predates ``workspace.json`` left results)."""
        return self.settings_path.is_file() or any(self.results.glob("*/*.json"))

    def require_graded(self) -> None:
        """Raise :class:`WorkspaceError` unless this workspace exists and was graded into."""
        hint = f"run `course grade SUBMISSIONS --workdir {self.root}` first, or pass the --workdir you graded into"
        if not self.root.is_dir():
            raise WorkspaceError("no grading workspace here", where=str(self.root), hint=hint)
        if not self.graded():
            raise WorkspaceError("this workspace was never graded (no workspace.json, no results)",
                                 where=str(self.root), hint=hint)

    def settings(self) -> dict[str, Any]:
        """What the workspace remembers (empty when nothing)."""
        if not self.settings_path.is_file():
            return {}
        try:
            data = json.loads(self.settings_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise WorkspaceError(f"cannot read {SETTINGS} ({exc})", where=str(self.root),
                                 hint=f"delete {self.settings_path} and grade again with the options you want") from exc
        return data if isinstance(data, dict) else {}

    def remember(self, **fields: Any) -> None:
        """Merge ``fields`` into ``workspace.json`` (written atomically)."""
        data = self.settings()
        data.update(fields, format=FORMAT)
        tmp = self.settings_path.with_name(SETTINGS + ".tmp")
        try:
            tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, self.settings_path)
        except OSError as exc:
            raise unwritable(self.root, exc) from exc

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the workspace's lock (re-entrant in this process); refuse when another process holds it.

        Raises:
            WorkspaceBusy: another ``course grade`` holds it.
            WorkspaceError: the workspace cannot be created or written.
        """
        path = str((self.root / LOCK).absolute())
        with _held_lock:
            if path not in _held:
                _fds[path] = _acquire(self.root, path)
            _held[path] = _held.get(path, 0) + 1
        try:
            yield
        finally:
            with _held_lock:
                _held[path] -= 1
                if not _held[path]:
                    del _held[path]
                    os.close(_fds.pop(path))  # closing the file releases the lock


_held: dict[str, int] = {}
_fds: dict[str, int] = {}
_held_lock = threading.Lock()


def _acquire(root: Path, path: str) -> int:
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise unwritable(root, exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        raise WorkspaceBusy(f"another `course grade` is grading into this workspace ({holder})", where=str(root),
                            hint="wait until it ends (a second run would grade the same submissions again), "
                                 "or grade into another --workdir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
    return fd


def unwritable(root: Path, exc: OSError) -> WorkspaceError:
    """The error for a workspace that cannot be created or written."""
    why = exc.strerror or type(exc).__name__
    return WorkspaceError(f"cannot write to the workspace ({why}: {exc.filename or root})", where=str(root),
                          hint="pass a --workdir you can write to")


# --- grading options -------------------------------------------------------------------

def check_options(*, cell_timeout: int, memory_mb: int | None, jobs: int | None) -> None:
    """Refuse options that would grade every test 0 or mean nothing.

    Raises:
        OptionError: naming the option, the value and what to give instead.
    """
    if cell_timeout < 1:
        raise OptionError(f"--timeout {cell_timeout}: a cell needs at least 1 second",
                          hint="give the seconds one cell may run, e.g. --timeout 60")
    if memory_mb and memory_mb < MEMORY_FLOOR_MB:
        raise OptionError(f"--memory-mb {memory_mb} is too small to import torch "
                          f"(a chapter-01 submission needed {MEMORY_MEASURED_MB} MiB in a kernel)",
                          hint=f"give at least {MEMORY_FLOOR_MB}, or 0 for no cap")
    if jobs is not None and jobs < 1:
        raise OptionError(f"--jobs {jobs}: at least one submission must run at a time",
                          hint="give 1 or more, or leave it out for one per CPU")


#: How options show on the command line, in messages.
FLAGS = {"cell_timeout": "--timeout", "memory_mb": "--memory-mb", "device": "--device", "isolate": "sandbox",
         "engine": "--engine"}


def describe_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    """``--timeout 60 -> 120, --device cpu -> cuda``: what differs between two sets of options."""
    changed = []
    for key in sorted(set(before) | set(after), key=lambda k: (k not in FLAGS, k)):
        if before.get(key) != after.get(key):
            changed.append(f"{FLAGS.get(key, key)} {_shown(before.get(key))} -> {_shown(after.get(key))}")
    return ", ".join(changed)


def _shown(value: Any) -> str:
    return {True: "on", False: "off", None: "none"}.get(value, str(value)) if isinstance(value, bool | None) else str(value)


# --- the gradebook's URL ---------------------------------------------------------------

@dataclass(frozen=True)
class GradebookUrl:
    """A gradebook's URL and where it came from: ``--db-url``, ``--db-url-file``, ``$COURSE_DB_URL``,
    the workspace, or the default (SQLite in the workspace)."""

    url: str
    origin: str
    file: Path | None = None

    def shown(self) -> str:
        """The URL with its password masked, fit for a message."""
        return mask(self.url)

    def remembered(self) -> dict[str, Any]:
        """What ``workspace.json`` keeps of it: never the password, but where it comes from."""
        if self.origin == "default":
            return {"url": None}
        from sqlalchemy.engine import URL, make_url

        parsed = make_url(self.url)
        if parsed.password is None:
            return {"url": self.url}
        without = URL.create(parsed.drivername, parsed.username, None, parsed.host, parsed.port, parsed.database,
                             parsed.query).render_as_string(hide_password=False)
        source = {"--db-url-file": {"file": str(self.file.resolve()) if self.file else None},
                  "$COURSE_DB_URL": {"env": DB_URL_ENV}}.get(self.origin, {"command line": True})
        return {"url": without, "password_from": source}


def refuse_another_gradebook(ws: Workspace, gb: GradebookUrl) -> None:
    """Refuse to grade a workspace's recorded results into another gradebook than theirs.

    Raises:
        OptionError: naming both gradebooks (passwords left out).
    """
    was = (ws.settings().get("gradebook") or {}).get("url", "") if ws.settings_path.is_file() else ""
    if was == "" or not any(ws.results.glob("*/*.json")):
        return
    now = gb.remembered()["url"]
    if (was or ws.default_db_url()) != (now or ws.default_db_url()):
        raise OptionError(f"this workspace was graded into the gradebook {was or ws.default_db_url()}; grading into "
                          f"{mask(gb.url)} would grade every recorded submission again",
                          hint="give that gradebook's URL (or none), or add --force to grade into the new one")


def mask(url: str) -> str:
    """``url`` with anything that could be a password replaced by ``***``."""
    return re.sub(r"(//[^/:@]*:)[^@/]*@", r"\1***@", url)


def given_db_url(db_url: str | None, db_url_file: Path | None) -> GradebookUrl | None:
    """The URL given to this command: ``--db-url``, else ``--db-url-file``, else ``$COURSE_DB_URL``.

    The variable is removed from this process's environment once read, so that nothing
    started later (workers, servers, kernels) inherits it; kernels get a stripped environment
    in any case (:func:`grader.engines.execution.kernel_env`).
    """
    from_env = os.environ.pop(DB_URL_ENV, None)
    if db_url:
        return GradebookUrl(db_url.strip(), "--db-url")
    if db_url_file is not None:
        return GradebookUrl(_read_url_file(db_url_file), "--db-url-file", db_url_file)
    if from_env and from_env.strip():
        return GradebookUrl(from_env.strip(), "$COURSE_DB_URL")
    return None


def _read_url_file(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GradebookError(f"cannot read the gradebook's URL from {path} ({exc})",
                             hint="pass --db-url-file with a readable file whose first line is the URL") from exc
    if not lines or not lines[0].strip():
        raise GradebookError(f"{path} is empty", hint="write the gradebook's URL on its first line")
    return lines[0].strip()


def db_url_of(ws: Workspace, given: GradebookUrl | None) -> GradebookUrl:
    """The gradebook of a command: the one given, else the one the workspace remembers, else the default.

    Raises:
        GradebookError: the remembered URL needs a password that cannot be recovered now.
    """
    if given is not None:
        return given
    remembered = ws.settings().get("gradebook") or {}
    url = remembered.get("url")
    if not url:
        return GradebookUrl(ws.default_db_url(), "default")
    source = remembered.get("password_from")
    if not source:
        return GradebookUrl(url, "workspace")
    if source.get("file"):
        path = Path(source["file"])
        if path.is_file():
            return GradebookUrl(_read_url_file(path), "--db-url-file", path)
    how = (f"pass --db-url-file {source['file']} (the file it was graded with)" if source.get("file")
           else f"set ${DB_URL_ENV} to the URL with its password, or pass --db-url-file FILE")
    raise GradebookError(f"this workspace's gradebook {url} needs its password, which is not stored",
                         where=str(ws.root), hint=how)
