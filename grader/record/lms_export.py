"""Grades back into the LMS: the instructor's own Canvas gradebook or Moodle grading worksheet, filled in.

The file the LMS wrote is the template (its columns in ``docs/lms.md``): a copy is written with
the chapter's grades in the chapter's column, rows matched on the LMS's own id (Canvas's ``ID``,
Moodle's ``Participant N``), every other byte as it was (:mod:`grader.record.csv_spans`). Only a
grade is written: a submission not graded (missing, unreadable, error) leaves its cell as the
LMS had it, and is listed, as is every student in one file and not the other. A score is scaled
to the LMS's points where they differ from the chapter's (Canvas's "Points Possible" row,
Moodle's "Maximum Grade"), written as the file writes its numbers (Moodle's decimal comma).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.exceptions import LmsFileError
from grader.intake.lms_names import shown
from grader.record import csv_spans
from grader.record.csv_spans import Cell

GRADED = "graded"
CANVAS_ASSIGNMENT_RE = re.compile(r"^(?P<title>.*) \((?P<id>\d+)\)$", re.S)
PARTICIPANT_RE = re.compile(r"^\D*?(?P<n>\d+)$")
NUMBER_RE = re.compile(r"^\s*(?P<int>\d+)(?:[.,](?P<frac>\d+))?\s*$")


@dataclass(frozen=True)
class Grade:
    """One student's chapter as the grader recorded it."""

    status: str
    score: float
    max_score: float
    name: str


@dataclass
class Filled:
    """What :func:`fill_canvas` or :func:`fill_moodle` wrote, and who it left out."""

    path: Path
    column: str
    filled: int = 0
    scale: str = ""  # how scores were scaled to the LMS's points ("" when not)
    not_in_file: list[str] = field(default_factory=list)  # graded here, no row in the LMS's file
    not_graded: list[str] = field(default_factory=list)  # a row in the file, but no grade here (its status)
    not_here: list[str] = field(default_factory=list)  # a row in the file, no submission of this chapter here


def chapter_grades(workdir: Path, chapter: str, totals: dict[str, tuple[float, float]]) -> dict[str, Grade]:
    """student -> :class:`Grade` of ``chapter`` from the workspace's results (``totals``: the
    gradebook's score and maximum per student, manual grades included)."""
    grades = {}
    for path in sorted((workdir / "results").glob(f"*/{chapter}.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(result, dict) or result.get("chapter") != chapter:
            continue
        student = str(result.get("student"))
        score, most = totals.get(student, (float(result.get("score") or 0), float(result.get("max_score") or 0)))
        grades[student] = Grade(str(result.get("status")), score, most, shown(str(result.get("name") or student)))
    return grades


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise LmsFileError("not UTF-8 text, as the LMS writes it", where=str(path),
                           hint="give the file exactly as downloaded from the LMS") from None
    except OSError as exc:
        raise LmsFileError(f"cannot read it ({exc.strerror})", where=str(path)) from None


def _number(value: float, like: str = "") -> str:
    """``value`` written as ``like`` writes its number (``100,00``: a decimal comma, two places)."""
    m = NUMBER_RE.match(like)
    places = len(m["frac"]) if m and m["frac"] else None
    text = f"{value:.{places}f}" if places is not None else (f"{value:.2f}".rstrip("0").rstrip(".") or "0")
    return text.replace(".", ",") if "," in like else text


def _as_float(text: str) -> float | None:
    m = NUMBER_RE.match(text)
    return float(f"{m['int']}.{m['frac'] or 0}") if m else None


def _fill(text: str, sep: str, records: list[list[Cell]], id_col: int, col: int, name_col: int, lms_id, grades,
          dest: Path, header: str, points: float | None, like: str = "") -> Filled:
    """Fill the grade of every row whose id (``lms_id`` of its id cell; None: not a student's row) is graded here."""
    done = Filled(dest, shown(header))
    changes, seen = {}, set()
    scales = set()
    for r, record in enumerate(records[1:], start=1):
        student = lms_id(record[id_col].value) if len(record) > id_col else None
        if student is None:
            continue
        seen.add(student)
        who = f"{student} ({shown(record[name_col].value.strip())})" if len(record) > name_col else student
        grade = grades.get(student)
        if grade is None:
            done.not_here.append(who)
        elif grade.status != GRADED:
            done.not_graded.append(f"{who}: {grade.status}")
        elif len(record) <= col:
            done.not_graded.append(f"{who}: the row has no cell in the column")
        else:
            score = grade.score
            if points is not None and grade.max_score and points != grade.max_score:
                score = grade.score / grade.max_score * points
                scales.add(f"scores out of {_number(grade.max_score)} scaled to the LMS's {_number(points)}")
            changes[(r, col)] = _number(score, like)
    done.filled, done.scale = len(changes), "; ".join(sorted(scales))
    done.not_in_file = sorted(f"{s} ({g.name})" for s, g in grades.items() if s not in seen and g.status == GRADED)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(csv_spans.replaced(text, changes, records, sep).encode("utf-8"))
    return done


def fill_canvas(src: Path, dest: Path, grades: dict[str, Grade], *, chapter: str, column: str | None = None) -> Filled:
    """Write a copy of Canvas's gradebook export ``src`` to ``dest`` with ``chapter``'s grades in its column.

    ``column``: the assignment's column as Canvas titles it (``Tensors (1234)``), its title or its
    id; without it, the one assignment column whose title holds the chapter's name.

    Raises:
        LmsFileError: the file is no Canvas gradebook, or the column is not there, or not one.
    """
    text = _text(src)
    records = csv_spans.read(text, ",")
    if len(records) < 2:
        raise LmsFileError("no student rows: not a Canvas gradebook export", where=str(src))
    header = [c.value.lstrip("\ufeff").strip() for c in records[0]]
    if "ID" not in header:
        raise LmsFileError("no ID column: not a Canvas gradebook export (Student, ID, SIS User ID, ...)",
                           where=str(src), hint="export it from Canvas's Gradebook (Export > Export Entire Gradebook)")
    id_col = header.index("ID")
    assignments = {i: m for i, h in enumerate(header) if (m := CANVAS_ASSIGNMENT_RE.match(h))}
    if column is not None:
        found = [i for i, m in assignments.items() if column.strip() in (header[i], m["title"].strip(), m["id"])]
    else:
        found = [i for i, m in assignments.items() if chapter.casefold() in m["title"].casefold()]
    if len(found) != 1:
        listed = ", ".join(shown(header[i], 40) for i in list(assignments)[:8]) or "none"
        what = f"--column {column!r}" if column is not None else f"the chapter {chapter}"
        raise LmsFileError(f"{'no' if not found else len(found)} assignment column(s) for {what} (columns: {listed})",
                           where=str(src), hint='name the chapter\'s column with --column "Title (id)"')
    col = found[0]
    points = None
    for record in records[1:]:
        if record[0].value.strip() == "Points Possible" and len(record) > col:
            points = _as_float(record[col].value)

    def lms_id(value: str) -> str | None:
        return f"canvas-{int(value)}" if value.strip().isdigit() else None

    mine = {s: g for s, g in grades.items() if s.startswith("canvas-")}
    return _fill(text, ",", records, id_col, col, 0, lms_id, mine, dest, header[col], points)


def fill_moodle(src: Path, dest: Path, grades: dict[str, Grade], *, column: str | None = None) -> Filled:
    """Write a copy of Moodle's grading worksheet ``src`` to ``dest`` with the grades in its Grade column.

    The columns are found whatever the site's language: the identifier by its ``Participant N``
    values, the grade as the column before the one that holds the same number on every row
    (Maximum Grade); ``column`` names the grade's column by its header instead.

    Raises:
        LmsFileError: the file is no grading worksheet, or its grade column cannot be told.
    """
    text = _text(src)
    sep = csv_spans.delimiter(text)
    records = csv_spans.read(text, sep)
    rows = [r for r in records[1:] if any(c.value.strip() for c in r)]
    if not rows:
        raise LmsFileError("no participant rows: not a Moodle grading worksheet", where=str(src))
    width = min(len(r) for r in rows)
    header = [c.value.lstrip("\ufeff").strip() for c in records[0]]

    def column_of(test) -> list[int]:
        return [i for i in range(width) if all(test(r[i].value) for r in rows)]

    ids = column_of(lambda v: PARTICIPANT_RE.match(v.strip()) is not None and not v.strip().isdigit())
    if not ids:
        raise LmsFileError("no column of 'Participant N' identifiers: not a Moodle grading worksheet", where=str(src),
                           hint="download it from the assignment: View all submissions > Download grading worksheet")
    id_col = ids[0]
    if column is not None:
        found = [i for i, h in enumerate(header) if h == column.strip()]
    else:
        same = [i for i in column_of(lambda v: _as_float(v) is not None)
                if i > id_col + 1 and len({_as_float(r[i].value) for r in rows}) == 1]
        found = [i - 1 for i in same if all(not r[i - 1].value.strip() or _as_float(r[i - 1].value) is not None
                                            for r in rows)][:1]
    if len(found) != 1:
        raise LmsFileError("cannot tell the grade's column (the one before Maximum Grade)", where=str(src),
                           hint='name it with --column "Grade" (its header as your site writes it)')
    col = found[0]
    most = rows[0][col + 1].value if len(rows[0]) > col + 1 else ""
    points = _as_float(most)

    def lms_id(value: str) -> str | None:
        m = PARTICIPANT_RE.match(value.strip())
        return f"moodle-{int(m['n'])}" if m and not value.strip().isdigit() else None

    mine = {s: g for s, g in grades.items() if s.startswith("moodle-")}
    return _fill(text, sep, records, id_col, col, id_col + 1, lms_id, mine, dest,
                 header[col] if col < len(header) else str(col), points, most if points is not None else "")
