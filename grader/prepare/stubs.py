"""An answer cell's own stub: the code a debugging exercise releases in place of its solution."""

from __future__ import annotations

import re

from nbformat import NotebookNode
from nbgrader.preprocessors import ClearSolutions

from grader import cells

_COMMENT = re.compile(r"^(?P<indent>\s*)#(?: (?P<code>.*))?$")


def split_stub(source: str) -> tuple[str, list[str] | None]:
    """``(source without its stub region, the stub's lines uncommented)``; ``None`` without a region.

    In the source, the stub sits after the solution, between ``### BEGIN STUB`` and ``### END STUB``,
    each line commented out at the region's indentation (``    # rows = []``), so that the
    solution runs as it is. A line of the region that is not a comment is kept as written.
    """
    kept: list[str] = []
    stub: list[str] | None = None
    inside = False
    for line in source.split("\n"):
        if cells.BEGIN_STUB in line:
            inside, stub = True, [] if stub is None else stub
        elif cells.END_STUB in line:
            inside = False
        elif inside:
            m = _COMMENT.match(line)
            stub.append(m["indent"] + (m["code"] or "") if m else line)  # type: ignore[union-attr]
        else:
            kept.append(line)
    if stub is not None:
        stub = [line.rstrip() for line in stub]
    return "\n".join(kept), stub


class ClearSolutionsOrWriteStubs(ClearSolutions):
    """nbgrader's ClearSolutions, except that an answer cell with a stub region of its own (a
    debugging exercise: the buggy code the learner fixes) gets that stub in place of its solution
    region, instead of the ``raise NotImplementedError`` line every other answer gets."""

    def _replace_solution_region(self, cell: NotebookNode, language: str) -> bool:
        source, stub = split_stub(cell.source) if cells.is_solution(cell) else (cell.source, None)
        if stub is None:
            return super()._replace_solution_region(cell, language)
        out, inside, replaced = [], False, False
        for line in source.split("\n"):
            if self.begin_solution_delimeter in line:
                inside, replaced = True, True
                out.extend(stub)
            elif self.end_solution_delimeter in line:
                inside = False
            elif not inside:
                out.append(line)
        cell.source = "\n".join(out)
        return replaced
