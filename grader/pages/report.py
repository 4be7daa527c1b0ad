"""``course report``: the class at a glance — a row per student, each chapter's numbers and hardest
tests, what was not graded and what needs review.

Writes ``report/report.md`` (with ``report/<chapter>.svg``) and ``report/report.html``, one file
that a browser opens offline: the same tables, the figures inlined as SVG ``data:`` URIs (shown as
images at their own size: inert), no script. Every cell and name is escaped for its medium
(:mod:`grader.escaping`). The numbers come from :mod:`grader.pages.report_tables`, the figures from
:mod:`grader.pages.report_plot`, the page from :mod:`grader.pages.report_html`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

from grader.escaping import md_cell
from grader.intake import interop
from grader.intake.workspace import Workspace
from grader.pages import report_html
from grader.pages.report_plot import chapter_plot
from grader.pages.report_tables import (
    CHAPTER_HEAD,
    HARDEST_HEAD,
    NO_REVIEW,
    NOT_GRADED_HEAD,
    REVIEW_HEAD,
    UPLOADS_HEAD,
    Class,
    chapter_facts,
    chapter_row,
    chapter_stats,
    hardest_rows,
    not_graded,
    points,
    review_rows,
    short,
    student_rows,
    upload_rows,
)
from grader.record import review


def load_results(workdir: Path) -> list[dict]:
    """Every recorded result of the workspace."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Workspace(workdir).results.glob("*/*.json"))]


def figure_name(chapter: str) -> str:
    """The file name of a chapter's figure (a chapter's name is a file name only where it is a plain one)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", chapter) + ".svg"


def build(results: list[dict], marks: review.Review) -> Class:
    chapters = chapter_stats(results)
    return Class(results, student_rows(results), chapters, not_graded(results), review_rows(results, marks),
                 {c.chapter: chapter_plot(c) for c in chapters}, upload_rows(results))


def main(workdir: Path, *, db_url: str | None = None) -> Path:
    """Write ``report/report.md``, ``report/<chapter>.svg`` and ``report/report.html``; returns the Markdown's path."""
    interop.write_nbgrader_config(workdir)
    marks = review.read(db_url or Workspace(workdir).default_db_url())
    results = [review.merge(r, *marks.of(r["student"], r["chapter"])) for r in load_results(workdir)]
    data = build(results, marks)
    out = workdir / "report"
    out.mkdir(parents=True, exist_ok=True)
    for chapter, svg in data.figures.items():
        (out / figure_name(chapter)).write_text(svg, encoding="utf-8")
    path = out / "report.md"
    path.write_text(markdown(data), encoding="utf-8")
    (out / "report.html").write_text(report_html.page(data), encoding="utf-8")
    return path


def student_table(data: Class) -> tuple[list[str], list[list[str]]]:
    """The per-student table as text: header, rows (a chapter's cell: its score, its status, or —)."""
    chapters = [c.chapter for c in data.chapters]
    head = ["student", "id", *chapters] + ([f"total (of {points(data.max_total)})"] if len(chapters) > 1 else [])
    rows = []
    for s in data.students:
        cells = [s.cells[ch].text if ch in s.cells else "—" for ch in chapters]
        total = [points(s.total) + (" (incomplete)" if s.incomplete else "")] if len(chapters) > 1 else []
        rows.append([s.name, s.student, *cells, *total, ", ".join(map(short, s.late))])
    return head + ["late"], rows


def _md_table(head: list[str], rows: list[list[str]], num: range | set[int] = frozenset()) -> list[str]:
    """A Markdown table; the columns in ``num`` are numbers (right-aligned)."""
    rule = "".join("---:|" if i in num else "---|" for i in range(len(head)))
    lines = ["| " + " | ".join(map(md_cell, head)) + " |", "|" + rule]
    return lines + ["| " + " | ".join(map(md_cell, row)) + " |" for row in rows] + [""]


def markdown(data: Class) -> str:
    head, rows = student_table(data)
    lines = ["# Class report", "", md_cell(data.summary()), "", "## Students", ""]
    lines += _md_table(head, rows, range(2, len(head) - 1)) + [md_cell(data.legend()), ""]
    lines += ["## Chapters", ""] + _md_table(CHAPTER_HEAD, [chapter_row(c) for c in data.chapters], range(1, 8))
    lines += ["## Hardest first", "", "Per chapter, the tests the fewest graded submissions passed, and its figure.", ""]
    for c in data.chapters:
        lines += [f"### {md_cell(c.chapter)}", "", md_cell(chapter_facts(c)), ""]
        lines += _md_table(HARDEST_HEAD, hardest_rows(c), {1, 2}) if c.hardest else [md_cell(c.no_hardest()), ""]
        lines += [f"![{md_cell(c.chapter)}: scores and pass rate per test]({quote(figure_name(c.chapter))})", ""]
    if data.not_graded:
        lines += ["## Not graded", ""] + _md_table(NOT_GRADED_HEAD, [list(r) for r in data.not_graded])
    if data.uploads:
        lines += ["## Uploads", ""] + _md_table(UPLOADS_HEAD, [list(r) for r in data.uploads])
    lines += ["## Needs review", ""]
    if data.review:
        lines += _md_table(REVIEW_HEAD, [[r.student, r.chapter, "; ".join(r.findings)] for r in data.review])
    else:
        lines += [NO_REVIEW, ""]
    return "\n".join(lines)
