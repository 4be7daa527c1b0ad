"""``course grade``: every check first (:mod:`grader.batch`), the fork servers next, then the batch."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

import click

from grader import batch
from grader.cli.base import (
    check_gradebook,
    cli,
    sqlite_unwritable,
    warn_if_password_in_argv,
    workdir_option,
)
from grader.engines.isolation import ahead, sandbox
from grader.intake.workspace import (
    MEMORY_FLOOR_MB,
    MEMORY_MEASURED_MB,
    Workspace,
    check_options,
    db_url_of,
    given_db_url,
    refuse_another_gradebook,
    unwritable,
)

#: Seconds between two progress lines of ``course grade`` when stderr is not a terminal (no bar)
PLAIN_PROGRESS_S = 10

#: What a remembered option's help says of its default (the workspace's value wins over click's).
REMEMBERED = "  [default: the workspace's last value, else {}]"


def _score_table(reports, width: int | None = None) -> str:
    """One line per submission; the details column lists every test not passed, wrapped to the
    terminal's width (continuation lines start under the column), never cut. A submission the
    grader could not grade shows no score."""
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
        score = f"{r.score:g}/{r.max_score:g}" if r.max_score and r.status != "error" else "-"
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


@cli.command(short_help="Auto-grade SUBMISSIONS (a folder or an LMS zip) into the workspace's gradebook.")
@click.argument("submissions", type=click.Path(exists=True, path_type=Path))
@workdir_option("Grading workspace: the gradebook, submitted/, autograded/, results/, grader.log (what went "
                "wrong, and why), course-grades.csv, results.csv, report/; `course feedback` writes the pages "
                "to WORKDIR/course-feedback/.")
@click.option("--db-url", default=None,
              help="SQLAlchemy URL of the gradebook [default: $COURSE_DB_URL, else the one WORKDIR was graded into, "
                   "else sqlite in WORKDIR]. A URL with a password belongs in $COURSE_DB_URL or --db-url-file: a "
                   "command line is readable by every process on the machine.")
@click.option("--db-url-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Read the gradebook's URL from this file (first line).")
@click.option("--jobs", "-j", type=int, default=None, help="Submissions graded at once [default: CPU count].")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu",
              help="Device the notebooks run on." + REMEMBERED.format("cpu"))
@click.option("--timeout", "cell_timeout", type=int, default=60,
              help="Seconds one cell may run before it is stopped (that test scores 0); at least 1." + REMEMBERED.format(60))
@click.option("--memory-mb", type=int, default=2048,
              help=f"Memory cap of each submission in MiB (its processes together where cgroups work, else each "
                   f"process's address space); 0: none. At least {MEMORY_FLOOR_MB}: a chapter-01 submission needed "
                   f"{MEMORY_MEASURED_MB} MiB in a Jupyter kernel." + REMEMBERED.format(2048))
@click.option("--no-sandbox", is_flag=True,
              help="Do not use bubblewrap even where it works (refused without --unsafe-no-sandbox).")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Confirm --no-sandbox: submissions then run as this user, can read the solutions and the "
                   "gradebook, signal the grader and use the network. Only for code you trust.")
@click.option("--chapter", default=None, help="Chapter of an LMS zip [default: guessed from its file names].")
@click.option("--force", is_flag=True,
              help="Re-grade submissions already graded (needed when a changed option would re-grade recorded results).")
@click.option("--solutions", "solutions_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Folder of the chapters' source notebooks [default: the one WORKDIR was graded "
                                 "with, else this course's solutions/].")
@click.option("--engine", type=click.Choice(["fork", "kernel"]), default="fork",
              help="fork: children of a warm interpreter (fast); kernel: a Jupyter kernel per submission "
                   "(the reference). Both give the same grades." + REMEMBERED.format("fork"))
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Execute on a Dask distributed cluster, e.g. tcp://10.0.0.5:8786 (this machine still writes the gradebook).")
def grade(submissions: Path, workdir: Path, db_url: str | None, db_url_file: Path | None, jobs: int | None,
          device: str, cell_timeout: int, memory_mb: int, no_sandbox: bool, unsafe_no_sandbox: bool,
          chapter: str | None, force: bool, solutions_dir: Path | None, engine: str, scheduler: str | None) -> None:
    """Auto-grade SUBMISSIONS into the workspace's gradebook.

    SUBMISSIONS is a folder laid out <student>/<chapter>/<notebook>.ipynb, or a zip
    downloaded from Canvas or Moodle. Options not given (--timeout, --memory-mb, --device,
    --engine, --solutions, the gradebook) are the ones WORKDIR was last graded with.
    Every mistake is refused before any submission or sandbox starts; a rerun with nothing
    new to grade starts none. A submission the grader could not grade has no score (an empty
    cell in course-grades.csv): the last line says how many and why, WORKDIR/grader.log the cause.
    """
    from grader import project

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
    solutions = solutions_dir or project.SOLUTIONS
    # Every refusal before anything starts: the options, the chapter, the submissions, the gradebook
    # (none of these touches the workspace), then the lock, the workspace, recorded results.
    check_options(cell_timeout=cell_timeout, memory_mb=memory_mb or None, jobs=jobs)
    batch.check_device(device)
    sources = project.sources(solutions)
    batch.check_chapter(chapter, sources)
    found = batch.check_submissions(submissions, sources, chapter)
    # what bubblewrap can make here is probed meanwhile (~0.15 s, the grader's own code only): the
    # zygote, started once every check passed, waits for the answer
    with ahead.probing(scheduler is None and not no_sandbox and not sandbox.level_known(), sandbox.probe_level):
        _checked_batch(ws, workdir, submissions, sources, found, reused, db_url=db_url, db_url_file=db_url_file,
                       jobs=jobs, device=device, cell_timeout=cell_timeout, memory_mb=memory_mb,
                       no_sandbox=no_sandbox, chapter=chapter, force=force, engine=engine, scheduler=scheduler,
                       solutions_dir=solutions_dir)


def _checked_batch(ws: Workspace, workdir: Path, submissions: Path, sources: dict, found: list, reused: list, *,
                   db_url, db_url_file, jobs, device, cell_timeout, memory_mb, no_sandbox, chapter, force, engine,
                   scheduler, solutions_dir) -> None:
    """The gradebook's and the workspace's refusals, then the servers, the batch and its files."""
    warn_if_password_in_argv(db_url)
    gb = db_url_of(ws, given_db_url(db_url, db_url_file))
    if not force:
        refuse_another_gradebook(ws, gb)
    if gb.origin != "default":  # the default one is created in the workspace
        check_gradebook(gb, workdir, create=True)
    with batch.held(workdir):
        problem = sqlite_unwritable(gb.url) if gb.origin == "default" else None
        if problem is not None:  # a read-only workspace: its permission problem, in one line
            raise unwritable(workdir, problem)
        options = {"cell_timeout": cell_timeout, "memory_mb": memory_mb or None, "device": device,
                   "isolate": not no_sandbox}
        todo = batch.pending(ws, submissions, sources, chapter=chapter, force=force, options=options, found=found)
        if engine == "fork" and scheduler is None and todo == batch.WORK:
            _start_servers(ws, submissions, solutions_dir, jobs, device=device, isolate=not no_sandbox,
                           chapter=chapter, found=found)
        if reused:
            click.echo(f"grading with the options {workdir} was graded with: {', '.join(reused)} (workspace.json)",
                       err=True)
        reports = _run(ws, submissions, gb, jobs=jobs, device=device, cell_timeout=cell_timeout,
                       memory_mb=memory_mb, no_sandbox=no_sandbox, chapter=chapter, force=force, engine=engine,
                       scheduler=scheduler, solutions_dir=solutions_dir, announce=todo == batch.WORK)
    _conclude(ws, gb.url, reports)


def _run(ws: Workspace, submissions: Path, gb, *, jobs, device, cell_timeout, memory_mb, no_sandbox, chapter, force,
         engine, scheduler, solutions_dir, announce: bool) -> list:
    """The batch (:func:`grader.grade.main`), with its progress on stderr."""
    from tqdm import tqdm

    from grader import grade as mod
    from grader.engines.isolation.sandbox import isolation_summary
    from grader.intake import interop

    workdir = ws.root
    if announce and no_sandbox:
        click.echo("isolation: NONE (--unsafe-no-sandbox): submissions run as this user, with its files, processes "
                   "and network; memory capped per process only", err=True)
    elif announce:
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
        # what start-up made (torch, nbgrader, the releases: most of this process's objects) is left out of
        # the collector's scans for the rest of the command, which ends with the batch: a collection then
        # scans what the batch made (on the fork path it scanned the whole heap, ~2-5 ms a submission)
        gc.freeze()
        interop.write_nbgrader_config(workdir)
        ws.remember(gradebook=gb.remembered())
        bar.total = n
        bar.refresh()
        if bar.disable and n:
            plain["last"] = time.monotonic()
            click.echo(f"grading: {n} submission(s), each chapter's solution run first (cached in the workspace)",
                       err=True)

    try:
        return mod.main(submissions, workdir, db_url=None if gb.origin == "default" else gb.url, jobs=jobs,
                        device=device, cell_timeout=cell_timeout, memory_mb=memory_mb or None, isolate=not no_sandbox,
                        chapter=chapter, force=force, engine=engine, scheduler=scheduler, on_progress=progress,
                        on_start=started, **({"solutions_dir": solutions_dir} if solutions_dir else {}))
    finally:
        bar.close()


def _conclude(ws: Workspace, url: str, reports: list) -> None:
    """The table, the grade files and the report; last, a warning line for what was not graded."""
    from grader.intake import interop
    from grader.pages import report
    from grader.record import export

    workdir = ws.root
    click.echo(_score_table(reports))
    csv_path = export.write_grades_csv(url, workdir / interop.GRADES_CSV, workdir=workdir)
    export.write_results_csv(workdir, url, workdir / interop.RESULTS_CSV)
    report_path = report.main(workdir, db_url=url)
    click.echo(f"\n{len(reports)} submission(s); grades in {csv_path} (per test: {interop.RESULTS_CSV}); "
               f"class report in {report_path.with_suffix('.html')}")
    errors = [(r.student, r.chapter, r.message) for r in reports if r.status == "error"]
    if errors:
        click.echo(export.not_graded_warning(errors, workdir), err=True)


def _start_servers(ws: Workspace, submissions: Path, solutions_dir: Path | None, jobs: int | None, *,
                   device: str, isolate: bool, chapter: str | None = None, found: list | None = None) -> None:
    """Start the fork engine's warm servers once every check passed: each imports torch (~2 s)
    while this process imports the grader, reads the chapters and runs nothing yet; ``course
    grade`` finds them ready, started with the preload its chapters ask for. (``found``: the
    folder's rows, already read.)"""
    from grader import project
    from grader.engines.execution import ExecOptions
    from grader.engines.fork import pool as forkpool

    solutions = solutions_dir or project.SOLUTIONS
    sources = project.sources(solutions)
    wanted = batch.cpu_jobs(jobs)
    if submissions.is_dir():  # no more servers than notebooks (a zip: as many as jobs)
        if found is None:
            from grader.intake.submissions import discover

            found = discover(submissions, {c: p.name for c, p in sources.items()})
        waiting = [s for s in found if s.path is not None]
        wanted = min(wanted, max(1, len(waiting)))
        chapters = {s.chapter for s in waiting}
    else:  # a zip: the chapter named, or the one its file names tell (as grading will guess it)
        from grader.intake.lms import lms_zip_chapter

        guessed = chapter or lms_zip_chapter(submissions, {c: p.name for c, p in sources.items()})
        chapters = {guessed} if guessed else set()
    preload = project.preload(chapters & set(sources), solutions)
    hide = ws.hidden(submissions, solutions)
    forkpool.prestart(ExecOptions(device=device, isolate=isolate, hide=hide, preload=preload), wanted)
