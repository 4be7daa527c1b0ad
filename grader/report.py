"""``course report``: the class at a glance — hardest exercises first, a score histogram, flags."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from grader.grade import Workspace


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


def main(workdir: Path) -> Path:
    """Write ``report/report.md``, ``report/scores.png`` and ``report/exercises.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = load_results(workdir)
    out = workdir / "report"
    out.mkdir(parents=True, exist_ok=True)
    stats = exercise_stats(results)
    graded = [r for r in results if r.get("max_score")]
    percents = [100 * r["score"] / r["max_score"] for r in graded]

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(percents, bins=[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100.0001], edgecolor="black")
    ax.set_xlabel("score (% of the chapter's points)")
    ax.set_ylabel("submissions")
    ax.set_title(f"Scores of {len(graded)} submission(s)")
    fig.tight_layout()
    fig.savefig(out / "scores.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.3 * len(stats) + 1)))
    labels = [f"{s.chapter} · {s.grade_id}" for s in stats]
    ax.barh(labels[::-1], [100 * s.pass_rate for s in stats][::-1], color="tab:blue")
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of submissions passing")
    ax.set_title("Pass rate per test (hardest on top)")
    fig.tight_layout()
    fig.savefig(out / "exercises.png", dpi=100)
    plt.close(fig)

    statuses = Counter(r["status"] for r in results)
    # what the static scan or the in-process guard noticed: for a reviewer, never a score
    flagged = [
        (r["student"], r["chapter"], t["grade_id"], t.get("note", ""))
        for r in results for t in r.get("tests", []) if t.get("note")
    ]
    lines = [
        "# Class report",
        "",
        f"{len(results)} submission(s): " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
        "",
        "## Hardest first",
        "",
        "| chapter | test | pass rate | passed | statuses |",
        "|---|---|---:|---:|---|",
    ]
    for s in stats:
        detail = ", ".join(f"{n} {k}" for k, n in sorted(s.statuses.items()))
        lines.append(f"| {s.chapter} | `{s.grade_id}` | {100 * s.pass_rate:.0f}% | {s.passed}/{s.attempts} | {detail} |")
    lines += ["", "![pass rate per test](exercises.png)", "", "## Scores", "", "![score histogram](scores.png)", ""]
    not_graded = [r for r in results if r["status"] != "graded"]
    if not_graded:
        lines += ["## Not graded", "", "| student | chapter | status | why |", "|---|---|---|---|"]
        lines += [f"| {r['student']} | {r['chapter']} | {r['status']} | {r['message']} |" for r in not_graded]
        lines.append("")
    if flagged:
        lines += ["## Flagged for review", "", "| student | chapter | test | why |", "|---|---|---|---|"]
        lines += [f"| {s} | {c} | `{g}` | {why} |" for s, c, g, why in flagged]
        lines.append("")
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
