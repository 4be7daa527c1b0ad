"""The ``course`` command line: it only parses options and forwards to each module's ``main``."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import click

from grader.exceptions import CourseError


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(level=max(level, logging.DEBUG), format="%(levelname)s %(name)s: %(message)s")
    # nbgrader's and nbconvert's preprocessors log through "traitlets": a restored test cell
    # ("checksum has changed") is routine for us, so they speak only from -v on.
    for noisy in ("traitlets", "nbgrader", "alembic", "sqlalchemy"):
        logging.getLogger(noisy).setLevel(logging.ERROR if verbose == 0 else level)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
def cli(verbose: int) -> None:
    """Release, check and grade the PyTorch Foundations course."""
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


DB_URL_ENV = "COURSE_DB_URL"


def resolve_db_url(db_url: str | None, db_url_file: Path | None) -> str | None:
    """The gradebook's URL: ``--db-url``, else ``--db-url-file``, else ``$COURSE_DB_URL``.

    The variable is removed from this process's environment once read, so that nothing
    started later (workers, servers, kernels) inherits it; kernels get a stripped environment
    in any case (:func:`grader.engines.execution.kernel_env`).
    """
    from_env = os.environ.pop(DB_URL_ENV, None)
    if db_url_file is not None:
        lines = db_url_file.read_text(encoding="utf-8").strip().splitlines()
        db_url = db_url or (lines[0].strip() if lines else None)
    db_url = db_url or from_env or None
    return db_url


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
              help="Seconds one cell may run before it is stopped (that test scores 0).")
@click.option("--memory-mb", type=int, default=2048, show_default=True,
              help="Address-space cap of each kernel (0: none).")
@click.option("--no-sandbox", is_flag=True,
              help="Do not use bubblewrap even where it works (refused without --unsafe-no-sandbox).")
@click.option("--unsafe-no-sandbox", is_flag=True,
              help="Confirm --no-sandbox: submissions then run as this user, can read the solutions and the "
                   "gradebook, signal the grader and use the network. Only for code you trust.")
@click.option("--chapter", default=None, help="Chapter of an LMS zip (guessed from file names).")
@click.option("--force", is_flag=True, help="Re-grade submissions already graded.")
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
    downloaded from Canvas or Moodle.
    """
    from tqdm import tqdm

    from grader import export, interop, report
    from grader import grade as mod
    from grader.engines.sandbox import isolation_summary

    if no_sandbox and not unsafe_no_sandbox:
        raise click.UsageError("--no-sandbox runs every submission as this user, able to read the solutions and the "
                               "gradebook and to signal the grader: add --unsafe-no-sandbox to confirm (trusted code only)")
    _warn_if_password_in_argv(db_url)
    db_url = resolve_db_url(db_url, db_url_file)
    if no_sandbox:
        click.echo("isolation: NONE (--unsafe-no-sandbox): submissions run as this user, with its files, processes "
                   "and network; memory capped per process only", err=True)
    else:
        click.echo(f"isolation: {isolation_summary()}", err=True)
    counts: dict[str, int] = {}
    bar = tqdm(desc="grading", unit="nb", file=sys.stderr, disable=None)

    def progress(r) -> None:  # per submission: graded / error, and how many had a test time out
        counts[r.status] = counts.get(r.status, 0) + 1
        if any(t["status"] == "timed out" for t in r.tests):
            counts["timed out"] = counts.get("timed out", 0) + 1
        bar.update(1)
        bar.set_postfix_str(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))

    reports = mod.main(submissions, workdir, db_url=db_url, jobs=jobs, device=device,
                       cell_timeout=cell_timeout, memory_mb=memory_mb or None, isolate=not no_sandbox,
                       chapter=chapter, force=force, engine=engine, scheduler=scheduler, on_progress=progress,
                       on_start=lambda n: (interop.write_nbgrader_config(workdir), setattr(bar, "total", n),
                                           bar.refresh()),
                       **({"solutions_dir": solutions_dir} if solutions_dir else {}))
    bar.close()
    click.echo(_score_table(reports))
    url = db_url or mod.Workspace(workdir).default_db_url()
    csv_path = export.write_grades_csv(url, workdir / interop.GRADES_CSV)
    export.write_results_csv(workdir, url, workdir / interop.RESULTS_CSV)
    report_path = report.main(workdir, db_url=url)
    click.echo(f"\n{len(reports)} submission(s); grades in {csv_path} (per test: {interop.RESULTS_CSV}); "
               f"class report in {report_path.with_suffix('.html')}")


@cli.command("report")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"), show_default=True)
def report_cmd(workdir: Path) -> None:
    """Write the class report: pass rate per test (hardest first), score histogram, flags."""
    from grader import report

    path = report.main(workdir)
    click.echo(path.read_text(encoding="utf-8").split("## Scores by chapter")[0])
    click.echo(f"report written to {path.with_suffix('.html')} (and {path.name})")


@cli.command("export")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"), show_default=True)
@click.option("--db-url", default=None, help="SQLAlchemy URL of the gradebook [default: $COURSE_DB_URL, else sqlite in WORKDIR].")
@click.option("--db-url-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Read the gradebook's URL from this file (first line).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="[default: WORKDIR/course-grades.csv]")
@click.option("--results-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="[default: WORKDIR/results.csv]")
def export_cmd(workdir: Path, db_url: str | None, db_url_file: Path | None, out: Path | None,
               results_out: Path | None) -> None:
    """Write course-grades.csv (a row per student, a column per chapter, for an LMS) and results.csv (a row per test)."""
    from grader import export, interop
    from grader.grade import Workspace

    db_url = resolve_db_url(db_url, db_url_file)

    url = db_url or Workspace(workdir).default_db_url()
    path = export.write_grades_csv(url, out or workdir / interop.GRADES_CSV)
    click.echo(f"wrote {path}")
    click.echo(f"wrote {export.write_results_csv(workdir, url, results_out or workdir / interop.RESULTS_CSV)}")
    interop.write_nbgrader_config(workdir)


@cli.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("course-work"), show_default=True)
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Pages built at once [default: CPU count].")
@click.option("--solutions", "solutions_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Folder of the chapters' source notebooks [default: this course's solutions/].")
def feedback(workdir: Path, jobs: int | None, solutions_dir: Path | None) -> None:
    """Write per-student HTML feedback to WORKDIR/course-feedback/ (which test failed and why, manual
    grades and comments; no hidden-test source; pages that load nothing from a network)."""
    from grader import feedback as mod

    paths = mod.main(workdir, jobs=jobs, **({"solutions_dir": solutions_dir} if solutions_dir else {}))
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
    """Entry point of the ``course`` console script."""
    try:
        cli(standalone_mode=True)
    except CourseError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
