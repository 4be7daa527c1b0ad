"""A chapter's figure for the class report: its score histogram beside its pass rate per test.

Drawn as plain SVG (axes, bars, labels), not with matplotlib, whose import alone took ~0.5 s of
every ``course grade``. The figure is meant to be shown at its own size (:data:`WIDTH` pixels
wide), where no text is smaller than :data:`MIN_FONT` pixels; the report shows it as an image,
so it stays inert. Every piece of text goes through :func:`grader.escaping.html_text`.
"""

from __future__ import annotations

from grader.escaping import html_text
from grader.pages.report_tables import ChapterStats

WIDTH = 600
MIN_FONT = 11
#: Score bands of the histogram: tenths of the chapter's points (100 % falls in the last).
BANDS = 10
BAR = "#3b6fb6"
LABEL = 26  # characters of a test's name shown (the whole name is the bar's tooltip)


def _label(grade_id: str) -> str:
    name = grade_id.removeprefix("test_")
    return name if len(name) <= LABEL else name[:LABEL - 1] + "…"


def size(stats: ChapterStats) -> tuple[int, int]:
    """(width, height) of the chapter's figure, in pixels."""
    return WIDTH, _plot_height(stats) + 84


def _plot_height(stats: ChapterStats) -> int:
    return max(150, 22 * len(stats.tests))


def chapter_plot(stats: ChapterStats) -> str:
    """The chapter's figure as SVG text."""
    percents = stats.percents()
    counts = [0] * BANDS
    for p in percents:
        counts[min(BANDS - 1, max(0, int(p // (100 / BANDS))))] += 1
    width, height = size(stats)
    plot_h, top = _plot_height(stats), 44
    bottom = top + plot_h
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="{MIN_FONT}">',
           f'<rect width="{width}" height="{height}" fill="white"/>']

    def text(x: float, y: float, value: str, anchor: str = "middle", size: int = MIN_FONT, weight: str = "normal",
             fill: str = "#1f2328", title: str = "") -> None:
        tip = f"<title>{html_text(title)}</title>" if title else ""
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{max(size, MIN_FONT)}" '
                   f'font-weight="{weight}" fill="{fill}">{tip}{html_text(value)}</text>')

    graded = len(percents)
    text(8, 18, f"{stats.chapter}: scores of {graded} graded submission{'s' * (graded != 1)}", anchor="start",
         size=13, weight="bold")

    # left: how many graded submissions scored in each tenth of the chapter's points
    x0, w0 = 40, 200
    text(x0, top - 10, "submissions per score band", anchor="start", size=12)
    peak = max(counts, default=0)
    step = max(1, -(-peak // 4))  # at most about four integer ticks
    ymax = max(1, step * -(-peak // step))
    scale = plot_h / ymax
    for k in range(0, ymax + 1, step):
        y = bottom - k * scale
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w0}" y2="{y:.1f}" stroke="#e3e6ea"/>')
        text(x0 - 6, y + 4, str(k), anchor="end", fill="#59636e")
    bar = w0 / BANDS
    for i, n in enumerate(counts):
        if n:
            y = bottom - n * scale
            out.append(f'<rect x="{x0 + i * bar + 1:.1f}" y="{y:.1f}" width="{bar - 2:.1f}" height="{n * scale:.1f}" '
                       f'fill="{BAR}"><title>{n} scored {10 * i}–{10 * i + 10}%</title></rect>')
    for pct in range(0, 101, 20):
        text(x0 + w0 * pct / 100, bottom + 16, str(pct), fill="#59636e")
    text(x0 + w0 / 2, bottom + 34, "% of the chapter's points")
    out.append(f'<line x1="{x0}" y1="{bottom}" x2="{x0 + w0}" y2="{bottom}" stroke="#59636e"/>')

    # right: the share of graded submissions passing each test, hardest on top
    x1, w1 = 410, 140
    text(x1 - 140, top - 10, "pass rate per test (hardest on top)", anchor="start", size=12)
    for pct in (0, 50, 100):
        x = x1 + w1 * pct / 100
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e3e6ea"/>')
        text(x, bottom + 16, f"{pct}%", fill="#59636e")
    band = plot_h / max(1, len(stats.tests))
    for i, t in enumerate(stats.tests):
        y = top + i * band
        rate = f"{100 * t.pass_rate:.0f}%"
        out.append(f'<rect x="{x1}" y="{y + band * 0.18:.1f}" width="{w1 * t.pass_rate:.1f}" '
                   f'height="{band * 0.64:.1f}" fill="{BAR}"><title>{html_text(t.grade_id)}: {rate}</title></rect>')
        text(x1 - 6, y + band / 2 + 4, _label(t.grade_id), anchor="end", title=t.grade_id)
        text(x1 + w1 + 6, y + band / 2 + 4, rate, anchor="start")
    out.append(f'<line x1="{x1}" y1="{top}" x2="{x1}" y2="{bottom}" stroke="#59636e"/>')
    if not stats.tests:
        text(x1 + w1 / 2, top + plot_h / 2, "no graded submission")
    out.append("</svg>")
    return "\n".join(out) + "\n"
