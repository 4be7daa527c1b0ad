"""The real chapters graded on the kernel engine: every wrong answer and every correct alternative
of :mod:`test_chapters` again, packed densely. A file of its own so that ``make test``'s two
processes (one file each at a time) share the chapters' batches: this one is the suite's largest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_chapters import (
    CHAPTERS,
    GRADING_DEVICE,
    _test_of,
    assert_it_costs_its_exercise_only,
    correct_alternatives,
    correct_plans,
    exercises,
    source,
    wrong_cases,
)

from grader import cells, project, samples


def pack_densely(subs: Path, prefix: str) -> tuple[dict[int, str], dict[tuple[str, str, int], str], dict[tuple[str, str], set[str]]]:
    """Every wrong answer and every correct alternative of a chapter in as few submissions
    (``<prefix><k>``) as its exercises allow: as many as the exercise with the most wrong answers
    and alternatives has, and enough that no submission holds only mistakes. Each exercise's wrong
    answers go to the submissions holding the fewest mistakes so far, its alternatives to the
    others, the solution to the rest: every mistake sits next to exercises answered right, which
    must keep their points.

    Returns (wrong-answer index -> its submission's student, (chapter, answer grade_id, j) -> the
    student holding that exercise's j-th alternative, (student, chapter) -> the answer grade_ids it
    holds no mistake in)."""
    wrong: dict[str, dict[str, list[tuple[int, dict]]]] = {}
    for index, (chapter, case) in enumerate(wrong_cases()):
        wrong.setdefault(chapter, {}).setdefault(case["grade_id"], []).append((index, case))
    where: dict[int, str] = {}
    alt_where: dict[tuple[str, str, int], str] = {}
    right: dict[tuple[str, str], set[str]] = {}
    for chapter in CHAPTERS:
        ids, mistakes = samples.answer_ids(chapter), wrong.get(chapter, {})
        alternatives = correct_alternatives(chapter)
        total = sum(map(len, mistakes.values()))
        size = max([len(mistakes.get(g, [])) + len(alternatives.get(g, [])) for g in ids]
                   + [-(-total // max(1, len(ids) - 1))])
        plan: list[dict[str, object]] = [dict.fromkeys(ids, samples.SOLUTION) for _ in range(size)]
        load = [0] * size
        for gid in sorted(ids, key=lambda g: -len(mistakes.get(g, []))):
            order = sorted(range(size), key=lambda k: (load[k], k))
            cases = mistakes.get(gid, [])
            for k, (index, case) in zip(order, cases, strict=False):
                plan[k][gid], where[index] = case["source"], f"{prefix}{k}"
                load[k] += 1
            for k, (j, case) in zip(sorted(order[len(cases):]), enumerate(alternatives.get(gid, [])), strict=False):
                plan[k][gid], alt_where[(chapter, gid, j)] = case["source"], f"{prefix}{k}"
        taken = {(where[i], chapter, case["grade_id"]) for cases in mistakes.values() for i, case in cases}
        for k, answers in enumerate(plan):
            student = f"{prefix}{k}"
            right[(student, chapter)] = {gid for gid in ids if (student, chapter, gid) not in taken}
            path = subs / student / chapter / project.source_notebook(chapter).name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(samples.make_submission(chapter, answers)))
    return where, alt_where, right


@pytest.fixture(scope="module")
def kernel_batch(tmp_path_factory, grade_batch):
    """The same answers on the kernel engine, packed densely (:func:`pack_densely`): every wrong
    answer and every correct alternative in as few submissions as the chapter allows, each wrong
    answer next to exercises answered right (the solution or an alternative), which keep their points."""
    subs = tmp_path_factory.mktemp("kernel-subs")
    where, alt_where, right = pack_densely(subs, "kernel")
    reports = grade_batch(subs, tmp_path_factory.mktemp("kernel-work"), jobs=2, device=GRADING_DEVICE, engine="kernel")
    return {(r.student, r.chapter): r for r in reports}, where, alt_where, right


@pytest.mark.slow
@pytest.mark.parametrize("case_index", range(len(wrong_cases())), ids=[f"{c}:{x['grade_id']}:{x['mistake'][:40]}" for c, x in wrong_cases()])
def test_a_wrong_answer_loses_its_exercise_on_the_kernel_engine_too(kernel_batch, case_index):
    reports, where, _, right = kernel_batch
    chapter, case = wrong_cases()[case_index]
    assert case_index in where, "every wrong answer is in one of the packed submissions"
    student = where[case_index]
    assert_it_costs_its_exercise_only(reports[(student, chapter)], chapter, case, right[(student, chapter)], "kernel")


@pytest.mark.slow
@pytest.mark.parametrize(("chapter", "k"), correct_plans(), ids=[f"{c}-alt{k}" for c, k in correct_plans()])
def test_a_correct_answer_in_another_idiom_scores_full_marks_on_the_kernel_engine_too(kernel_batch, chapter, k):
    """Each exercise's k-th correct alternative (its last, for an exercise with fewer) passes its test
    with the points the source gives it (0 for a practice exercise), in whichever packed submission holds it."""
    reports, _, alt_where, _ = kernel_batch
    refused = {}
    for gid, cases in correct_alternatives(chapter).items():
        j = min(k, len(cases) - 1)
        report = reports[(alt_where[(chapter, gid, j)], chapter)]
        verdict_ = next(t for t in report.tests if t["grade_id"] == _test_of(chapter, gid))
        worth = next(cells.points(t) for _, t in exercises(source(chapter)) if cells.grade_id(t) == verdict_["grade_id"])
        if report.status != "graded" or verdict_["status"] != "passed" or (verdict_["points"], verdict_["max_points"]) != (worth, worth):
            refused[gid] = (report.student, report.status, verdict_["status"], verdict_["reason"], cases[j]["idiom"])
    assert not refused, f"alternative {k} of {chapter} refused on the kernel engine: {refused}"
