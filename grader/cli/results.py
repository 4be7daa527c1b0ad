"""``course feedback``, ``course export`` and ``course report``: what a graded workspace hands out."""

from __future__ import annotations

from pathlib import Path

import click

from grader.cli.base import (
    GRADED_WORKDIR,
    cli,
    db_url_options,
    gradebook_of,
    say_workspace,
    workdir_option,
)
from grader.exceptions import OptionError
from grader.intake.workspace import unwritable


@cli.command(short_help="Write each student's HTML feedback page to WORKDIR/course-feedback/.")
@workdir_option(GRADED_WORKDIR + " Pages go to WORKDIR/course-feedback/<student>/<chapter>/.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Pages built at once [default: CPU count].")
@click.option("--solutions", "solutions_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Folder of the chapters' source notebooks [default: the one WORKDIR was graded "
                                 "with, else this course's solutions/].")
@db_url_options
@click.pass_context
def feedback(ctx: click.Context, workdir: Path, jobs: int | None, solutions_dir: Path | None, db_url: str | None,
             db_url_file: Path | None) -> None:
    """Write per-student HTML feedback to WORKDIR/course-feedback/ (which test failed and why, manual
    grades and comments; no hidden-test source; pages that load nothing from a network)."""
    from grader.pages import feedback as mod

    say_workspace(ctx, workdir)
    ws, gb = gradebook_of(workdir, db_url, db_url_file)
    remembered = ws.settings().get("solutions")
    if solutions_dir is None and remembered and Path(remembered).is_dir():
        solutions_dir = Path(remembered)
    try:
        paths = mod.main(workdir, jobs=jobs, db_url=gb.url, **({"solutions_dir": solutions_dir} if solutions_dir else {}))
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    click.echo(f"wrote {len(paths)} feedback page(s) under {mod.feedback_dir(workdir)}")


@cli.command("export", short_help="Write course-grades.csv (a row per student, every status) and results.csv "
                                  "(a row per test); fill a Canvas gradebook or a Moodle worksheet.")
@workdir_option(GRADED_WORKDIR + " Both files are written there unless --out / --results-out say otherwise.")
@db_url_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where course-grades.csv goes [default: WORKDIR/course-grades.csv].")
@click.option("--results-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where results.csv goes [default: WORKDIR/results.csv].")
@click.option("--canvas", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Canvas's gradebook export (Gradebook > Export): a copy is written with the chapter's grades "
                   "in its column, to import back into Canvas.")
@click.option("--moodle", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Moodle's grading worksheet (Download grading worksheet): a copy is written with the grades "
                   "in its Grade column, to upload back into Moodle.")
@click.option("--chapter", default=None, help="The chapter whose grades go into the LMS's file [default: the one "
                                               "chapter graded for that LMS's students].")
@click.option("--column", default=None, help='The column to fill: Canvas\'s assignment as it titles it ("Tensors '
                                              '(1234)", its title or its id); Moodle\'s grade column by its header.')
@click.option("--lms-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where the filled copy goes [default: WORKDIR/<canvas|moodle>-<chapter>.csv].")
@click.pass_context
def export_cmd(ctx: click.Context, workdir: Path, db_url: str | None, db_url_file: Path | None, out: Path | None,
               results_out: Path | None, canvas: Path | None, moodle: Path | None, chapter: str | None,
               column: str | None, lms_out: Path | None) -> None:
    """Write course-grades.csv (a row per student, a column per chapter, the status of every chapter not graded)
    and results.csv (a row per test). A submission the grader could not grade has an empty cell and its total
    says "incomplete". With --canvas or --moodle, fill the LMS's own file with the chapter's grades."""
    from grader.intake import interop
    from grader.record import export

    say_workspace(ctx, workdir)
    if canvas and moodle:
        raise OptionError("--canvas and --moodle fill one LMS's file each", hint="give one of them per command")
    _, gb = gradebook_of(workdir, db_url, db_url_file)
    url = gb.url
    try:
        path = export.write_grades_csv(url, out or workdir / interop.GRADES_CSV, workdir=workdir)
        click.echo(f"wrote {path}")
        click.echo(f"wrote {export.write_results_csv(workdir, url, results_out or workdir / interop.RESULTS_CSV)}")
        interop.write_nbgrader_config(workdir)
        if canvas or moodle:
            _fill_lms(workdir, url, canvas, moodle, chapter, column, lms_out)
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    failed = export.not_graded(workdir)
    if failed:
        click.echo(export.not_graded_warning(failed, workdir), err=True)


def _fill_lms(workdir: Path, url: str, canvas: Path | None, moodle: Path | None, chapter: str | None,
              column: str | None, lms_out: Path | None) -> None:
    """Fill Canvas's gradebook or Moodle's worksheet (:mod:`grader.record.lms_export`) and say who was left out."""
    from grader.record import lms_export, scores

    lms, src = ("canvas", canvas) if canvas else ("moodle", moodle)
    graded = sorted({p.stem for p in workdir.glob(f"results/{lms}-*/*.json")})
    if chapter is None:
        if len(graded) != 1:
            raise OptionError(f"--{lms}: {len(graded)} chapters were graded for {lms.title()} students "
                              f"({', '.join(graded) or 'none'})", hint="say which with --chapter")
        chapter = graded[0]
    grades = lms_export.chapter_grades(workdir, chapter, scores.totals(url, chapter))
    dest = lms_out or workdir / f"{lms}-{chapter}.csv"
    if canvas:
        done = lms_export.fill_canvas(canvas, dest, grades, chapter=chapter, column=column)
    else:
        done = lms_export.fill_moodle(src, dest, grades, column=column)
    click.echo(f"wrote {done.path}: {done.filled} grade(s) of {chapter} in the column {done.column!r}"
               + (f" ({done.scale})" if done.scale else ""))
    for what, who in (("graded here, no row in the file (not filled)", done.not_in_file),
                      ("in the file, no grade here (cell left as it was)", done.not_graded),
                      (f"in the file, no submission of {chapter} here (cell left as it was)", done.not_here)):
        if who:
            click.echo(f"warning: {len(who)} {what}: {'; '.join(who)}", err=True)


@cli.command("report", short_help="Write the class report: pass rate per test (hardest first), score "
                                  "histograms, what needs review.")
@workdir_option(GRADED_WORKDIR + " The report goes to WORKDIR/report/.")
@db_url_options
@click.pass_context
def report_cmd(ctx: click.Context, workdir: Path, db_url: str | None, db_url_file: Path | None) -> None:
    """Write the class report: pass rate per test (hardest first), score histogram, flags."""
    from grader.pages import report

    say_workspace(ctx, workdir)
    _, gb = gradebook_of(workdir, db_url, db_url_file)
    try:
        path = report.main(workdir, db_url=gb.url)
    except OSError as exc:
        raise unwritable(workdir, exc) from exc
    click.echo(path.read_text(encoding="utf-8").split("## Scores by chapter")[0])
    click.echo(f"report written to {path.with_suffix('.html')} (and {path.name})")
