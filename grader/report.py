"""``course report``: the class at a glance — hardest tests first, each chapter's scores, what needs review.

Writes ``report/report.md`` (with ``report/<chapter>.png``) and ``report/report.html``, one file
that a browser opens offline: the same tables, the plots inlined as PNG ``data:`` URIs, no script.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from grader import interop, pages, review
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


def chapter_plot(chapter: str, results: list[dict], stats: list[ExerciseStats]) -> bytes:
    """One chapter's figure as PNG bytes: its score histogram beside its pass rate per test."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    percents = [100 * r["score"] / r["max_score"] for r in results if r.get("max_score")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, max(2.6, 0.32 * len(stats) + 1.2)))
    left.hist(percents, bins=BINS, edgecolor="black")
    left.set_xlabel("score (% of the chapter's points)")
    left.set_ylabel("submissions")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_title(f"{chapter}: scores of {len(percents)} submission(s)")
    right.barh([s.grade_id for s in stats][::-1], [100 * s.pass_rate for s in stats][::-1], color="tab:blue")
    right.set_xlim(0, 100)
    right.set_xlabel("% of submissions passing")
    right.set_title("pass rate per test (hardest on top)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return buf.getvalue()


def _md_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def main(workdir: Path, *, db_url: str | None = None) -> Path:
    """Write ``report/report.md``, ``report/<chapter>.png`` and ``report/report.html``; returns the Markdown's path."""
    interop.write_nbgrader_config(workdir)
    marks = review.read(db_url or Workspace(workdir).default_db_url())
    results = [review.merge(r, *marks.of(r["student"], r["chapter"])) for r in load_results(workdir)]
    out = workdir / "report"
    out.mkdir(parents=True, exist_ok=True)
    stats = exercise_stats(results)
    chapters = sorted({r["chapter"] for r in results})
    plots = {}
    for chapter in chapters:
        png = chapter_plot(chapter, [r for r in results if r["chapter"] == chapter],
                           [s for s in stats if s.chapter == chapter])
        (out / f"{chapter}.png").write_bytes(png)
        plots[chapter] = png

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

    lines = ["# Class report", "", summary, ""]
    for title, head, rows in sections:
        if not rows and title != "Needs review":
            continue
        lines += [f"## {title}", ""]
        if not rows:
            lines += ["Nothing: no grader's note, no grade flagged in the gradebook.", ""]
            continue
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
        lines.append("")
        if title == "Hardest first":
            lines += ["## Scores by chapter", ""] + [f"![{c}]({c}.png)" for c in chapters] + [""]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    (out / "report.html").write_text(_html(summary, sections, plots), encoding="utf-8")
    return path


def _html(summary: str, sections: list, plots: dict[str, bytes]) -> str:
    esc = html.escape
    body = ["<h1>Class report</h1>", f"<p>{esc(summary)}</p>"]
    for title, head, rows in sections:
        if not rows and title != "Needs review":
            continue
        body.append(f"<h2 id=\"{title.lower().replace(' ', '-')}\">{esc(title)}</h2>")
        if rows:
            body.append("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"
                        + "".join("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in row) + "</tr>" for row in rows)
                        + "</tbody></table>")
        else:
            body.append("<p>Nothing: no grader's note, no grade flagged in the gradebook.</p>")
        if title == "Hardest first":
            body.append("<h2 id=\"scores\">Scores by chapter</h2><div class=\"plots\">" + "".join(
                f"<figure><img src=\"data:image/png;base64,{base64.b64encode(png).decode()}\" alt=\"{esc(c)}: scores\">"
                f"<figcaption>{esc(c)}</figcaption></figure>" for c, png in plots.items()) + "</div>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{pages.CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Class report</title>"
        f"<style>{pages.STYLESHEET.read_text(encoding='utf-8')}</style></head><body>\n"
        + "\n".join(body) + "\n</body></html>\n"
    )
