"""A chapter's time by count: words read, code lines read, exercises solved, core path and optional apart.

The method (CONTRIBUTING.md, "Timing a chapter"): words at 200 a minute (markdown, fenced code
left out), code lines at 15 a minute (non-blank lines of code cells, with the solutions and the
hidden tests left out: the learner never reads them), and 7 minutes per exercise. A cell tagged
``optional`` counts for the optional deep dives, every other cell for the core path.

Usage: ``python ci/core_time.py [NOTEBOOK ...]`` (default: every chapter's source) prints one line
per chapter and the course's total.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS_PER_MIN, LINES_PER_MIN, MIN_PER_EXERCISE = 200, 15, 7
_FENCED = re.compile(r"```.*?```", re.S)
_HIDDEN = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS).*?### END \1", re.S)
_DELIMITERS = ("", "### BEGIN STUB", "### END STUB")  # a debugging exercise's buggy code is read, its markers not


@dataclass
class Count:
    """What one part of a chapter asks a learner to read and do."""

    words: int = 0
    lines: int = 0
    exercises: int = 0

    @property
    def minutes(self) -> float:
        return self.words / WORDS_PER_MIN + self.lines / LINES_PER_MIN + self.exercises * MIN_PER_EXERCISE


def count(cells: list[Any]) -> tuple[Count, Count]:
    """(core path, optional deep dives) of a notebook's cells (dicts or nbformat nodes)."""
    core, optional = Count(), Count()
    for cell in cells:
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        meta = cell.get("metadata", {})
        part = optional if "optional" in meta.get("tags", []) else core
        if cell.get("cell_type") == "markdown":
            part.words += len(_FENCED.sub(" ", src).split())
        elif cell.get("cell_type") == "code":
            part.exercises += bool(meta.get("nbgrader", {}).get("solution"))
            part.lines += sum(1 for line in _HIDDEN.sub("", src).splitlines() if line.strip() not in _DELIMITERS)
    return core, optional


def main(argv: list[str]) -> int:
    import nbformat

    from grader import project

    paths = [Path(a) for a in argv] or [project.source_notebook(c) for c in project.chapters()]
    total = Count()
    for path in paths:
        core, optional = count(nbformat.read(str(path), as_version=4).cells)
        total.words, total.lines, total.exercises = (total.words + core.words, total.lines + core.lines,
                                                     total.exercises + core.exercises)
        print(f"{path.parent.name:22} core: {core.words:5} words, {core.lines:4} code lines, {core.exercises}"
              f" exercises = {core.minutes:4.0f} min; optional: {optional.minutes:3.0f} min")
    print(f"{'course':22} core: {total.words:5} words, {total.lines:4} code lines, {total.exercises}"
          f" exercises = {total.minutes:4.0f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
