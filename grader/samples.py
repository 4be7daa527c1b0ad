"""Sample submissions built from the release: solved, partly solved, untouched, broken."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from nbformat import NotebookNode

from grader import cells, project
from grader.prepare.release import build_release, dumps, read
from grader.prepare.stubs import split_stub

#: Stands for "the reference solution" in an answers mapping.
SOLUTION = object()


def solution_code(source_cell: NotebookNode) -> str:
    """The source of an answer cell with its solution kept and the delimiters removed."""
    source, _ = split_stub(cells.source_text(source_cell))  # a debugging exercise's buggy code goes too
    return "\n".join(
        line for line in source.split("\n") if line.strip() not in (cells.BEGIN_SOLUTION, cells.END_SOLUTION)
    )


def answer_ids(chapter: str, solutions_dir: Path = project.SOLUTIONS, *, counted: bool = False) -> list[str]:
    """grade_ids of the chapter's answer cells, in order; with ``counted``, only those of the
    exercises that count (a practice exercise's answer, in an optional section, left out)."""
    nb = read(project.source_notebook(chapter, solutions_dir))
    return [cells.grade_id(c) for c in nb.cells
            if cells.is_solution(c) and not (counted and cells.has_tag(c, cells.OPTIONAL))]


def make_submission(
    chapter: str,
    answers: Mapping[str, object],
    *,
    solutions_dir: Path = project.SOLUTIONS,
) -> NotebookNode:
    """A learner's notebook: the release with some answer cells filled in.

    Args:
        chapter: the chapter.
        answers: answer grade_id -> the code the learner wrote, or :data:`SOLUTION`.
            Answer cells not named stay as released (unsolved).
    """
    source_path = project.source_notebook(chapter, solutions_dir)
    source = read(source_path)
    by_id = {cells.grade_id(c): c for c in source.cells if cells.is_solution(c)}
    unknown = set(answers) - set(by_id)
    if unknown:
        raise KeyError(f"{chapter} has no answer cells {sorted(unknown)}; it has {sorted(by_id)}")
    nb = build_release(chapter, source_path)
    for cell in nb.cells:
        gid = cells.grade_id(cell)
        if gid in answers and cells.is_solution(cell):
            code = answers[gid]
            text = solution_code(by_id[gid]) if code is SOLUTION else str(code)
            cell.source = cells.marker_line("answer", gid) + "\n" + text
    return nb


#: The demo's class: student -> which answers they got right ("all", "half", "none") and how.
DEMO_CLASS = {
    "alice": "all",  # a perfect submission
    "bob": "half",  # the first half of the counted exercises solved
    "carol": "none",  # the release, untouched
    "dave": "syntax",  # a syntax error in the first answer, nothing else done
}


def write_samples(dest: Path, chapters: list[str] | None = None, *, solutions_dir: Path = project.SOLUTIONS) -> list[Path]:
    """Write the demo class's submissions as ``dest/<student>/<chapter>/<notebook>.ipynb``."""
    written = []
    for chapter in project.resolve_chapters(chapters, solutions_dir):
        ids = answer_ids(chapter, solutions_dir)
        counted = answer_ids(chapter, solutions_dir, counted=True)
        name = project.source_notebook(chapter, solutions_dir).name
        plans = {
            "all": dict.fromkeys(ids, SOLUTION),
            "half": dict.fromkeys(counted[: math.ceil(len(counted) / 2)], SOLUTION),
            "none": {},
            "syntax": {ids[0]: "def oops(:\n    return 1\n"} if ids else {},
        }
        for student, plan in DEMO_CLASS.items():
            nb = make_submission(chapter, plans[plan], solutions_dir=solutions_dir)
            path = dest / student / chapter / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dumps(nb), encoding="utf-8")
            written.append(path)
    return written
