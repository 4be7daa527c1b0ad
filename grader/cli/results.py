"""``course feedback``, ``course export`` and ``course report``: what a graded workspace hands out."""

from __future__ import annotations

from pathlib import Path

import click

from grader.cli.base import GRADED_WORKDIR, cli, db_url_options, gradebook_of, workdir_option
from grader.intake.workspace import unwritable


@cli.command(short_help="Write each student's HTML feedback page to WORKDIR/course-feedback/.")
@workdir_option(GRADED_WORKDIR + " Pages go to WORKDIR/course-feedback/<student>/<chapter>/.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Pages built at once [default: CPU count].")
@click.option("--solutions", "solutions_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Folder of the chapters' source notebooks [default: the one WORKDIR was graded "
                                 "with, else this course's solutions/].")
@db_url_options
def feedback(workdir: Path, jobs: int | None, solutions_dir: Path | None, db_url: str | None,
             db_url_file: Path | None) -> None:
    """Write per-student HTML feedback to WORKDIR/course-feedback/ (which test failed and why, manual
    grades and comments; no hidden-test source; pages that load nothing from a network)."""
    from grader.pages import feedback as mod

    ws, gb = gradebook_of(workdir, db_url, db_url_file)
    remembered = ws.settings().get("solutions")
    if solutions_dir is None and remembered and Path(remembered).is_dir():
        solutions_dir = Path(remembered)
    try:
        paths = mod.main(workdir, jobs=jobs, db_url=gb.url, **({"solutions_dir": solutions_dir} if solutions_dir else {}))
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    click.echo(f"wrote {len(paths)} feedback page(s) under {mod.feedback_dir(workdir)}")


@cli.command("export", short_help="Write course-grades.csv (a row per student, for an LMS) and results.csv "
                                  "(a row per test).")
@workdir_option(GRADED_WORKDIR + " Both files are written there unless --out / --results-out say otherwise.")
@db_url_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where course-grades.csv goes [default: WORKDIR/course-grades.csv].")
@click.option("--results-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where results.csv goes [default: WORKDIR/results.csv].")
def export_cmd(workdir: Path, db_url: str | None, db_url_file: Path | None, out: Path | None,
               results_out: Path | None) -> None:
    """Write course-grades.csv (a row per student, a column per chapter, for an LMS) and results.csv (a row per
    test). A submission the grader could not grade has an empty cell and its total says "incomplete"."""
    from grader.intake import interop
    from grader.record import export

    _, gb = gradebook_of(workdir, db_url, db_url_file)
    url = gb.url
    try:
        path = export.write_grades_csv(url, out or workdir / interop.GRADES_CSV, workdir=workdir)
        click.echo(f"wrote {path}")
        click.echo(f"wrote {export.write_results_csv(workdir, url, results_out or workdir / interop.RESULTS_CSV)}")
        interop.write_nbgrader_config(workdir)
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    failed = export.not_graded(workdir)
    if failed:
        click.echo(export.not_graded_warning(failed, workdir), err=True)


@cli.command("report", short_help="Write the class report: pass rate per test (hardest first), score "
                                  "histograms, what needs review.")
@workdir_option(GRADED_WORKDIR + " The report goes to WORKDIR/report/.")
@db_url_options
def report_cmd(workdir: Path, db_url: str | None, db_url_file: Path | None) -> None:
    """Write the class report: pass rate per test (hardest first), score histogram, flags."""
    from grader.pages import report

    _, gb = gradebook_of(workdir, db_url, db_url_file)
    try:
        path = report.main(workdir, db_url=gb.url)
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    click.echo(path.read_text(encoding="utf-8").split("## Scores by chapter")[0])
    click.echo(f"report written to {path.with_suffix('.html')} (and {path.name})")
