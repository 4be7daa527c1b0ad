"""``course release`` and ``course check-release``: solutions/ -> notebooks/, kept honest."""

from __future__ import annotations

import logging
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import SaveCells

from grader import cells, project
from grader.exceptions import ReleaseError, SourceError
from grader.prepare import pipeline, publish
from grader.prepare.preprocessors import AddColabBadge
from grader.prepare.stubs import ClearSolutionsOrWriteStubs, split_stub

log = logging.getLogger(__name__)


def read(path: Path) -> NotebookNode:
    """Read a notebook (nbformat 4), without touching the file."""
    return nbformat.read(str(path), as_version=4)


def dumps(nb: NotebookNode) -> str:
    """Serialise a notebook the way every committed notebook is written."""
    return nbformat.writes(nb) + "\n"


def build_release(chapter: str, source: Path, *, db_url: str | None = None,
                  publication: publish.Publication | None = None) -> NotebookNode:
    """Turn a chapter's source notebook into its student release.

    Args:
        chapter: the chapter (nbgrader assignment) name, e.g. ``01_tensors``.
        source: path of the source notebook.
        db_url: when given, the chapter's cells (hidden tests included) are also stored in
            this gradebook, as nbgrader's generate_assignment does; grading needs that.
        publication: where learners open and install it (default: pyproject's ``[tool.course]``).
    """
    pub = publication or publish.current()
    nb = read(source)
    check_regions(chapter, nb)
    check_practice(chapter, nb)
    resources = {"nbgrader": {"notebook": source.stem, "assignment": chapter, "db_url": db_url}}
    config = {
        ClearSolutionsOrWriteStubs: {"code_stub": {"python": cells.CODE_STUB}},
        AddColabBadge: {"repository": pub.repository, "ref": pub.tag, "path": f"notebooks/{chapter}/{source.name}"},
        publish.WriteColabInstall: {"repository": pub.repository, "tag": pub.tag},
        publish.RecordGradedCells: {"chapter": chapter},
    }
    skip = () if db_url else (SaveCells,)
    nb, _ = pipeline.run(pipeline.RELEASE, nb, resources, skip=skip, config=config)
    return nb


#: The regions nbgrader's release steps cut out: each BEGIN line needs its END line in the same cell.
REGIONS = ((cells.BEGIN_SOLUTION, cells.END_SOLUTION), (cells.BEGIN_HIDDEN, cells.END_HIDDEN),
           (cells.BEGIN_STUB, cells.END_STUB))


def check_regions(chapter: str, nb: NotebookNode) -> None:
    """Refuse a source whose solution, hidden-test or stub regions are not closed, or whose stub
    is not in an answer cell after its solution, naming the cell.

    nbgrader's ClearSolutions and ClearHiddenTests raise a bare ``RuntimeError`` deep in the
    pipeline for these (and log the cell's source, solution included); this names the chapter
    and the cell instead, before any of them runs.

    Raises:
        SourceError: where (chapter, cell's grade_id or index) and which line is missing.
    """
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code" and not cells.is_solution(cell):
            continue
        lines = cells.source_text(cell).splitlines()
        where = f"chapter {chapter}, cell {cells.grade_id(cell) or f'#{index}'} (index {index})"
        for begin, end in REGIONS:
            open_at = None
            for number, line in enumerate(lines, 1):
                if begin in line:  # as nbgrader finds them: anywhere in a line
                    if open_at is not None:
                        raise SourceError(f"'{begin}' on line {number} inside the region opened on line {open_at}",
                                          where=where, hint=f"close the first region with '{end}'")
                    open_at = number
                elif end in line:
                    if open_at is None:
                        raise SourceError(f"'{end}' on line {number} without a '{begin}' before it",
                                          where=where, hint=f"add '{begin}' where the region starts")
                    open_at = None
            if open_at is not None:
                raise SourceError(f"'{begin}' on line {open_at} has no '{end}'", where=where,
                                  hint=f"add '{end}' on its own line where the region ends")
        stub = next((n for n, line in enumerate(lines, 1) if cells.BEGIN_STUB in line), None)
        solution_end = next((n for n, line in enumerate(lines, 1) if cells.END_SOLUTION in line), None)
        if stub is not None and (not cells.is_solution(cell) or solution_end is None or solution_end > stub):
            raise SourceError(f"'{cells.BEGIN_STUB}' on line {stub} is not after the solution region of an answer cell",
                              where=where, hint="a stub replaces its answer cell's solution region: put it after"
                              f" '{cells.END_SOLUTION}'")


def check_practice(chapter: str, nb: NotebookNode) -> None:
    """Refuse a source whose practice exercises contradict their points, naming the cell.

    A practice exercise sits in an optional section: its answer and test cells carry the
    ``optional`` tag, and its tests are worth 0 points (graded for feedback, never counted). A
    core exercise's test is worth more than 0. Practice exercises come after every core one, so
    that a chapter's counted exercises are numbered 1..k.

    Raises:
        SourceError: the cell (chapter, grade_id, index) and what contradicts what.
    """
    practice_from = None
    for index, cell in enumerate(nb.cells):
        if not (cells.is_solution(cell) or cells.is_test(cell)):
            continue
        where = f"chapter {chapter}, cell {cells.grade_id(cell) or f'#{index}'} (index {index})"
        optional = cells.has_tag(cell, cells.OPTIONAL)
        if cells.is_test(cell) and optional and cells.points(cell):
            raise SourceError(f"a practice test (tagged '{cells.OPTIONAL}') is worth {cells.points(cell):g} points",
                              where=where, hint="a practice exercise counts for no points: set its points to 0,"
                              f" or make it a core exercise by removing the '{cells.OPTIONAL}' tag")
        if cells.is_test(cell) and not optional and not cells.points(cell):
            raise SourceError("a core test is worth 0 points", where=where,
                              hint=f"give it points, or tag the exercise's cells '{cells.OPTIONAL}' to make it practice")
        if optional and practice_from is None:
            practice_from = index
        elif not optional and practice_from is not None:
            raise SourceError(f"a core exercise's cell comes after the practice exercise at index {practice_from}",
                              where=where, hint="put practice exercises after every core exercise")


def release_path(chapter: str, source: Path, notebooks_dir: Path) -> Path:
    return notebooks_dir / chapter / source.name


def main(
    chapters: list[str] | None = None,
    *,
    solutions_dir: Path = project.SOLUTIONS,
    notebooks_dir: Path = project.NOTEBOOKS,
) -> list[Path]:
    """Release the given chapters (all when empty); returns the paths written."""
    written = []
    for chapter in project.resolve_chapters(chapters, solutions_dir):
        source = project.source_notebook(chapter, solutions_dir)
        dest = release_path(chapter, source, notebooks_dir)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(dumps(build_release(chapter, source)), encoding="utf-8")
        log.info("released %s -> %s", source, dest)
        written.append(dest)
    return written


def _secret_lines(source_nb: NotebookNode) -> set[str]:
    """Lines that occur only inside solution or hidden-test regions of the source."""
    secret, public = set(), set()
    for cell in source_nb.cells:
        _, stub = split_stub(cells.source_text(cell)) if cells.is_solution(cell) else (None, None)
        public.update(line.strip() for line in stub or ())  # a debugging exercise releases its stub
        region = None
        for raw in cells.source_text(cell).splitlines():
            line = raw.strip()
            if line in (cells.BEGIN_SOLUTION, cells.BEGIN_HIDDEN, cells.BEGIN_STUB):
                region = line
                continue
            if line in (cells.END_SOLUTION, cells.END_HIDDEN, cells.END_STUB):
                region = None
                continue
            (secret if region else public).add(line)
    meaningful = {line for line in secret - public if len(line) > 3 and not line.startswith("#")}
    return meaningful


def check(
    *, solutions_dir: Path = project.SOLUTIONS, notebooks_dir: Path = project.NOTEBOOKS
) -> list[str]:
    """Problems with the committed release: missing, stale or leaking notebooks."""
    problems = []
    expected_files = set()
    for chapter in project.chapters(solutions_dir):
        source = project.source_notebook(chapter, solutions_dir)
        dest = release_path(chapter, source, notebooks_dir)
        expected_files.add(dest.resolve())
        if not dest.exists():
            problems.append(f"{dest}: missing; run `course release {chapter}`")
            continue
        text = dest.read_text(encoding="utf-8")
        if text != dumps(build_release(chapter, source)):
            problems.append(f"{dest}: stale against {source}; run `course release {chapter}`")
        released = nbformat.reads(text, as_version=4)
        released_lines = {
            raw.strip() for cell in released.cells for raw in cells.source_text(cell).splitlines()
        }
        for delimiter in (cells.BEGIN_SOLUTION, cells.BEGIN_HIDDEN, cells.END_SOLUTION, cells.END_HIDDEN,
                          cells.BEGIN_STUB, cells.END_STUB):
            if delimiter in released_lines:
                problems.append(f"{dest}: contains '{delimiter}'")
        leaked = sorted(_secret_lines(read(source)) & released_lines)
        for line in leaked[:5]:
            problems.append(f"{dest}: leaks a line of a solution or hidden test: {line!r}")
    if notebooks_dir.is_dir():
        for extra in sorted(notebooks_dir.glob("*/*.ipynb")):
            if extra.resolve() in expected_files:
                continue
            if project.is_stray(extra.name):  # a copy Jupyter made while someone worked in the release
                log.warning("%s: ignored (an editor's copy, not part of the release); delete it", extra)
            else:
                problems.append(f"{extra}: has no source in {solutions_dir}; delete it or add the source")
    return problems


def ensure_clean(**kwargs) -> None:
    """Raise :class:`ReleaseError` listing every problem :func:`check` finds."""
    problems = check(**kwargs)
    if problems:
        raise ReleaseError(
            "the release is not in sync with solutions/:\n  " + "\n  ".join(problems),
            hint="run `make release` and commit notebooks/",
        )
