"""The console's score table: every test not passed is listed, wrapped under its column, never cut."""

from __future__ import annotations

from types import SimpleNamespace

from grader.cli.app import _score_table


def report(student: str, failed: int, *, message: str = "", status: str = "graded") -> SimpleNamespace:
    tests = [{"grade_id": f"test_ex{k}_a_rather_long_exercise_name", "status": "failed"} for k in range(1, failed + 1)]
    tests.append({"grade_id": "test_ex9_fine", "status": "passed"})
    return SimpleNamespace(student=student, chapter="01_tensors", score=10, max_score=100, status=status,
                           cached=False, message=message, tests=tests)


def test_every_failed_test_is_listed_and_wrapped_to_the_width():
    table = _score_table([report("bob", 7), report("dave", 1, message="syntax error in cell 5")], width=90)
    lines = table.splitlines()
    assert all(len(line) <= 90 for line in lines), max(map(len, lines))
    assert "..." not in table and "…" not in table
    for k in range(1, 8):
        assert f"test_ex{k}_a_rather_long_exercise_name (failed)" in table
    column = lines[0].index("details")
    continued = [line for line in lines[2:] if line.startswith(" ")]
    assert len(continued) >= 5 and all(line[:column].strip() == "" and line[column] != " " for line in continued)
    assert "syntax error in cell 5; not passed: test_ex1" in " ".join(table.split())
    assert "test_ex9_fine" not in table


def test_a_submission_not_graded_shows_why_not_its_tests():
    table = _score_table([report("kim", 7, message="no notebook of chapter 01_tensors", status="missing")], width=120)
    assert "no notebook of chapter 01_tensors" in table and "test_ex1" not in table
