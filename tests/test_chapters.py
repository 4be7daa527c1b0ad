"""The real chapters: their shape, both executions, and grading of right and wrong answers."""

from __future__ import annotations

import ast
import collections
import json
import os
import re
import sys
import types
from pathlib import Path

import pytest
import run_notebooks as runner

from grader import cells, grade, project, samples
from grader.prepare import publish, release
from grader.prepare.release import build_release, read
from grader.verdict import hints, instrument, rules
from grader.verdict import judge as verdict

CHAPTERS = project.chapters()
WRONG = Path(__file__).parent / "fixtures" / "wrong_answers"
#: `make test DEVICE=cuda` on the GPU runner: the notebooks run there with DEVICE="cuda", and the
#: grading batches below grade with `--device cuda` (grading knows "cpu" and "cuda" only)
DEVICE = os.environ.get("COURSE_DEVICE", "cpu")
GRADING_DEVICE = "cuda" if DEVICE.startswith("cuda") else "cpu"
#: An exercise's heading: "(N points)" on a core exercise, "(practice, not counted)" on a practice one
EXERCISE_RE = re.compile(r"^##+ Exercise (\d+)\b.*\((?:(\d+) points?|practice, not counted)\)", re.MULTILINE)


def source(chapter: str):
    return read(project.source_notebook(chapter))


def exercises(nb) -> list[tuple[object, object]]:
    """(answer cell, test cell) pairs in order."""
    pairs, answer = [], None
    for c in nb.cells:
        if cells.is_solution(c):
            answer = c
        elif cells.is_test(c):
            pairs.append((answer, c))
            answer = None
    return pairs


def test_chapters_are_numbered_from_01_without_gaps():
    """The chapters are whatever folders solutions/ holds (none is listed anywhere else)."""
    assert CHAPTERS, "no chapter in solutions/"
    assert [int(c[:2]) for c in CHAPTERS] == list(range(1, len(CHAPTERS) + 1)), CHAPTERS


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_parameters_cell_declares_device_seed_fast(chapter):
    nb = source(chapter)
    i = cells.parameters_cell_index(nb)
    assert i is not None, "no cell tagged 'parameters'"
    ns: dict = {}
    exec(cells.source_text(nb.cells[i]), ns)
    assert (ns["DEVICE"], ns["SEED"], ns["FAST"]) == ("auto", 0, False)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_setup_cell_pins_this_release_on_colab_and_is_a_no_op_elsewhere(chapter, monkeypatch):
    src = source(chapter)
    assert publish.COLAB_IF in cells.source_text(src.cells[cells.parameters_cell_index(src) + 1])
    nb = build_release(chapter, project.source_notebook(chapter))
    setup = cells.source_text(nb.cells[cells.parameters_cell_index(nb) + 1])
    pin = publish.current().requirement
    assert pin in setup and "cu.setup(seed=SEED, device=DEVICE)" in setup
    calls = []
    import subprocess

    real_run = subprocess.run

    def run(args, *a, **k):
        # record installs only: whatever else runs a program on the way (matplotlib's first
        # `fc-list` on a machine without its font cache, say) must still get its real result
        if "pip" not in args:
            return real_run(args, *a, **k)
        calls.append((args, *a))
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(setup, {"SEED": 0, "DEVICE": "cpu"})
    assert calls == [], "the setup cell installed something outside Colab"
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    exec(setup, {"SEED": 0, "DEVICE": "cpu"})
    assert len(calls) == 1 and pin in calls[0][0]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_exercises_are_complete_and_points_add_up(chapter):
    nb = source(chapter)
    pairs = exercises(nb)
    assert 5 <= len(pairs) <= 8, f"{len(pairs)} exercises"
    stated = {int(n): int(p or 0) for n, p in EXERCISE_RE.findall("\n".join(cells.source_text(c) for c in nb.cells if c.cell_type == "markdown"))}
    for k, (answer, test) in enumerate(pairs, start=1):
        gid = cells.grade_id(test)
        assert answer is not None, f"{gid}: no answer cell before it"
        assert cells.is_locked(test), f"{gid} is not locked"
        assert cells.BEGIN_HIDDEN in cells.source_text(test), f"{gid} has no hidden tests"
        assert cells.BEGIN_SOLUTION in cells.source_text(answer), f"{cells.grade_id(answer)} has no solution region"
        assert stated.get(k) == int(cells.points(test)), f"exercise {k}: the statement says {stated.get(k)} points, the test gives {cells.points(test)}"
    core = [t for _, t in pairs if not cells.is_practice(t)]
    assert len(core) >= 3, f"{len(core)} core exercises: a chapter counts at least 3"
    total = sum(cells.points(t) for t in core)
    assert total == 100, f"the core exercises' points add up to {total}, not 100"
    release.check_practice(chapter, nb)  # practice tests worth 0, core ones more, practice after core


#: a hidden test that runs the answer on the meta device (shapes and dtypes, no values)
META_CALL_RE = re.compile(r"""device\s*=\s*["']meta["']|\.is_meta\b""")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_an_exercise_whose_hidden_tests_use_the_meta_device_says_so(chapter):
    """On the meta device nothing reads a value (``.item()``, ``.tolist()``, an ``if`` on a tensor),
    so an answer correct on every device with values fails there: a learner must read that the
    tests go there in the exercise's own statement, not find it out from a lost exercise."""
    statement, missing = "", []
    for cell in source(chapter).cells:
        text = cells.source_text(cell)
        if cell.cell_type == "markdown" and EXERCISE_RE.search(text):
            statement = text
        elif cells.is_test(cell) and META_CALL_RE.search(text.partition(cells.BEGIN_HIDDEN)[2]):
            if "`meta`" not in statement and 'device="meta"' not in statement:
                missing.append(cells.grade_id(cell))
    assert not missing, f"hidden tests run on the meta device, unannounced in the statement: {missing}"


#: the one badge a deep dive's heading carries; its cells are tagged "optional" too
BADGE = "⟡ Go deeper (optional)"
TIME_RE = re.compile(r"\*\*Time\*\*: about (\d+) minutes on the core path")
HEADING_RE = re.compile(r"^(#+) ")
PREDICT = "**Predict:**"
GUESS_RE = re.compile(r"guess = \.\.\.  # your prediction: [^\n]+")


def core_minutes(nb) -> int | None:
    first = next(c for c in nb.cells if c.cell_type == "markdown")
    m = TIME_RE.search(cells.source_text(first))
    return int(m.group(1)) if m else None


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds, names it reads), IPython magics and shell lines left out."""
    code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    tree = ast.parse(code)
    bound, read_ = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read_ if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound, read_


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_states_its_time_and_core_path_badges_its_deep_dives_and_asks_to_predict(chapter):
    """The first markdown cell: time, what you will be able to do, core path. A deep dive's heading
    carries BADGE and exactly its section's cells are tagged "optional" (an exercise among them is a
    practice exercise, worth 0 points); skipping them leaves every name a later cell reads defined.
    At least three **Predict:** lines, each a cell of its own, then a cell where the learner commits
    to a guess (``guess = ...``, blank in the source, so a headless run goes through), then the code
    cell whose asserts answer it and that tells the learner whether the guess was right
    (``cu.reveal(guess, ...)``)."""
    nb = source(chapter)
    first = cells.source_text(next(c for c in nb.cells if c.cell_type == "markdown"))
    assert core_minutes(nb), "the first cell does not say 'Time: about N minutes on the core path'"
    assert "**You will be able to**:" in first and "**Core path**:" in first, "the first cell misses what you will be able to do or the core path"
    level, core_bound, optional_only = None, set(), set()
    for i, c in enumerate(nb.cells):
        text = cells.source_text(c)
        m = HEADING_RE.match(text) if c.cell_type == "markdown" else None
        if m:
            if level is not None and len(m.group(1)) <= level:
                level = None
            if BADGE in text.splitlines()[0] and level is None:
                level = len(m.group(1))
        elif c.cell_type == "markdown":
            assert BADGE not in text, f"cell {i}: the badge belongs in a heading"
        tagged = cells.has_tag(c, "optional")
        assert tagged == (level is not None), f"cell {i}: tagged optional={tagged}, but {'inside' if level else 'outside'} a {BADGE} section"
        if cells.is_test(c):  # an exercise in a deep dive is practice: its test is worth 0 points
            assert tagged == (cells.points(c) == 0), f"cell {i}: worth {cells.points(c):g} points, tagged optional={tagged}"
        if c.cell_type == "code":
            bound, read_ = _names(text)
            if tagged:
                optional_only |= bound - core_bound
            else:
                missing = (read_ - bound) & optional_only
                assert not missing, f"cell {i} reads {sorted(missing)}, which only an optional section defines"
                core_bound |= bound
                optional_only -= bound
    predicts = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and cells.source_text(c).startswith(PREDICT)]
    assert len(predicts) >= 3, f"{len(predicts)} **Predict:** questions, not 3"
    for i in predicts:
        question, guess = cells.source_text(nb.cells[i]).strip(), nb.cells[i + 1]
        assert "\n" not in question and question.endswith("?"), f"cell {i}: a prediction is one line, a question"
        assert guess.cell_type == "code" and GUESS_RE.fullmatch(cells.source_text(guess).strip()), (
            f"cell {i + 1}: a prediction is followed by a cell holding only `guess = ...  # your prediction: ...`")
        after = nb.cells[i + 2]
        assert after.cell_type == "code" and re.search(r"\bassert\b|raises\(", cells.source_text(after)), f"cell {i}: the cell after the guess does not assert the answer"
        assert "cu.reveal(guess, " in cells.source_text(after), f"cell {i + 2}: the cell after the guess does not reveal it"


#: The course's core path takes at most 8 hours by count (CURRICULUM.md; CONTRIBUTING.md, "Timing a
#: chapter"): a chapter that grows moves material, or an exercise, to an optional section.
CORE_CEILING_MIN = 480


def test_the_core_path_fits_eight_hours_by_count_and_the_readme_states_it():
    import core_time

    minutes = {chapter: core_minutes(source(chapter)) for chapter in CHAPTERS}
    assert all(minutes.values()), minutes
    total = sum(minutes.values())
    counted = sum(core_time.count(source(chapter).cells)[0].minutes for chapter in CHAPTERS)
    assert 6 * 60 <= total <= CORE_CEILING_MIN and counted <= CORE_CEILING_MIN, (
        f"{total} minutes of core path stated, {counted:.0f} counted: move material to an optional section ({minutes})")
    readme = (project.ROOT / "README.md").read_text(encoding="utf-8")
    table = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (\d\d) \|.*\| (\d+) min \|$", readme, re.MULTILINE)}
    assert table == {c[:2]: n for c, n in minutes.items()}, f"README's core-path column {table} != the chapters' {minutes}"
    assert f"({sum(minutes.values())} minutes," in readme, "README states another total for the core path"


@pytest.fixture(scope="module")
def executions(tmp_path_factory):
    report = tmp_path_factory.mktemp("ci-report")
    results = runner.run(CHAPTERS, ["solution", "release"], fast=True, jobs=2, report_dir=report, device=DEVICE)
    return {(r.chapter, r.mode): r for r in results}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["solution", "release"])
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_executes_as_promised(executions, chapter, mode):
    """Solution: runs clean. Release: every visible and hidden test part fails on the stub."""
    result = executions[(chapter, mode)]
    assert result.ok, "\n".join(result.failures)
    assert result.code_cells_run > 5


@pytest.mark.slow
def test_a_chapters_cells_import_little_that_its_fork_server_did_not_preload():
    """What the cells import lazily is paid by every child: ~1-2 s for torch._dynamo or scikit-learn.
    grader.prepare.integrity.PRELOAD and the chapter's grading.toml ``preload`` keep it small; a chapter
    that starts importing something big fails here until its grading.toml names it."""
    from concurrent.futures import ThreadPoolExecutor

    from nbformat.v4 import new_code_cell

    from grader.engines.execution import ExecOptions
    from grader.engines.fork import engine as fork

    def imported(chapter: str) -> list:
        nb = source(chapter)
        code = [c for c in nb.cells if c.cell_type == "code"]
        for cell in code:  # as CI and grading run them
            cell.source = cell.source.replace("FAST = False", "FAST = True")
        nb.cells = [new_code_cell("import sys as _s\n_before = set(_s.modules)"), *code,
                    new_code_cell("sorted(set(_s.modules) - _before)")]
        options = ExecOptions(cell_timeout=120, isolate=False, preload=project.preload([chapter]))
        return fork.execute(nb, options).nb.cells[-1].outputs

    with ThreadPoolExecutor(2) as workers:  # two chapters at a time, each on a server of its own preload
        results = dict(zip(CHAPTERS, workers.map(imported, CHAPTERS), strict=True))
    for chapter, result in results.items():
        assert result and result[0].output_type == "execute_result", f"{chapter}: {result}"
        new = eval(result[0].data["text/plain"])  # a list of module names, from our own cell
        assert len(new) < 30, f"{chapter} imports {len(new)} modules its server did not: {new[:40]}"


def wrong_cases() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(WRONG.glob("*.json")):
        for case in json.loads(path.read_text()):
            out.append((path.stem, case))
    return out


#: A wrong answer whose reason is a status that already says what to do: no hint follows it.
STATUS_CASE = re.compile(r"^\^(?:not answered yet|your answer cell has a syntax error)")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_has_three_wrong_answers_that_say_what_to_try(chapter):
    """Each exercise has at least three known mistakes whose reason is asserted to go on with
    "What to try: " and the exercise's hint; only a status (not answered, a syntax error) has none."""
    cases = json.loads((WRONG / f"{chapter}.json").read_text(encoding="utf-8"))
    for case in cases:
        assert STATUS_CASE.match(case["message"]) or "What to try: " in case["message"], (
            f"{chapter}:{case['grade_id']}: {case['mistake']!r} does not assert its reason's hint")
    counts = collections.Counter(c["grade_id"] for c in cases if not STATUS_CASE.match(c["message"]))
    answers = [cells.grade_id(c) for c in source(chapter).cells if cells.is_solution(c) and c.cell_type == "code"]
    thin = {gid: counts[gid] for gid in answers if counts[gid] < 3}
    assert not thin, f"{chapter}: exercises with fewer than three wrong answers that say what to try: {thin}"


def pack_wrong_answers(subs: Path, prefix: str, *, sparse: bool) -> tuple[dict[int, str], dict[tuple[str, str], set[str]]]:
    """Write every wrong answer into a few submissions per chapter, the k-th wrong answer of each
    exercise in submission ``<prefix><k>`` (the solution where an exercise has fewer). ``sparse``
    packs the odd-numbered and the even-numbered exercises apart (``<prefix><k>a``, ``...b``), so
    that every wrong answer sits between solved exercises, whose tests must still pass.

    Returns (wrong-answer index -> its submission's student, (student, chapter) -> the answer
    grade_ids it holds the solution for)."""
    by_chapter: dict[str, dict[str, list[tuple[int, dict]]]] = {}
    for index, (chapter, case) in enumerate(wrong_cases()):
        by_chapter.setdefault(chapter, {}).setdefault(case["grade_id"], []).append((index, case))
    where: dict[int, str] = {}
    solved: dict[tuple[str, str], set[str]] = {}
    for chapter, per_answer in by_chapter.items():
        ids = samples.answer_ids(chapter)
        groups = {"a": ids[0::2], "b": ids[1::2]} if sparse else {"": ids}
        for suffix, group in groups.items():
            for k in range(max(len(per_answer.get(gid, [])) for gid in group)):
                student = f"{prefix}{k}{suffix}"
                answers = dict.fromkeys(ids, samples.SOLUTION)
                for gid in group:
                    if k < len(per_answer.get(gid, [])):
                        index, case = per_answer[gid][k]
                        answers[gid] = case["source"]
                        where[index] = student
                solved[(student, chapter)] = {gid for gid in ids if answers[gid] is samples.SOLUTION}
                path = subs / student / chapter / project.source_notebook(chapter).name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(samples.make_submission(chapter, answers)))
    return where, solved


def write_correct_alternatives(subs: Path, prefix: str) -> None:
    """Submission ``<prefix><k>`` of a chapter answers every exercise with its k-th correct
    alternative (the last one, for an exercise with fewer)."""
    for chapter, k in correct_plans():
        answers = {gid: cases[min(k, len(cases) - 1)]["source"] for gid, cases in correct_alternatives(chapter).items()}
        path = subs / f"{prefix}{k}" / chapter / project.source_notebook(chapter).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(samples.make_submission(chapter, answers)))


@pytest.fixture(scope="module")
def class_batch(tmp_path_factory):
    """One grading batch on the fork engine: a perfect and an untouched submission for every
    chapter, the demo's partial and syntax-error students for chapter 01, every wrong answer,
    packed sparsely (:func:`pack_wrong_answers`): each between solved exercises, and the "alt<k>"
    submissions of the correct alternatives (:func:`write_correct_alternatives`)."""
    subs = tmp_path_factory.mktemp("subs")
    for chapter in CHAPTERS:
        name = project.source_notebook(chapter).name
        ids = samples.answer_ids(chapter)
        plans = {"perfect": dict.fromkeys(ids, samples.SOLUTION), "untouched": {}}
        for student, answers in plans.items():
            path = subs / student / chapter / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(samples.make_submission(chapter, answers)))
    samples.write_samples(subs / "_demo", ["01_tensors"])
    for student in ("bob", "dave"):
        (subs / student).mkdir()
        (subs / "_demo" / student / "01_tensors").rename(subs / student / "01_tensors")
    import shutil

    shutil.rmtree(subs / "_demo")
    where, solved = pack_wrong_answers(subs, "wrong", sparse=True)
    write_correct_alternatives(subs, "alt")
    work = tmp_path_factory.mktemp("work")
    reports = grade.main(subs, work, jobs=2, device=GRADING_DEVICE)
    return {(r.student, r.chapter): r for r in reports}, where, solved, work


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_solution_scores_full_and_the_release_zero(class_batch, chapter):
    reports, *_ = class_batch
    perfect, untouched = reports[("perfect", chapter)], reports[("untouched", chapter)]
    failed = [(t["grade_id"], t["reason"]) for t in perfect.tests if t["status"] != "passed"]
    assert perfect.score == perfect.max_score > 0 and not failed, failed  # practice tests pass too
    assert untouched.score == 0 and untouched.status == "graded"
    passed = [t["grade_id"] for t in untouched.tests if t["status"] == "passed"]
    assert not passed, f"the release passes {passed}"  # practice tests fail too


@pytest.mark.slow
def test_demo_partial_and_syntax_error_students(class_batch):
    reports, *_ = class_batch
    bob, dave = reports[("bob", "01_tensors")], reports[("dave", "01_tensors")]
    assert 0 < bob.score < bob.max_score
    assert dave.score == 0
    assert any("SyntaxError" in t["reason"] or "not defined" in t["reason"] for t in dave.tests)


def _test_of(chapter: str, answer_id: str) -> str:
    for answer, test in exercises(source(chapter)):
        if cells.grade_id(answer) == answer_id:
            return cells.grade_id(test)
    raise KeyError(answer_id)


@pytest.mark.slow
@pytest.mark.parametrize("case_index", range(len(wrong_cases())), ids=[f"{c}:{x['grade_id']}:{x['mistake'][:40]}" for c, x in wrong_cases()])
def test_a_wrong_answer_loses_its_exercise_with_a_message_naming_the_mistake(class_batch, case_index):
    reports, where, solved, _ = class_batch
    chapter, case = wrong_cases()[case_index]
    assert_it_costs_its_exercise_only(reports[(where[case_index], chapter)], chapter, case, solved[(where[case_index], chapter)])


def assert_it_costs_its_exercise_only(report, chapter: str, case: dict, kept_answers: set[str], engine: str = "fork") -> None:
    """The wrong answer ``case`` fails its test with the reason its fixture names, ending with one of
    its exercise's hints (or a bare status), and the exercises of its submission that hold no mistake
    (``kept_answers``, at least one) keep their points."""
    target = _test_of(chapter, case["grade_id"])
    verdict = next(t for t in report.tests if t["grade_id"] == target)
    assert verdict["status"] != "passed", f"the wrong answer ({case['mistake']}) passed {target} on the {engine} engine"
    assert re.search(case["message"], verdict["reason"]), f"reason {verdict['reason']!r} does not match {case['message']!r}"
    if STATUS_CASE.match(case["message"]):
        assert hints.kind_of(verdict["reason"]) is None, f"{verdict['reason']!r} is not a status"
    else:  # the reason ends with one of its exercise's reviewed hints, not with a bare status
        table = hints.load(project.source_notebook(chapter).parent).get(case["grade_id"], {})
        assert "What to try: " in verdict["reason"] and any(
            verdict["reason"].endswith(hints.LEAD + hint) for hint in table.values()
        ), f"reason {verdict['reason']!r} does not end with a hint of {case['grade_id']}"
    # a mistake costs its own exercise only: the exercises around it without a mistake keep their points
    kept = {_test_of(chapter, gid) for gid in kept_answers}
    lost = [(t["grade_id"], t["reason"]) for t in report.tests if t["grade_id"] in kept and t["status"] != "passed"]
    assert kept and not lost, f"{report.student}: exercises without a mistake lost points next to the wrong answers: {lost}"


@pytest.mark.slow
@pytest.mark.parametrize("case_index", range(len(wrong_cases())), ids=[f"{c}:{x['grade_id']}:{x['mistake'][:40]}" for c, x in wrong_cases()])
def test_a_wrong_answer_fails_on_values_even_when_every_yes_no_is_forged(class_batch, case_index):
    """No point rests on a yes/no the learner's process can fake: judged as a process that says
    every assert held would have it (grader.verdict.judge.judge(forge_yes_no=True)), each known mistake
    still fails its test, on a value its answer produced (the input after the call, a draw from the
    global generator after it, a result computed where the broken rule changes it)."""
    reports, where, _, work = class_batch
    chapter, case = wrong_cases()[case_index]
    student = where[case_index]
    target = _test_of(chapter, case["grade_id"])
    src = source(chapter)
    tests = instrument.chapter_tests(src, project.grading_settings(project.source_notebook(chapter).parent))
    [cache] = (work / "reference").glob(f"{chapter}-*.json")
    refs = json.loads(cache.read_text())["tests"][target]
    graded = read(work / "autograded" / student / chapter / project.source_notebook(chapter).name)
    cell = next(c for c in graded.cells if cells.is_test(c) and cells.grade_id(c) == target)
    status, _ = verdict.judge(cell, refs, tests[target].asserts, forge_yes_no=True)
    rule = tests[target].rule  # or a rule read on its source, out of the process's reach
    broken = rule is not None and rules.violation(graded, rule) is not None
    assert status != verdict.PASSED or broken, f"{case['mistake']!r} passes {target} once its asserts say yes"


CORRECT = Path(__file__).parent / "fixtures" / "correct_answers"


def correct_alternatives(chapter: str) -> dict[str, list[dict]]:
    """Answer grade_id -> the correct answers, in other idioms than the solution, for it."""
    by_id: dict[str, list[dict]] = {}
    for case in json.loads((CORRECT / f"{chapter}.json").read_text(encoding="utf-8")):
        by_id.setdefault(case["grade_id"], []).append(case)
    return by_id


def correct_plans() -> list[tuple[str, int]]:
    """(chapter, k) for every "alt<k>" submission: as many as the chapter's longest list of alternatives."""
    return [(chapter, k) for chapter in CHAPTERS
            for k in range(max(map(len, correct_alternatives(chapter).values())))]


def test_every_exercise_has_two_correct_alternatives_in_other_idioms():
    for chapter in CHAPTERS:
        solutions = {cells.grade_id(c): samples.solution_code(c).strip() for c in source(chapter).cells if cells.is_solution(c)}
        alternatives = correct_alternatives(chapter)
        assert set(alternatives) <= set(solutions), f"{chapter}: unknown grade_ids {sorted(set(alternatives) - set(solutions))}"
        for gid in solutions:
            cases = alternatives.get(gid, [])
            assert len(cases) >= 2, f"{chapter}:{gid} has {len(cases)} correct alternative(s), not 2"
            sources = [c["source"].strip() for c in cases]
            assert solutions[gid] not in sources, f"{chapter}:{gid}: an alternative is the solution itself"
            assert len(set(sources)) == len(sources), f"{chapter}:{gid}: two alternatives are the same code"
            assert all(c["idiom"].strip() for c in cases), f"{chapter}:{gid}: an alternative does not say its idiom"


@pytest.fixture(scope="module")
def correct_batch(class_batch):
    """The "alt<k>" submissions' reports: graded in the fork engine's one batch (:func:`class_batch`)."""
    reports, *_ = class_batch
    return reports


@pytest.mark.slow
@pytest.mark.parametrize(("chapter", "k"), correct_plans(), ids=[f"{c}-alt{k}" for c, k in correct_plans()])
def test_a_correct_answer_in_another_idiom_scores_full_marks(correct_batch, chapter, k):
    report = correct_batch[(f"alt{k}", chapter)]
    failed = [(t["grade_id"], t["reason"]) for t in report.tests if t["status"] != "passed"]
    idioms = {gid: cases[min(k, len(cases) - 1)]["idiom"] for gid, cases in correct_alternatives(chapter).items()}
    assert report.score == report.max_score > 0 and not failed, (  # practice tests pass too
        f"alt{k} of {chapter} scored {report.score}/{report.max_score} ({report.status}: {report.message});"
        f" refused: {failed}; idioms: {idioms}"
    )


def test_fixtures_speak_of_the_answers_only():
    """A fixture's words say what the answer does, never where a file of it once lay."""
    for path in sorted(CORRECT.glob("*.json")) + sorted(WRONG.glob("*.json")):
        for case in json.loads(path.read_text(encoding="utf-8")):
            words = " ".join(str(case.get(k, "")) for k in ("idiom", "mistake"))
            assert not re.search(r"/tmp/|/work/|\.venv", words), f"{path.name}:{case['grade_id']}: {words}"
