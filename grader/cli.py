"""The ``course`` command line: it only parses options and forwards to each module's ``main``."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click

from grader.exceptions import CourseError
from grader.workspace import (
    DB_URL_ENV,
    MEMORY_FLOOR_MB,
    MEMORY_MEASURED_MB,
    GradebookUrl,
    Workspace,
    check_options,
    db_url_of,
    given_db_url,
    refuse_another_gradebook,
    unwritable,
)

__all__ = ["DB_URL_ENV", "cli", "main", "resolve_db_url"]


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(level=max(level, logging.DEBUG), format="%(levelname)s %(name)s: %(message)s")
    # nbgrader's and nbconvert's preprocessors log through "traitlets": a restored test cell
    # ("checksum has changed") is routine for us, so they speak only from -v on.
    for noisy in ("traitlets", "nbgrader", "alembic", "sqlalchemy"):
        logging.getLogger(noisy).setLevel(logging.ERROR if verbose == 0 else level)


#: Seconds between two progress lines of ``course grade`` when stderr is not a terminal (no bar)
PLAIN_PROGRESS_S = 10

#: -v given to this invocation: an error then shows its traceback
_verbose = 0


class _Course(click.Group):
    """``course``: an error the user can fix ends in one line on stderr and a non-zero exit status
    (2; 75 when the workspace is busy; 130 on Ctrl-C); ``course -v`` shows its traceback too."""

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
            _fail(exc, f"{exc.format_message().rstrip('.')}{where}", exc.exit_code)
        except click.ClickException as exc:
            _fail(exc, exc.format_message(), exc.exit_code)
        except CourseError as exc:
            _fail(exc, exc.one_line(), exc.exit_code)
        except (click.Abort, KeyboardInterrupt) as exc:
            _fail(exc, "interrupted", 130)
        sys.exit(status if isinstance(status, int) else 0)


def _verbosity_first(argv: list[str]) -> list[str]:
    """``course grade -v ...`` read as ``course -v grade ...``: -v (the group's option) works anywhere."""
    flags = [a for a in argv[: argv.index("--") if "--" in argv else len(argv)]
             if a == "--verbose" or (a.startswith("-v") and set(a[1:]) == {"v"})]
    rest = list(argv)
    for flag in flags:
        rest.remove(flag)
    return flags + rest


def _fail(exc: BaseException, line: str, status: int) -> None:
    if _verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    click.echo(f"error: {line}", err=True)
    sys.exit(status)


@click.group(cls=_Course, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug); an error shows its traceback.")
def cli(verbose: int) -> None:
    """Release, check and grade the PyTorch Foundations course."""
    global _verbose
    _verbose = verbose
    _setup_logging(verbose)


@cli.command()
@click.argument("chapters", nargs=-1)
def release(chapters: tuple[str, ...]) -> None:
    """Write the student release notebooks/ from solutions/ (all chapters by default)."""
    from grader import release as mod

    for path in mod.main(list(chapters)):
        click.echo(f"released {path}")


@cli.command("check-release")
def check_release() -> None:
    """Fail when notebooks/ is stale against solutions/ or leaks a solution or hidden test."""
    from grader import release as mod

    problems = mod.check()
    for line in problems:
        click.echo(f"FAIL {line}", err=True)
    if problems:
        raise SystemExit(1)
    click.echo("release OK: in sync with solutions/, no solution or hidden test leaked")


@cli.command("clean-notebooks")
@click.option("--check", is_flag=True, help="Only report; exit 1 when a notebook is not clean.")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
def clean_notebooks(check: bool, paths: tuple[Path, ...]) -> None:
    """Strip outputs, execution counts and stray metadata from committed notebooks."""
    from grader import hygiene

    targets = list(paths) or hygiene.committed_notebooks()
    if check:
        found = [p for path in targets for p in hygiene.problems(path)]
        for line in found:
            click.echo(f"FAIL {line}", err=True)
        if found:
            raise SystemExit(1)
        click.echo(f"{len(targets)} notebook(s) clean")
        return
    changed = [p for p in targets if hygiene.clean(p)]
    click.echo(f"cleaned {len(changed)} of {len(targets)} notebook(s)")


def resolve_db_url(db_url: str | None, db_url_file: Path | None) -> str | None:
    """The gradebook's URL given to a command: ``--db-url``, else ``--db-url-file``, else
    ``$COURSE_DB_URL`` (removed from the environment once read: see :func:`grader.workspace.given_db_url`)."""
    given = given_db_url(db_url, db_url_file)
    return given.url if given else None


def _gradebook_of(workdir: Path, db_url: str | None, db_url_file: Path | None) -> tuple[Workspace, GradebookUrl]:
    """A graded workspace and its gradebook (given, else remembered), checked to exist: one line if not."""
    from grader import gradebook

    ws = Workspace(workdir)
    ws.require_graded()
    gb = db_url_of(ws, given_db_url(db_url, db_url_file))
    gradebook.check(gb.url, create=False)
    return ws, gb


def _db_url_options(command):
    """``--db-url`` and ``--db-url-file`` of a command that reads the gradebook."""
    command = click.option("--db-url-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                           help="Read the gradebook's URL from this file (first line).")(command)
    return click.option("--db-url", default=None,
                        help="SQLAlchemy URL of the gradebook [default: $COURSE_DB_URL, else the one WORKDIR was "
                             "graded into (workspace.json)].")(command)


def _warn_if_password_in_argv(db_url: str | None) -> None:
    if db_url and any(db_url == a or a.startswith("--db-url=") and db_url in a for a in sys.argv):
        try:
            from sqlalchemy.engine import make_url

            has_password = make_url(db_url).password is not None
        except Exception:
            has_password = "@" in db_url
        if has_password:
            click.echo(f"warning: --db-url holds a password, readable from this command line by any process; "
                       f"put the URL in ${DB_URL_ENV} or a file given to --db-url-file", err=True)


def _score_table(reports, width: int | None = None) -> str:
    """One line per submission; the details column lists every test not passed, wrapped to the
    terminal's width (continuation lines start under the column), never cut."""
    import shutil
    import textwrap

    rows = [("student", "chapter", "score", "status", "details")]
    for r in reports:
        failed = [f"{t['grade_id']}\xa0({t['status']})" for t in r.tests if t["status"] != "passed"]  # kept on one line
        if r.message and r.status != "graded":
            detail = r.message
        else:
            detail = "; ".join(filter(None, [r.message, "not passed: " + ", ".join(failed) if failed else ""]))
            detail = detail or "all tests passed"
        score = f"{r.score:g}/{r.max_score:g}" if r.max_score else "-"
        rows.append((r.student, r.chapter, score, r.status + (" (cached)" if r.cached else ""), detail))
    widths = [max(len(str(row[i])) for row in rows) for i in range(4)]
    indent = sum(widths) + 2 * len(widths)
    room = max(40, (width or shutil.get_terminal_size((120, 24)).columns) - indent)
    lines = []
    for k, row in enumerate(rows):
        wrapped = [w.replace("\xa0", " ") for w in textwrap.wrap(row[4], room, break_on_hyphens=False,
                                                                 break_long_words=False)] or [""]
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(row[:4], widths, strict=True)) + "  " + wrapped[0])
        lines += [" " * indent + more for more in wrapped[1:]]
        if k == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 7)
    return "\n".join(lines)


@cli.command()
@click.argument("submissions", type=click.Path(exists=True, path_type=Path))
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"),
              show_default=True, help="Grading workspace: gradebook, autograded/, results/, feedback/.")
@click.option("--db-url", default=None,
              help="SQLAlchemy URL of the gradebook [default: $COURSE_DB_URL, else sqlite in WORKDIR]. "
                   "A URL with a password belongs in $COURSE_DB_URL or --db-url-file: a command line is readable by "
                   "every process on the machine.")
@click.option("--db-url-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Read the gradebook's URL from this file (first line).")
@click.option("--jobs", "-j", type=int, default=None, help="Submissions graded at once [default: CPU count].")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Device the notebooks run on.")
@click.option("--timeout", "cell_timeout", type=int, default=60, show_default=True,
              help="Seconds one cell may run before it is stopped (that test scores 0); at least 1.")
@click.option("--memory-mb", type=int, default=2048, show_default=True,
              help=f"Memory cap of each submission in MiB (its processes together where cgroups work, else each "
                   f"process's address space); 0: none. At least {MEMORY_FLOOR_MB}: a chapter-01 submission needed "
                   f"{MEMORY_MEASURED_MB} MiB in a Jupyter kernel.")
@click.option("--no-sandbox", is_flag=True,
              help="Do not use bubblewrap even where it works (refused without --unsafe-no-sandbox).")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Confirm --no-sandbox: submissions then run as this user, can read the solutions and the "
                   "gradebook, signal the grader and use the network. Only for code you trust.")
@click.option("--chapter", default=None, help="Chapter of an LMS zip (guessed from file names).")
@click.option("--force", is_flag=True,
              help="Re-grade submissions already graded (needed when a changed option would re-grade recorded results).")
@click.option("--solutions", "solutions_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Folder of the chapters' source notebooks [default: this course's solutions/].")
@click.option("--engine", type=click.Choice(["fork", "kernel"]), default="fork", show_default=True,
              help="fork: children of a warm interpreter (fast); kernel: a Jupyter kernel per submission "
                   "(the reference). Both give the same grades.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Execute on a Dask distributed cluster, e.g. tcp://10.0.0.5:8786 (this machine still writes the gradebook).")
def grade(submissions: Path, workdir: Path, db_url: str | None, db_url_file: Path | None, jobs: int | None,
          device: str, cell_timeout: int, memory_mb: int, no_sandbox: bool, unsafe_no_sandbox: bool,
          chapter: str | None, force: bool, solutions_dir: Path | None, engine: str, scheduler: str | None) -> None:
    """Auto-grade SUBMISSIONS into the gradebook.

    SUBMISSIONS is a folder laid out <student>/<chapter>/<notebook>.ipynb, or a zip
    downloaded from Canvas or Moodle. Options not given (--timeout, --memory-mb, --device,
    --engine, --solutions, the gradebook) are the ones WORKDIR was last graded with.
    """
    if no_sandbox and not unsafe_no_sandbox:
        raise click.UsageError("--no-sandbox runs every submission as this user, able to read the solutions and the "
                               "gradebook and to signal the grader: add --unsafe-no-sandbox to confirm (trusted code only)")
    ws = Workspace(workdir)
    remembered = ws.settings() if workdir.is_dir() else {}
    ctx = click.get_current_context()
    previous = remembered.get("grading") or {}
    reused = []
    for name, flag in (("cell_timeout", "--timeout"), ("memory_mb", "--memory-mb"), ("device", "--device"),
                       ("engine", "--engine")):
        if ctx.get_parameter_source(name) is click.core.ParameterSource.DEFAULT and name in previous:
            value = previous[name] or 0 if name == "memory_mb" else previous[name]  # no cap: None there, 0 here
            if value != ctx.params[name]:
                reused.append(f"{flag} {value}")
            ctx.params[name] = value
    cell_timeout, memory_mb = ctx.params["cell_timeout"], ctx.params["memory_mb"]
    device, engine = ctx.params["device"], ctx.params["engine"]
    if solutions_dir is None and remembered.get("solutions") and Path(remembered["solutions"]).is_dir():
        solutions_dir = Path(remembered["solutions"])
    check_options(cell_timeout=cell_timeout, memory_mb=memory_mb or None, jobs=jobs)
    if engine == "fork" and scheduler is None:
        _start_servers(ws, submissions, solutions_dir, jobs, device=device, isolate=not no_sandbox, chapter=chapter)
    from tqdm import tqdm

    from grader import export, gradebook, interop, report
    from grader import grade as mod
    from grader.engines.sandbox import isolation_summary

    _warn_if_password_in_argv(db_url)
    gb = db_url_of(ws, given_db_url(db_url, db_url_file))
    if not force:
        refuse_another_gradebook(ws, gb)
    if gb.origin != "default":  # the default one is created in the workspace
        gradebook.check(gb.url, create=True)
    db_url = None if gb.origin == "default" else gb.url
    if reused:
        click.echo(f"grading with the options {workdir} was graded with: {', '.join(reused)} (workspace.json)", err=True)
    if no_sandbox:
        click.echo("isolation: NONE (--unsafe-no-sandbox): submissions run as this user, with its files, processes "
                   "and network; memory capped per process only", err=True)
    else:
        click.echo(f"isolation: {isolation_summary(device)}", err=True)
    counts: dict[str, int] = {}
    bar = tqdm(desc="grading", unit="nb", file=sys.stderr, disable=None)

    plain = {"last": time.monotonic(), "done": 0}  # without a terminal (a CI log): a line every ~10 s

    def progress(r) -> None:  # per submission: graded / error, and how many had a test time out
        counts[r.status] = counts.get(r.status, 0) + 1
        if any(t["status"] == "timed out" for t in r.tests):
            counts["timed out"] = counts.get("timed out", 0) + 1
        bar.update(1)
        bar.set_postfix_str(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        plain["done"] += 1
        if bar.disable and (time.monotonic() - plain["last"] >= PLAIN_PROGRESS_S or plain["done"] == bar.total):
            plain["last"] = time.monotonic()
            tally = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            click.echo(f"grading: {plain['done']}/{bar.total} done ({tally})", err=True)

    def started(n: int) -> None:
        interop.write_nbgrader_config(workdir)
        ws.remember(gradebook=gb.remembered())
        bar.total = n
        bar.refresh()
        if bar.disable and n:
            plain["last"] = time.monotonic()
            click.echo(f"grading: {n} submission(s), each chapter's solution run first (cached in the workspace)",
                       err=True)

    try:
        reports = mod.main(submissions, workdir, db_url=db_url, jobs=jobs, device=device,
                           cell_timeout=cell_timeout, memory_mb=memory_mb or None, isolate=not no_sandbox,
                           chapter=chapter, force=force, engine=engine, scheduler=scheduler, on_progress=progress,
                           on_start=started, **({"solutions_dir": solutions_dir} if solutions_dir else {}))
    finally:
        bar.close()
    click.echo(_score_table(reports))
    url = gb.url
    csv_path = export.write_grades_csv(url, workdir / interop.GRADES_CSV, workdir=workdir)
    export.write_results_csv(workdir, url, workdir / interop.RESULTS_CSV)
    report_path = report.main(workdir, db_url=url)
    click.echo(f"\n{len(reports)} submission(s); grades in {csv_path} (per test: {interop.RESULTS_CSV}); "
               f"class report in {report_path.with_suffix('.html')}")


def _start_servers(ws: Workspace, submissions: Path, solutions_dir: Path | None, jobs: int | None, *,
                   device: str, isolate: bool, chapter: str | None = None) -> None:
    """Start the fork engine's warm servers first: each imports torch (~2 s) while this process
    imports the grader, reads the chapters and runs nothing yet; ``course grade`` finds them
    ready, started with the preload its chapters ask for. (A batch refused later -- a busy
    workspace, a bad option -- stops them at exit.)"""
    import os

    from grader import project
    from grader.engines import forkpool
    from grader.engines.execution import ExecOptions

    solutions = solutions_dir or project.SOLUTIONS
    sources = project.sources(solutions)
    wanted = max(1, jobs or os.cpu_count() or 1)
    if submissions.is_dir():  # no more servers than notebooks (a zip: as many as jobs)
        notebooks = list(submissions.glob("*/*/*.ipynb"))
        wanted = min(wanted, max(1, len(notebooks)))
        chapters = {p.parent.name for p in notebooks}
    else:  # a zip: the chapter named, or the one its file names tell (as grading will guess it)
        from grader.intake import lms_zip_chapter

        guessed = chapter or lms_zip_chapter(submissions, {c: p.name for c, p in sources.items()})
        chapters = {guessed} if guessed else set()
    preload = project.preload(chapters & set(sources), solutions)
    hide = ws.hidden(submissions, solutions)
    forkpool.prestart(ExecOptions(device=device, isolate=isolate, hide=hide, preload=preload), wanted)


@cli.command("report")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"), show_default=True)
@_db_url_options
def report_cmd(workdir: Path, db_url: str | None, db_url_file: Path | None) -> None:
    """Write the class report: pass rate per test (hardest first), score histogram, flags."""
    from grader import report

    _, gb = _gradebook_of(workdir, db_url, db_url_file)
    try:
        path = report.main(workdir, db_url=gb.url)
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    click.echo(path.read_text(encoding="utf-8").split("## Scores by chapter")[0])
    click.echo(f"report written to {path.with_suffix('.html')} (and {path.name})")


@cli.command("export")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"), show_default=True)
@_db_url_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="[default: WORKDIR/course-grades.csv]")
@click.option("--results-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="[default: WORKDIR/results.csv]")
def export_cmd(workdir: Path, db_url: str | None, db_url_file: Path | None, out: Path | None,
               results_out: Path | None) -> None:
    """Write course-grades.csv (a row per student, a column per chapter, for an LMS) and results.csv (a row per test)."""
    from grader import export, interop

    _, gb = _gradebook_of(workdir, db_url, db_url_file)
    url = gb.url
    try:
        path = export.write_grades_csv(url, out or workdir / interop.GRADES_CSV, workdir=workdir)
        click.echo(f"wrote {path}")
        click.echo(f"wrote {export.write_results_csv(workdir, url, results_out or workdir / interop.RESULTS_CSV)}")
        interop.write_nbgrader_config(workdir)
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    failed = export.errors(workdir)
    if failed:
        shown = ", ".join(f"{s}/{c}" for s, c in failed[:5]) + (" ..." if len(failed) > 5 else "")
        click.echo(f"warning: {len(failed)} submission(s) are errors, not grades ({shown}): their scores in "
                   f"{path.name} are incomplete; results.csv says why; grade again once the cause is fixed", err=True)


@cli.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"), show_default=True)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Pages built at once [default: CPU count].")
@click.option("--solutions", "solutions_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Folder of the chapters' source notebooks [default: the one WORKDIR was graded "
                                 "with, else this course's solutions/].")
@_db_url_options
def feedback(workdir: Path, jobs: int | None, solutions_dir: Path | None, db_url: str | None,
             db_url_file: Path | None) -> None:
    """Write per-student HTML feedback to WORKDIR/course-feedback/ (which test failed and why, manual
    grades and comments; no hidden-test source; pages that load nothing from a network)."""
    from grader import feedback as mod

    ws, gb = _gradebook_of(workdir, db_url, db_url_file)
    remembered = ws.settings().get("solutions")
    if solutions_dir is None and remembered and Path(remembered).is_dir():
        solutions_dir = Path(remembered)
    try:
        paths = mod.main(workdir, jobs=jobs, db_url=gb.url, **({"solutions_dir": solutions_dir} if solutions_dir else {}))
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    click.echo(f"wrote {len(paths)} feedback page(s) under {mod.feedback_dir(workdir)}")


@cli.command()
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.argument("chapters", nargs=-1)
def samples(dest: Path, chapters: tuple[str, ...]) -> None:
    """Write the demo class's sample submissions (perfect, partial, untouched, syntax error) to DEST."""
    from grader import samples as mod

    paths = mod.write_samples(dest, list(chapters))
    click.echo(f"wrote {len(paths)} sample submission(s) under {dest}")


def main() -> None:
    """Entry point of the ``course`` console script (errors: see :class:`_Course`)."""
    try:
        cli()
    except SystemExit as exc:
        _leave(exc.code)
    _leave(0)


def _leave(code: object) -> None:
    """Exit with ``code`` as ``sys.exit`` would, without tearing the interpreter down: the exit
    handlers run (the fork servers stop, logging is flushed) and every file this command wrote is
    closed by then, but the ~1 s Python spends freeing torch's, nbgrader's and SQLAlchemy's
    objects one by one before it exits is skipped."""
    import atexit
    import os

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


if __name__ == "__main__":
    main()
