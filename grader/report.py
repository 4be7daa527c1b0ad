"""``course report``: the class at a glance — hardest tests first, each chapter's scores, what needs review.

Writes ``report/report.md`` (with ``report/<chapter>.svg``) and ``report/report.html``, one file
that a browser opens offline: the same tables, the plots inlined as SVG ``data:`` URIs (shown as
images: inert), no script. Every cell and name is escaped for its medium (:mod:`grader.escaping`).
"""

from __future__ import annotations

import base64
import itertools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from grader import interop, pages, review
from grader.escaping import html_text, md_cell
from grader.workspace import Workspace

BINS = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100.0001]


@dataclass
class ExerciseStats:
    """How a class did on one test."""

    chapter: str
    grade_id: str
    attempts: int
    passed: int
    statuses: dict[str, int]

    @property
    def pass_rate(self) -> float:
        return self.passed / self.attempts if self.attempts else 0.0


def load_results(workdir: Path) -> list[dict]:
    """Every recorded result of the workspace."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Workspace(workdir).results.glob("*/*.json"))]


def exercise_stats(results: list[dict]) -> list[ExerciseStats]:
    """Per-test pass rates, the least passed first (ties by chapter and name)."""
    by_test: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in results:
        for t in r.get("tests", []):
            by_test[(r["chapter"], t["grade_id"])].append(t["status"])
    stats = [
        ExerciseStats(ch, gid, len(st), st.count("passed"), dict(Counter(st)))
        for (ch, gid), st in by_test.items()
    ]
    return sorted(stats, key=lambda s: (s.pass_rate, s.chapter, s.grade_id))


def needs_review(results: list[dict], marks: review.Review) -> list[tuple[str, str, str, str]]:
    """(student, chapter, test, why): what the grader noted (a tamper scan's finding, never a
    score) and every grade nbgrader flags ``needs_manual_grade`` (no score, or a manual score
    the grader's new result disagrees with)."""
    rows = [
        (r["student"], r["chapter"], t["grade_id"], f"grader's note: {t['note']}")
        for r in results for t in r.get("tests", []) if t.get("note")
    ]
    rows += [(s, c, g, f"gradebook: {why}") for s, c, g, why in marks.needs_review()]
    return sorted(rows)


def chapter_plot(chapter: str, results: list[dict], stats: list[ExerciseStats]) -> str:
    """One chapter's figure as SVG text: its score histogram beside its pass rate per test.

    Drawn as plain SVG (axes, bars, labels), not with matplotlib, whose import alone took ~0.5 s
    of every ``course grade``; shown in the report as an image, so it stays inert."""
    percents = [100 * r["score"] / r["max_score"] for r in results if r.get("max_score")]
    counts = [sum(lo <= p < hi for p in percents) for lo, hi in itertools.pairwise(BINS)]
    rows = max(1, len(stats))
    plot_h = max(150, 22 * rows)
    width, top, height = 860, 34, plot_h + 34 + 46
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']

    def text(x: float, y: float, value: str, anchor: str = "middle", size: int = 11, weight: str = "normal",
             upright: bool = True) -> None:
        turn = "" if upright else f' transform="rotate(-90 {x:.1f} {y:.1f})"'
        out.append(f'<text x="{x:.1f}" y="{y:.1f}"{turn} text-anchor="{anchor}" font-size="{size}" '
                   f'font-weight="{weight}">{html_text(value)}</text>')

    # left: how many submissions scored in each tenth of the chapter's points
    x0, w0 = 50, 330
    step = max(1, -(-max(counts, default=0) // 5))  # about five integer ticks
    ymax = step * max(1, -(-max(counts, default=0) // step))
    scale = plot_h / ymax
    text(x0 + w0 / 2, 18, f"{chapter}: scores of {len(percents)} submission(s)", size=12, weight="bold")
    for k in range(0, ymax + 1, step):
        y = top + plot_h - k * scale
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w0}" y2="{y:.1f}" stroke="#ddd"/>')
        text(x0 - 6, y + 4, str(k), anchor="end")
    for i, n in enumerate(counts):
        bar = w0 / len(counts)
        out.append(f'<rect x="{x0 + i * bar:.1f}" y="{top + plot_h - n * scale:.1f}" width="{bar:.1f}" '
                   f'height="{n * scale:.1f}" fill="#1f77b4" stroke="black"><title>{n}</title></rect>')
    for i, edge in enumerate(BINS):
        text(x0 + i * w0 / (len(BINS) - 1), top + plot_h + 15, f"{min(edge, 100):.0f}")
    text(x0 + w0 / 2, top + plot_h + 34, "score (% of the chapter's points)")
    text(14, top + plot_h / 2, "submissions", upright=False)
    out.append(f'<rect x="{x0}" y="{top}" width="{w0}" height="{plot_h}" fill="none" stroke="black"/>')

    # right: the share of submissions passing each test, hardest on top
    x1, w1 = 590, 250
    text(x1 + w1 / 2, 18, "pass rate per test (hardest on top)", size=12, weight="bold")
    for pct in (0, 25, 50, 75, 100):
        x = x1 + w1 * pct / 100
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#ddd"/>')
        text(x, top + plot_h + 15, str(pct))
    band = plot_h / rows
    for i, s in enumerate(stats):
        y = top + i * band
        out.append(f'<rect x="{x1}" y="{y + band * 0.15:.1f}" width="{w1 * s.pass_rate:.1f}" height="{band * 0.7:.1f}" '
                   f'fill="#1f77b4"><title>{100 * s.pass_rate:.0f}%</title></rect>')
        text(x1 - 6, y + band / 2 + 4, s.grade_id, anchor="end")
    text(x1 + w1 / 2, top + plot_h + 34, "% of submissions passing")
    out.append(f'<rect x="{x1}" y="{top}" width="{w1}" height="{plot_h}" fill="none" stroke="black"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(workdir: Path, *, db_url: str | None = None) -> Path:
    """Write ``report/report.md``, ``report/<chapter>.svg`` and ``report/report.html``; returns the Markdown's path."""
    interop.write_nbgrader_config(workdir)
    marks = review.read(db_url or Workspace(workdir).default_db_url())
    results = [review.merge(r, *marks.of(r["student"], r["chapter"])) for r in load_results(workdir)]
    out = workdir / "report"
    out.mkdir(parents=True, exist_ok=True)
    stats = exercise_stats(results)
    chapters = sorted({r["chapter"] for r in results})
    plots = {}
    for chapter in chapters:
        svg = chapter_plot(chapter, [r for r in results if r["chapter"] == chapter],
                           [s for s in stats if s.chapter == chapter])
        (out / f"{chapter}.svg").write_text(svg, encoding="utf-8")
        plots[chapter] = svg

    statuses = Counter(r["status"] for r in results)
    summary = f"{len(results)} submission(s): " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    hardest = [(s.chapter, s.grade_id, f"{100 * s.pass_rate:.0f}%", f"{s.passed}/{s.attempts}",
                ", ".join(f"{n} {k}" for k, n in sorted(s.statuses.items()))) for s in stats]
    not_graded = [(r["student"], r["chapter"], r["status"], r.get("message", "")) for r in results if r["status"] != "graded"]
    to_review = needs_review(results, marks)
    sections = [
        ("Hardest first", ("chapter", "test", "pass rate", "passed", "statuses"), hardest),
        ("Not graded", ("student", "chapter", "status", "why"), not_graded),
        ("Needs review", ("student", "chapter", "test", "why"), to_review),
    ]

    lines = ["# Class report", "", md_cell(summary), ""]
    for title, head, rows in sections:
        if not rows and title != "Needs review":
            continue
        lines += [f"## {title}", ""]
        if not rows:
            lines += ["Nothing: no grader's note, no grade flagged in the gradebook.", ""]
            continue
        lines += ["| " + " | ".join(map(md_cell, head)) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(map(md_cell, row)) + " |" for row in rows]
        lines.append("")
        if title == "Hardest first":
            lines += ["## Scores by chapter", ""] + [f"![{md_cell(c)}]({c}.svg)" for c in chapters] + [""]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    (out / "report.html").write_text(_html(summary, sections, plots), encoding="utf-8")
    return path


def _html(summary: str, sections: list, plots: dict[str, str]) -> str:
    esc = html_text
    body = ["<h1>Class report</h1>", f"<p>{esc(summary)}</p>"]
    for title, head, rows in sections:
        if not rows and title != "Needs review":
            continue
        body.append(f"<h2 id=\"{title.lower().replace(' ', '-')}\">{esc(title)}</h2>")
        if rows:
            body.append("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"
                        + "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in rows)
                        + "</tbody></table>")
        else:
            body.append("<p>Nothing: no grader's note, no grade flagged in the gradebook.</p>")
        if title == "Hardest first":
            body.append("<h2 id=\"scores\">Scores by chapter</h2><div class=\"plots\">" + "".join(
                f"<figure><img src=\"data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()}\" "
                f"alt=\"{esc(c)}: scores\"><figcaption>{esc(c)}</figcaption></figure>" for c, svg in plots.items()) + "</div>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{pages.CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Class report</title>"
        f"<style>{pages.STYLESHEET.read_text(encoding='utf-8')}</style></head><body>\n"
        + "\n".join(body) + "\n</body></html>\n"
    )
