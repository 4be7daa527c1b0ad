"""What the grader writes is text for the tool that opens it: no CSV cell is a formula, no Markdown
cell opens code, a link or HTML, every name in HTML is escaped."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import mistune
import pytest

from grader.escaping import FORMULA_START, csv_cell, html_text, md_cell
from grader.pages import report
from grader.record import export

HOSTILE = [
    '=HYPERLINK("http://x","y")', "@SUM(1+1)", "+1+2", "-2+3", "\t=1", "\r=1", "=cmd|' /C calc'!A0",
    "`<img src=x onerror=alert(1)>`", "a | b", "[x](javascript:alert(1))", "<script>alert(2)</script>",
    "line\nbreak", "back\\|slash", "&lt;b&gt;", "\uff1dSUM(1)",
]

#: Markdown as a permissive renderer reads it: raw HTML passes through unless escaped.
RAW_MARKDOWN = mistune.create_markdown(escape=False, plugins=["table"])


@pytest.mark.parametrize("text", HOSTILE)
def test_a_csv_cell_never_begins_with_a_formula_character(text):
    cell = csv_cell(text)
    assert not str(cell).startswith(FORMULA_START)
    if text.startswith(FORMULA_START):
        assert cell == "'" + text


@pytest.mark.parametrize("value", [-1.5, 0, 3, 12.25, "-1.5", "-3", "+2", "1e-05", "-.5"])
def test_numbers_stay_numbers_in_csv(value):
    assert csv_cell(value) == value


def test_plain_text_is_left_as_it_is_in_csv():
    assert [csv_cell(v) for v in ("alice", "01_tensors", "", None, "a=b")] == ["alice", "01_tensors", "", "", "a=b"]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_markdown_cell_opens_no_code_link_html_or_column(text):
    rendered = RAW_MARKDOWN(f"| a | b |\n|---|---|\n| {md_cell(text)} | end |\n")
    cells = re.findall(r"<td>(.*?)</td>", rendered, re.S)
    assert len(cells) == 2 and cells[1] == "end", rendered
    assert not re.search(r"<(?!/?td>)[a-zA-Z/]", cells[0]), rendered  # no tag but the cell's own
    assert "\n" not in md_cell(text)


def test_html_text_escapes_markup_and_quotes():
    assert html_text('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"


def _result(student: str, chapter: str, reason: str, note: str = "", status: str = "graded") -> dict:
    tests = [{"grade_id": "ex1", "points": 0.0, "max_points": 2.0, "status": "failed", "reason": reason, "note": note},
             {"grade_id": "ex2", "points": -1.5, "max_points": 2.0, "status": "passed", "reason": "", "note": ""}]
    return {"student": student, "chapter": chapter, "status": status, "score": 0.0, "max_score": 4.0,
            "message": reason, "tests": tests}


@pytest.fixture
def hostile_workspace(tmp_path: Path) -> Path:
    """A workspace whose recorded results carry hostile names, reasons and notes (no gradebook)."""
    work = tmp_path / "work"
    for i, text in enumerate(HOSTILE):
        student = f"s{i}"
        path = work / "results" / student / "00_mini.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(_result(student, "00_mini", text, f"for review: the answer: `{text}`",
                                           "error" if i % 2 else "graded")))
    return work


def test_no_cell_of_results_csv_is_a_formula_and_points_stay_numbers(hostile_workspace, tmp_path):
    db = f"sqlite:///{hostile_workspace / 'gradebook.db'}"
    path = export.write_results_csv(hostile_workspace, db, tmp_path / "results.csv")
    rows = list(csv.reader(path.open(encoding="utf-8")))
    assert len(rows) == 1 + 2 * len(HOSTILE)
    assert not [c for row in rows for c in row if c.startswith(FORMULA_START) and not re.fullmatch(r"-\d+(\.\d+)?", c)]
    assert {row[3] for row in rows[1:] if row[10] == "graded"} == {"0", "-1.50"}
    assert {row[3] for row in rows[1:] if row[10] == "error"} == {""}  # not graded: no points at all
    assert '\'=HYPERLINK("http://x","y")' in {row[6] for row in rows}


def test_report_md_quotes_a_learners_line_without_reopening_markup(hostile_workspace):
    path = report.main(hostile_workspace)
    text = path.read_text(encoding="utf-8")
    tables = RAW_MARKDOWN(text)
    for cell in re.findall(r"<td>(.*?)</td>", tables, re.S):
        assert not re.search(r"<(?!/?code>)[a-zA-Z/]", cell), cell
    assert "<script>" not in tables and "javascript:" not in re.findall(r'href="([^"]*)"', tables)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    widths = {len(re.findall(r"(?<!\\)\|", line)) for line in rows}
    assert len(widths) <= 3, "every row of a table has its header's columns"  # one width per table
    page = (path.parent / "report.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;" in page
