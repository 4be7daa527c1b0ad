"""The ``course`` group itself: its help (commands in workflow order, exit statuses), ``--version``,
``-v``, error handling (one ``error:`` line), and the options and helpers its commands share."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from grader.exceptions import CourseError, GradebookError
from grader.intake.workspace import (
    DB_URL_ENV,
    GradebookUrl,
    Workspace,
    db_url_of,
    given_db_url,
    unwritable,
)

#: ``course --help`` lists these commands first, in the order a term uses them; the others follow, sorted.
WORKFLOW = ("release", "grade", "feedback", "export", "report")

EXIT_STATUSES = """\b
Exit status:
  0    done
  1    check-release or clean-notebooks --check found problems (or the grader
       itself failed: a traceback is printed)
  2    a mistake to fix (an option, a path, a gradebook URL, a chapter source):
       one `error:` line says which and how
  75   the workspace is busy: another `course grade` is grading into it
  130  interrupted (Ctrl-C): what was recorded stays; the same command resumes"""

#: -v given to this invocation: an error then shows its traceback
_verbose = 0

#: Loggers that never speak below WARNING, whatever -v says: SQLAlchemy logs every SQL
#: statement at INFO (~1,600 lines for one batch), alembic its migration context.
QUIET = ("sqlalchemy", "alembic")
#: Libraries whose INFO lines are routine for us: nbgrader's and nbconvert's preprocessors log
#: through "traitlets" (a restored test cell's "checksum has changed"); heard from -vv on.
CHATTY = ("traitlets", "nbgrader")


def setup_logging(verbose: int) -> None:
    """Console logging for one ``course`` invocation: warnings; with ``-v`` the grader's own lines
    down to debug (``grader.*``); with ``-vv`` other libraries' info and debug lines too. SQL never."""
    logging.basicConfig(level=logging.WARNING if verbose < 2 else logging.DEBUG,
                        format="%(levelname)s %(name)s: %(message)s")  # (a no-op where logging is set up)
    console = logging.WARNING if verbose == 0 else logging.DEBUG
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler and getattr(handler, "stream", None) in (sys.stderr, sys.stdout):
            handler.setLevel(console)  # a batch's grader.log takes INFO lines: the console only what -v asks
    logging.getLogger("grader").setLevel(logging.DEBUG if verbose else logging.NOTSET)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in CHATTY:
        logging.getLogger(name).setLevel(logging.ERROR if verbose < 2 else logging.DEBUG)


class Course(click.Group):
    """``course``: an error the user can fix ends in one line on stderr and a non-zero exit status
    (2; 75 when the workspace is busy; 130 on Ctrl-C); ``course -v`` shows its traceback too."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return [n for n in WORKFLOW if n in names] + sorted(n for n in names if n not in WORKFLOW)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole first sentence (click cuts it at the terminal's width with "...")."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands (in workflow order)"):
                formatter.write_dl(rows)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        global _verbose
        _verbose = 0
        argv = _verbosity_first(list(sys.argv[1:] if args is None else args))
        try:
            status = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = f" (see `{exc.ctx.command_path} -h`)" if exc.ctx else ""
            fail(exc, f"{exc.format_message().rstrip('.')}{where}", exc.exit_code)
        except click.ClickException as exc:
            fail(exc, exc.format_message(), exc.exit_code)
        except CourseError as exc:
            fail(exc, exc.one_line(), exc.exit_code)
        except (click.Abort, KeyboardInterrupt) as exc:
            fail(exc, "interrupted", 130)
        sys.exit(status if isinstance(status, int) else 0)


def _verbosity_first(argv: list[str]) -> list[str]:
    """``course grade -v ...`` read as ``course -v grade ...``: -v (the group's option) works anywhere."""
    flags = [a for a in argv[: argv.index("--") if "--" in argv else len(argv)]
             if a == "--verbose" or (a.startswith("-v") and set(a[1:]) == {"v"})]
    rest = list(argv)
    for flag in flags:
        rest.remove(flag)
    return flags + rest


def fail(exc: BaseException, line: str, status: int) -> None:
    """End the command: ``error: line`` on stderr (after the traceback with -v), exit ``status``."""
    if _verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    click.echo(f"error: {line}", err=True)
    sys.exit(status)


@click.group(cls=Course, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_STATUSES)
@click.version_option(package_name="pytorch-foundations", prog_name="course", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", count=True,
              help="The grader's own log lines, down to debug (-vv: other libraries' too; SQL never); "
                   "an error shows its traceback.")
def cli(verbose: int) -> None:
    """Release, check and grade the PyTorch Foundations course."""
    global _verbose
    _verbose = verbose
    setup_logging(verbose)


def workdir_option(help: str, **kwargs):
    """``--workdir`` (default ``course-work``), with what it means to this command."""
    return click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"),
                        show_default=True, help=help, **kwargs)


def say_workspace(ctx: click.Context, workdir: Path) -> None:
    """Say which workspace a command reads when ``--workdir`` was left out (the default's, maybe a demo's)."""
    if ctx.get_parameter_source("workdir") is click.core.ParameterSource.DEFAULT:
        click.echo(f"reading the workspace {workdir.absolute()} (no --workdir given)", err=True)


#: ``--workdir`` of the commands that read a graded workspace
GRADED_WORKDIR = "The workspace `course grade` graded into (its gradebook, results/ and workspace.json)."


def resolve_db_url(db_url: str | None, db_url_file: Path | None) -> str | None:
    """The gradebook's URL given to a command: ``--db-url``, else ``--db-url-file``, else
    ``$COURSE_DB_URL`` (removed from the environment once read: see :func:`grader.intake.workspace.given_db_url`)."""
    given = given_db_url(db_url, db_url_file)
    return given.url if given else None


def check_gradebook(gb: GradebookUrl, workdir: Path, *, create: bool) -> None:
    """:func:`grader.record.gradebook.check`, with an SQLite gradebook that fails because its file or folder
    cannot be written reported as the workspace's permission problem, not a database server's."""
    from grader.record import gradebook

    try:
        gradebook.check(gb.url, create=create)
    except GradebookError as exc:
        problem = sqlite_unwritable(gb.url)
        if problem is not None:
            raise unwritable(workdir, problem) from exc
        raise


def sqlite_unwritable(url: str) -> OSError | None:
    """Why an SQLite gradebook's file (or, for a new one, its folder) cannot be written; None when it
    can, or when ``url`` is no SQLite file. Tried, not read from the modes: root ignores them, a
    read-only file system does not."""
    import os
    import tempfile

    if not url.startswith("sqlite"):
        return None
    try:
        from sqlalchemy.engine import make_url

        database = make_url(url).database
    except Exception:  # noqa: BLE001 -- a malformed URL is gradebook.check's to report
        return None
    if not database or database == ":memory:":
        return None
    file = Path(database)
    try:
        if file.is_file():
            os.close(os.open(file, os.O_RDWR))
        if file.parent.is_dir():  # SQLite writes its journal (-wal, -shm) beside the file
            tempfile.TemporaryFile(dir=file.parent).close()
    except OSError as exc:
        return exc
    return None


def gradebook_of(workdir: Path, db_url: str | None, db_url_file: Path | None) -> tuple[Workspace, GradebookUrl]:
    """A graded workspace and its gradebook (given, else remembered), checked to exist: one line if not."""
    ws = Workspace(workdir)
    ws.require_graded()
    gb = db_url_of(ws, given_db_url(db_url, db_url_file))
    check_gradebook(gb, workdir, create=False)
    return ws, gb


def db_url_options(command):
    """``--db-url`` and ``--db-url-file`` of a command that reads the gradebook."""
    command = click.option("--db-url-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                           help="Read the gradebook's URL from this file (first line).")(command)
    return click.option("--db-url", default=None,
                        help="SQLAlchemy URL of the gradebook [default: $COURSE_DB_URL, else the one WORKDIR was "
                             "graded into (workspace.json)].")(command)


def warn_if_password_in_argv(db_url: str | None) -> None:
    if db_url and any(db_url == a or a.startswith("--db-url=") and db_url in a for a in sys.argv):
        try:
            from sqlalchemy.engine import make_url

            has_password = make_url(db_url).password is not None
        except Exception:
            has_password = "@" in db_url
        if has_password:
            click.echo(f"warning: --db-url holds a password, readable from this command line by any process; "
                       f"put the URL in ${DB_URL_ENV} or a file given to --db-url-file", err=True)
