"""The class report's numbers: a row per student, a summary per chapter, its hardest tests, what to review.

Plain data, no markup: :mod:`grader.pages.report` writes it as Markdown and HTML. A submission that
could not be graded (``error``, ``unreadable``, ``missing``, ``wrong chapter``) is never a
score of 0 here: its cell carries its status, and it counts in no mean, median or pass rate.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from grader import cells
from grader.record import review

#: A graded submission "passes" a chapter with at least this share of its points.
PASS_MARK = 0.5
#: How many of a chapter's tests the report lists as its hardest.
HARDEST = 3
GRADED = "graded"
#: Statuses of a submission the grader failed on: no score yet, graded again by the next run
#: (course-grades.csv leaves its cell empty and says the total is incomplete, as the report does).
RETRIED = ("error",)
LEGEND = ("A chapter that could not be graded shows its status (see Not graded), never a score; "
          "— marks a chapter not submitted.")
LEGEND_TOTAL = (" A total marked incomplete lacks a submission the grader failed on (error), which the next"
                " course grade grades again.")
NO_REVIEW = "Nothing: no grader's note, no grade flagged in the gradebook."


def points(value: float) -> str:
    """A score as people write it: ``45``, ``12.5``."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def short(chapter: str) -> str:
    """``04`` for ``04_reshape_indexing`` (a chapter not named ``NN_...`` stays whole)."""
    head = chapter.split("_", 1)[0]
    return head if head.isdigit() and head != chapter else chapter


@dataclass
class Cell:
    """One student's chapter: a score, or the status of a submission that was not graded."""

    status: str
    score: float = 0.0
    max_score: float = 0.0
    late: bool = False
    message: str = ""

    @property
    def graded(self) -> bool:
        return self.status == GRADED

    @property
    def text(self) -> str:
        return points(self.score) if self.graded else self.status


@dataclass
class StudentRow:
    """A student's line: display name and id, a cell per chapter submitted, total and late chapters."""

    student: str
    name: str
    cells: dict[str, Cell] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(c.score for c in self.cells.values() if c.graded)

    @property
    def incomplete(self) -> bool:
        """The grader failed on a submission of this student: the total lacks it until it is graded again."""
        return any(c.status in RETRIED for c in self.cells.values())

    @property
    def late(self) -> list[str]:
        return [ch for ch, c in sorted(self.cells.items()) if c.late]


@dataclass
class TestStats:
    """How the graded submissions of a chapter did on one test."""

    grade_id: str
    attempts: int
    passed: int
    statuses: dict[str, int]
    practice: bool = False  # a practice exercise's test: worth no points, never among the hardest

    @property
    def pass_rate(self) -> float:
        return self.passed / self.attempts if self.attempts else 0.0

    @property
    def status_text(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in sorted(self.statuses.items()))


@dataclass
class ChapterStats:
    """A chapter at a glance: how many submitted and were graded, mean, median, pass rate, tests."""

    chapter: str
    max_score: float
    submitted: int
    scores: list[float]  # of the graded submissions
    late: int
    tests: list[TestStats]  # hardest first

    @property
    def graded(self) -> int:
        return len(self.scores)

    def no_hardest(self) -> str:
        """What the "hardest first" part says when it lists no test."""
        return "Every graded submission passed every test." if self.graded else "No submission graded yet."

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.scores) if self.scores else None

    @property
    def passing(self) -> int:
        return sum(s >= PASS_MARK * self.max_score for s in self.scores)

    @property
    def hardest(self) -> list[TestStats]:
        """The few counted tests the fewest graded submissions passed (a test all passed is not hard;
        a practice exercise's test, which many leave unanswered, is not counted)."""
        return [t for t in self.tests if t.pass_rate < 1 and not t.practice][:HARDEST]

    def percents(self) -> list[float]:
        return [100 * s / self.max_score for s in self.scores] if self.max_score else []


def display_name(result: dict) -> str:
    return result.get("name") or result["student"]


def who(result: dict) -> str:
    """``Jane Doe (12345)``; the id alone when it is the name."""
    name = display_name(result)
    return name if name == result["student"] else f"{name} ({result['student']})"


def student_rows(results: list[dict]) -> list[StudentRow]:
    """A row per student (by display name, then id), a cell per chapter the student submitted."""
    rows: dict[str, StudentRow] = {}
    for r in results:
        row = rows.setdefault(r["student"], StudentRow(r["student"], display_name(r)))
        row.cells[r["chapter"]] = Cell(r["status"], float(r.get("score") or 0), float(r.get("max_score") or 0),
                                       bool(r.get("late")), r.get("message", ""))
    return sorted(rows.values(), key=lambda s: (s.name.casefold(), s.name, s.student))


def chapter_stats(results: list[dict]) -> list[ChapterStats]:
    """A summary per chapter, in chapter order; its tests hardest first (ties by name)."""
    by_chapter: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_chapter[r["chapter"]].append(r)
    out = []
    for chapter, rs in sorted(by_chapter.items()):
        graded = [r for r in rs if r["status"] == GRADED]
        by_test: dict[str, list[str]] = defaultdict(list)
        practice = set()
        for r in graded:
            for t in r.get("tests", []):
                by_test[t["grade_id"]].append(t["status"])
                if cells.is_practice_result(t):
                    practice.add(t["grade_id"])
        tests = sorted((TestStats(g, len(st), st.count("passed"), dict(Counter(st)), g in practice)
                        for g, st in by_test.items()),
                       key=lambda t: (t.pass_rate, t.grade_id))
        maxima = [float(r.get("max_score") or 0) for r in graded] or [float(r.get("max_score") or 0) for r in rs]
        out.append(ChapterStats(chapter, max(maxima, default=0.0), len(rs),
                                [float(r.get("score") or 0) for r in graded], sum(bool(r.get("late")) for r in rs),
                                tests))
    return out


def not_graded(results: list[dict]) -> list[tuple[str, str, str, str]]:
    """(student, chapter, status, why) of each submission that was not graded."""
    rows = [(who(r), r["chapter"], r["status"], r.get("message", "")) for r in results if r["status"] != GRADED]
    return sorted(rows, key=lambda row: (row[0].casefold(), row[1]))


def upload_rows(results: list[dict]) -> list[tuple[str, str, str, str]]:
    """(student, chapter, the file graded, the earlier uploads it superseded) of each LMS submission
    with more than one upload: the latest by the LMS's record (:mod:`grader.intake.lms`)."""
    rows = [(who(r), r["chapter"], str(r.get("file") or ""), ", ".join(map(str, r["superseded"])))
            for r in results if r.get("superseded")]
    return sorted(rows, key=lambda row: (row[0].casefold(), row[1]))


@dataclass
class ReviewRow:
    """One submission that needs a person's eyes, with everything found in it."""

    student: str
    chapter: str
    findings: list[str]


def review_rows(results: list[dict], marks: review.Review) -> list[ReviewRow]:
    """One row per submission with a grader's note (a tamper scan's or the runtime guard's finding,
    never a score) or a grade nbgrader flags ``needs_manual_grade``. The same finding on several
    tests (the runtime guard notes every test after a patch) is listed once, naming its tests."""
    found: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    names = {r["student"]: who(r) for r in results}
    for r in results:
        for t in r.get("tests", []):
            for note in str(t.get("note") or "").split("; for review:"):
                note = note.strip().removeprefix("for review:").strip()
                if note:
                    found[(r["student"], r["chapter"])][f"grader's note: {note}"].append(t["grade_id"])
    for student, chapter, gid, why in marks.needs_review():
        found[(student, chapter)][f"gradebook: {why}"].append(gid)
    rows = []
    for (student, chapter), whys in found.items():
        findings = [f"{why} ({_tests(gids)})" for why, gids in whys.items()]
        rows.append(ReviewRow(names.get(student, student), chapter, findings))
    return sorted(rows, key=lambda row: (row.student.casefold(), row.student, row.chapter))


def _tests(gids: list[str], most: int = 3) -> str:
    gids = sorted(set(gids))
    named = ", ".join(gids[:most])
    return f"{named} and {len(gids) - most} more" if len(gids) > most else named


CHAPTER_HEAD = ["chapter", "points", "submitted", "graded", "mean", "median", f"pass rate (≥ {PASS_MARK:.0%})", "late"]
HARDEST_HEAD = ["test", "pass rate", "passed", "statuses"]
NOT_GRADED_HEAD = ["student", "chapter", "status", "why"]
UPLOADS_HEAD = ["student", "chapter", "graded (the latest upload)", "superseded"]
REVIEW_HEAD = ["student", "chapter", "findings"]


def chapter_row(c: ChapterStats) -> list[str]:
    def maybe(x: float | None) -> str:
        return "—" if x is None else points(round(x, 1))

    rate = f"{c.passing / c.graded:.0%} ({c.passing}/{c.graded})" if c.graded else "—"
    return [c.chapter, points(c.max_score), str(c.submitted), str(c.graded), maybe(c.mean), maybe(c.median), rate,
            str(c.late)]


def hardest_rows(c: ChapterStats) -> list[list[str]]:
    return [[t.grade_id, f"{t.pass_rate:.0%}", f"{t.passed}/{t.attempts}", t.status_text] for t in c.hardest]


def chapter_facts(c: ChapterStats) -> str:
    if not c.graded:
        return f"{c.submitted} submitted, none graded."
    return (f"{c.graded} of {c.submitted} graded; mean {points(round(c.mean, 1))}, median {points(round(c.median, 1))} "
            f"of {points(c.max_score)}; {c.passing} with at least {PASS_MARK:.0%} of the points.")


@dataclass
class Class:
    """Everything the report shows, as plain data."""

    results: list[dict]
    students: list[StudentRow]
    chapters: list[ChapterStats]
    not_graded: list[tuple[str, str, str, str]]
    review: list[ReviewRow]
    figures: dict[str, str]  # chapter -> SVG text
    uploads: list[tuple[str, str, str, str]] = field(default_factory=list)  # :func:`upload_rows`

    @property
    def max_total(self) -> float:
        return sum(c.max_score for c in self.chapters)

    def legend(self) -> str:
        return LEGEND + (LEGEND_TOTAL if len(self.chapters) > 1 else "")

    def summary(self) -> str:
        graded = sum(c.graded for c in self.chapters)
        late = sum(c.late for c in self.chapters)
        parts = [f"{len(self.results)} submission{_s(self.results)} from {len(self.students)} "
                 f"student{_s(self.students)} in {len(self.chapters)} chapter{_s(self.chapters)}: {graded} graded",
                 f"{len(self.not_graded)} not graded", f"{len(self.review)} to review", f"{late} late"]
        return ", ".join(parts)


def _s(items: list) -> str:
    return "" if len(items) == 1 else "s"
