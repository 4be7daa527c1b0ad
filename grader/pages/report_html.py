"""The class report as one HTML page: offline, no script, every piece of text through ``html_text``.

The figures are inlined as SVG ``data:`` URIs in ``<img>`` elements (inert) at their own size,
so that their text is as large on screen as it was drawn. The style is the feedback pages'
stylesheet plus ``templates/report.css``, both inlined.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING

from grader.escaping import html_text as esc
from grader.pages import markup as pages
from grader.pages import report_plot
from grader.pages.report_tables import (
    CHAPTER_HEAD,
    HARDEST_HEAD,
    NO_REVIEW,
    NOT_GRADED_HEAD,
    PASS_MARK,
    UPLOADS_HEAD,
    chapter_facts,
    chapter_row,
    hardest_rows,
    points,
    short,
)

if TYPE_CHECKING:
    from grader.pages.report_tables import Class

REPORT_CSS = Path(__file__).with_name("templates") / "report.css"


def _table(head: list[str], rows: list[list[str]], *, cls: str = "", num: frozenset[int] = frozenset()) -> str:
    """A table of text; columns in ``num`` are numbers (right-aligned)."""
    def td(i: int, v: str) -> str:
        return f'<td class="num">{esc(v)}</td>' if i in num else f"<td>{esc(v)}</td>"

    return (f'<table class="{cls}"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(td(i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
            + "</tbody></table>")


def _chapter_th(chapter: str) -> str:
    """A chapter's column head: ``04`` over ``reshape indexing`` (its whole name as the tooltip)."""
    number = short(chapter)
    rest = chapter[len(number):].lstrip("_").replace("_", " ") if number != chapter else ""
    label = f"{esc(number)}<br><small>{esc(rest)}</small>" if rest else esc(chapter)
    return f'<th class="num" title="{esc(chapter)}">{label}</th>'


def students(data: Class) -> str:
    chapters = [c.chapter for c in data.chapters]
    total = len(chapters) > 1
    head = ("<tr><th>student</th><th>id</th>" + "".join(map(_chapter_th, chapters))
            + (f'<th class="num">total<br><small>of {esc(points(data.max_total))}</small></th>' if total else "")
            + "<th>late</th></tr>")
    maxima = {c.chapter: c.max_score for c in data.chapters}
    body = []
    for s in data.students:
        cells = []
        for ch in chapters:
            c = s.cells.get(ch)
            if c is None:
                cells.append('<td class="num none" title="not submitted">—</td>')
            elif not c.graded:
                cells.append(f'<td class="num ng" title="{esc(c.message or c.status)}">{esc(c.status)}</td>')
            else:
                share = c.score / maxima[ch] if maxima[ch] else 0
                band = "full" if share >= 1 else "low" if share < PASS_MARK else ""
                late = ' <small class="late">late</small>' if c.late else ""
                cells.append(f'<td class="num {band}">{esc(points(c.score))}{late}</td>')
        if total:
            mark = '<br><small class="ng">incomplete</small>' if s.incomplete else ""
            cells.append(f'<td class="num total">{esc(points(s.total))}{mark}</td>')
        late = ", ".join(short(ch) for ch in s.late)
        body.append(f"<tr><th scope=\"row\">{esc(s.name)}</th><td class=\"id\">{esc(s.student)}</td>"
                    + "".join(cells) + f'<td class="late" title="{esc(", ".join(s.late))}">{esc(late)}</td></tr>')
    return (f'<div class="wide"><table class="students"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table></div>'
            f'<p class="legend">{esc(data.legend())}</p>')


def _figure(chapter: str, svg: str, size: tuple[int, int]) -> str:
    data = base64.b64encode(svg.encode()).decode()
    return (f'<figure><img src="data:image/svg+xml;base64,{data}" width="{size[0]}" height="{size[1]}" '
            f'alt="{esc(chapter)}: score histogram and pass rate per test"></figure>')


def chapters(data: Class) -> str:
    out = []
    for c in data.chapters:
        hardest = (_table(HARDEST_HEAD, hardest_rows(c), cls="hardest", num=frozenset({1, 2})) if c.hardest
                   else f"<p>{esc(c.no_hardest())}</p>")
        out.append(f'<section class="chapter" id="chapter-{esc(c.chapter)}"><div class="facts">'
                   f"<h3>{esc(c.chapter)}</h3><p>{esc(chapter_facts(c))}</p>{hardest}</div>"
                   + _figure(c.chapter, data.figures[c.chapter], report_plot.size(c)) + "</section>")
    return "".join(out)


def review(data: Class) -> str:
    if not data.review:
        return f"<p>{esc(NO_REVIEW)}</p>"
    rows = "".join(f"<tr><td>{esc(r.student)}</td><td>{esc(r.chapter)}</td><td><ul>"
                   + "".join(f"<li>{esc(f)}</li>" for f in r.findings) + "</ul></td></tr>" for r in data.review)
    return ('<table class="to-review"><thead><tr><th>student</th><th>chapter</th><th>findings</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def page(data: Class) -> str:
    sections = [("students", "Students", students(data)),
                ("chapters", "Chapters", _table(CHAPTER_HEAD, [chapter_row(c) for c in data.chapters],
                                                cls="chapters", num=frozenset(range(1, 8)))),
                ("hardest-first", "Hardest first", chapters(data))]
    if data.not_graded:
        sections.append(("not-graded", f"Not graded ({len(data.not_graded)})",
                         _table(NOT_GRADED_HEAD, [list(r) for r in data.not_graded], cls="not-graded")))
    if data.uploads:
        sections.append(("uploads", f"Uploads ({len(data.uploads)})",
                         _table(UPLOADS_HEAD, [list(r) for r in data.uploads], cls="uploads")))
    sections.append(("needs-review", f"Needs review ({len(data.review)})", review(data)))
    nav = " · ".join(f'<a href="#{key}">{esc(title)}</a>' for key, title, _ in sections)
    body = [f"<h1>Class report</h1><p class=\"summary\">{esc(data.summary())}</p><nav>{nav}</nav>"]
    body += [f'<h2 id="{key}">{esc(title)}</h2>{html}' for key, title, html in sections]
    style = pages.STYLESHEET.read_text(encoding="utf-8") + REPORT_CSS.read_text(encoding="utf-8")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{pages.CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Class report</title>"
        f"<style>{style}</style></head><body class=\"report\">\n" + "\n".join(body) + "\n</body></html>\n"
    )
