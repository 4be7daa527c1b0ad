"""The ``course`` command line: it only parses options and forwards to each module's ``main``.

The group and what its commands share live in :mod:`grader.cli.base`; ``course grade`` in
:mod:`grader.cli.grading`; ``feedback``, ``export`` and ``report`` in :mod:`grader.cli.results`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.cli import grading as cli_grade  # noqa: F401 -- their commands join the group
from grader.cli import results as cli_results  # noqa: F401 -- their commands join the group
from grader.cli.base import cli, resolve_db_url
from grader.cli.grading import PLAIN_PROGRESS_S, _score_table, _start_servers
from grader.intake.workspace import DB_URL_ENV

__all__ = ["DB_URL_ENV", "PLAIN_PROGRESS_S", "_score_table", "_start_servers", "cli", "main", "resolve_db_url"]


@cli.command(short_help="Write the student release notebooks/ from solutions/ (all chapters by default).")
@click.argument("chapters", nargs=-1)
def release(chapters: tuple[str, ...]) -> None:
    """Write the student release notebooks/ from solutions/ (all chapters by default)."""
    from grader.prepare import release as mod

    for path in mod.main(list(chapters)):
        click.echo(f"released {path}")


@cli.command("check-release", short_help="Fail when notebooks/ is stale against solutions/, leaks a solution "
                                         "or hidden test, or is published where learners cannot open it.")
def check_release() -> None:
    """Fail when notebooks/ is stale against solutions/, leaks a solution or hidden test, or is
    published where learners cannot open it: pyproject's [tool.course] a placeholder, or its tag
    not in this git repository (whose tags stand for the published repository's)."""
    from grader import project
    from grader.prepare import publish
    from grader.prepare import release as mod

    pub = publish.current()
    released = [p.relative_to(project.ROOT).as_posix() for p in sorted(project.NOTEBOOKS.glob("*/*.ipynb"))
                if not project.is_stray(p.name)]
    problems = mod.check() + publish.problems(pub, released)
    for line in problems:
        click.echo(f"FAIL {line}", err=True)
    if problems:
        raise SystemExit(1)
    click.echo(f"release OK: in sync with solutions/, no solution or hidden test leaked, published at"
               f" {pub.repository} tag {pub.tag}")


@cli.command("clean-notebooks", short_help="Strip outputs, execution counts and stray metadata from committed "
                                           "notebooks.")
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


@cli.command(short_help="Write the demo class's sample submissions (perfect, partial, untouched, syntax error) "
                        "to DEST.")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.argument("chapters", nargs=-1)
def samples(dest: Path, chapters: tuple[str, ...]) -> None:
    """Write the demo class's sample submissions (perfect, partial, untouched, syntax error) to DEST."""
    from grader import samples as mod

    paths = mod.write_samples(dest, list(chapters))
    click.echo(f"wrote {len(paths)} sample submission(s) under {dest}")


def main() -> None:
    """Entry point of the ``course`` console script (errors: see :class:`grader.cli.base.Course`)."""
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


if __name__ == "__main__":  # python -m grader.cli.app: the commands are registered on grader.cli.base's group
    main()
