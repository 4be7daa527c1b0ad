"""A chapter's time by count: words read, code lines read, exercises solved, core path and optional apart.

The method (CONTRIBUTING.md, "Timing a chapter"): words at 200 a minute (markdown, fenced code
left out), code lines at 15 a minute (non-blank lines of code cells, with the solutions and the
hidden tests left out: the learner never reads them), and 7 minutes per exercise. A cell tagged
``optional`` counts for the optional deep dives, every other cell for the core path.

Usage: ``python ci/core_time.py [NOTEBOOK ...]`` (default: every chapter's source) prints one line
per chapter and the course's total. ``--check`` also exits 1 when a time a chapter's header or the
README states is not its count rounded to 5 minutes; ``--write`` rewrites those stated times from the
count (the solution's header; ``course release`` carries it into the student's notebook).
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


def rounded(minutes: float) -> int:
    """A count as a chapter states it: to the nearest 5 minutes, at least 5."""
    return max(5, 5 * round(minutes / 5))


#: the header's time line: "**Time**: about 75 minutes on the core path, plus about 10 min for ..."
_TIME_LINE = re.compile(r"^\*\*Time\*\*: about (\d+) minutes on the core path, plus about (\d+) min for the "
                        r"optional deep dives\.", re.M)
#: a row of the README's chapter table, ending with the chapter's core minutes
_README_ROW = re.compile(r"^(\| (\d\d) \|.*\| )(\d+) min \|$", re.M)
#: the README's sentence on the whole core path
_README_TOTAL = re.compile(r"The core path of the whole course takes about [\d.]+ h\s\((\d+)\s+minutes")
#: the README's sentence on the optional sections
_README_OPTIONAL = re.compile(r"add about (?:half an hour|\d+ minutes)(\s+)by count")


def time_line(core: Count, optional: Count) -> str:
    return (f"**Time**: about {rounded(core.minutes)} minutes on the core path, plus about "
            f"{rounded(optional.minutes)} min for the optional deep dives.")


def stated_times(paths: list[Path], write: bool) -> list[str]:
    """Where a stated time is not the count (rewritten when ``write``): one line each."""
    import nbformat

    wrong, total, deep = [], 0, 0
    counts = {}
    for path in paths:
        nb = nbformat.read(str(path), as_version=4)
        core, optional = count(nb.cells)
        counts[path.parent.name[:2]] = rounded(core.minutes)
        total += rounded(core.minutes)
        deep += rounded(optional.minutes)
        header, line = nb.cells[0], time_line(core, optional)
        found = _TIME_LINE.search(header.source)
        if found is None:
            wrong.append(f"{path}: the first cell has no '**Time**: about N minutes on the core path' line")
        elif found.group(0) != line:
            wrong.append(f"{path}: states {found.group(1)} + {found.group(2)} min, the count says {line}")
            if write:
                header.source = header.source.replace(found.group(0), line)
                nbformat.write(nb, str(path))
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    new = _README_ROW.sub(lambda m: f"{m.group(1)}{counts.get(m.group(2), m.group(3))} min |", text)
    hours = f"{round(total / 30) / 2:.1f}".removesuffix(".0")  # to the half hour
    new = _README_TOTAL.sub(f"The core path of the whole course takes about {hours} h ({total} minutes", new)
    new = _README_OPTIONAL.sub(lambda m: f"add about {deep} minutes{m.group(1)}by count", new)
    if new != text:
        wrong.append(f"{readme}: the chapter table or the course's total is not the count ({total} min)")
        if write:
            readme.write_text(new, encoding="utf-8")
    return wrong


def main(argv: list[str]) -> int:
    import nbformat

    from grader import project

    flags = {a for a in argv if a.startswith("--")}
    if flags - {"--check", "--write"}:
        print(f"usage: python ci/core_time.py [--check | --write] [NOTEBOOK ...] (unknown: {sorted(flags)})",
              file=sys.stderr)
        return 2
    paths = [Path(a) for a in argv if a not in flags] or [project.source_notebook(c) for c in project.chapters()]
    total = Count()
    for path in paths:
        core, optional = count(nbformat.read(str(path), as_version=4).cells)
        total.words, total.lines, total.exercises = (total.words + core.words, total.lines + core.lines,
                                                     total.exercises + core.exercises)
        print(f"{path.parent.name:22} core: {core.words:5} words, {core.lines:4} code lines, {core.exercises}"
              f" exercises = {core.minutes:4.0f} min; optional: {optional.minutes:3.0f} min")
    print(f"{'course':22} core: {total.words:5} words, {total.lines:4} code lines, {total.exercises}"
          f" exercises = {total.minutes:4.0f} min")
    if not flags:
        return 0
    wrong = stated_times(paths, write="--write" in flags)
    for line in wrong:
        print(("rewrote: " if "--write" in flags else "stated time off: ") + line)
    return 1 if wrong and "--check" in flags else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
