"""grader.grade on the mini course: scores, statuses, resuming, manual grades, feedback, CSV."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from grader import cells, grade, samples
from grader.pages import feedback
from grader.prepare.release import dumps
from grader.record import export
from grader.record.gradebook import open_gradebook
from grader.verdict import judge as verdict

pytestmark = pytest.mark.slow

CH = "00_mini"


def put(root: Path, student: str, nb_or_text, name: str = "mini.ipynb") -> Path:
    path = root / student / CH / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb_or_text if isinstance(nb_or_text, str) else dumps(nb_or_text))
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One batch holding every kind of submission, graded once with two workers."""
    tmp = tmp_path_factory.mktemp("grade")
    solutions = tmp / "solutions"
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", solutions)
    subs = tmp / "subs"
    samples.write_samples(subs, solutions_dir=solutions)  # alice, bob, carol, dave
    make = lambda answers: samples.make_submission(CH, answers, solutions_dir=solutions)  # noqa: E731
    S = samples.SOLUTION

    # stderr output (a warning) inside a correct answer must not cost the test
    put(subs, "erin", make({"ex1_double": "import sys\ndef double(x):\n    print('noise', file=sys.stderr)\n    return x * 2", "ex2_row_sums": S}))
    # an editor dropped every cell's nbgrader metadata (as Colab and VS Code can)
    stripped = make({"ex1_double": S, "ex2_row_sums": S})
    for c in stripped.cells:
        c.metadata.pop("nbgrader", None)
        c.metadata.pop("editable", None)
    put(subs, "frank", stripped)
    # the learner deleted a test cell and emptied the other one: both come back from the gradebook
    tampered = make({"ex1_double": "def double(x):\n    return x", "ex2_row_sums": S})
    tampered.cells = [c for c in tampered.cells if cells.grade_id(c) != "test_ex1_double"]
    for c in tampered.cells:
        if cells.grade_id(c) == "test_ex2_row_sums":
            c.source = cells.marker_line("tests", "test_ex2_row_sums") + "\npass"
    put(subs, "gina", tampered)
    put(subs, "hal", "")  # empty file
    put(subs, "ivy", '{"cells": [')  # invalid JSON
    put(subs, "jo", make({"ex1_double": S}), name="mini (1).ipynb")  # renamed by a download
    (subs / "kim").mkdir()  # a student folder with nothing in it
    (subs / "kim" / "notes.txt").write_text("hello")

    work = tmp / "work"
    reports = grade.main(subs, work, jobs=2, solutions_dir=solutions)
    return {"tmp": tmp, "subs": subs, "work": work, "solutions": solutions,
            "reports": {r.student: r for r in reports}}


def statuses(report):
    return {t["grade_id"]: t["status"] for t in report.tests}


def test_sample_class_scores_full_partial_zero_zero(graded):
    r = graded["reports"]
    assert [(s, r[s].score, r[s].max_score) for s in ("alice", "bob", "carol", "dave")] == [
        ("alice", 10.0, 10.0), ("bob", 4.0, 10.0), ("carol", 0.0, 10.0), ("dave", 0.0, 10.0)]
    assert statuses(r["bob"]) == {"test_ex1_double": "passed", "test_ex2_row_sums": "failed"}


def test_failure_reasons_name_the_error(graded):
    r = graded["reports"]
    assert {t["reason"] for t in r["carol"].tests} == {verdict.UNANSWERED}
    assert verdict.UNANSWERED.startswith("not answered yet")
    assert "syntax error in cell" in r["dave"].message, "the instructor's table says why dave scored 0"
    dave = {t["grade_id"]: t["reason"] for t in r["dave"].tests}
    assert dave["test_ex1_double"].startswith("your answer cell has a syntax error at line ")


def test_stderr_output_does_not_zero_a_test(graded):
    assert graded["reports"]["erin"].score == 10.0


def test_cells_without_nbgrader_metadata_are_recognised_by_their_markers(graded):
    assert graded["reports"]["frank"].score == 10.0


def test_deleted_and_emptied_test_cells_are_restored_and_run(graded):
    gina = graded["reports"]["gina"]
    assert statuses(gina) == {"test_ex1_double": "failed", "test_ex2_row_sums": "passed"}
    assert "values differ" in gina.tests[0]["reason"]


def test_broken_files_get_a_clear_status_and_a_zero(graded):
    r = graded["reports"]
    assert (r["hal"].status, r["hal"].message) == ("unreadable", "the file is empty")
    assert r["ivy"].status == "unreadable" and "not valid JSON" in r["ivy"].message
    assert r["hal"].score == 0 and r["hal"].max_score == 10


def test_a_renamed_notebook_is_graded_and_noted(graded):
    jo = graded["reports"]["jo"]
    assert jo.score == 4.0 and "mini (1).ipynb" in jo.message


def test_a_folder_without_a_chapter_gets_a_status_line(graded):
    kim = graded["reports"]["kim"]
    assert kim.status == "missing" and "notes.txt" in kim.message


def test_grades_csv_has_a_row_per_student(graded):
    path = export.write_grades_csv(grade.Workspace(graded["work"]).default_db_url(), graded["tmp"] / "g.csv")
    rows = {row["student_id"]: row for row in csv.DictReader(path.open())}
    assert rows["alice"][CH] == "10" and rows["bob"][CH] == "4" and rows["hal"][CH] == "0"
    assert rows["alice"]["max_total"] == "10"
    assert rows["kim"][CH] == "0", "a student whose folder holds no chapter still gets a row"


def test_feedback_shows_reasons_but_never_hidden_tests(graded):
    pages = feedback.main(graded["work"], solutions_dir=graded["solutions"])
    bob = (feedback.feedback_dir(graded["work"]) / "bob" / CH / "mini.html").read_text()
    assert len(pages) == len(list((graded["work"] / "results").glob("*/*.json")))
    assert "test_ex2_row_sums" in bob and "NotImplementedError" in bob and "Score: 4 / 10" in bob
    for page in pages:
        text = page.read_text()
        assert "HIDDEN" not in text and "arange(5)" not in text and "3x4" not in text


def test_a_rerun_is_idempotent_and_uses_the_recorded_results(graded):
    again = {r.student: r for r in grade.main(graded["subs"], graded["work"], jobs=2, solutions_dir=graded["solutions"])}
    assert all(r.cached for s, r in again.items() if r.status == "graded")
    assert {s: r.score for s, r in again.items()} == {s: r.score for s, r in graded["reports"].items()}


def test_the_same_submissions_copied_elsewhere_are_not_graded_again(graded, tmp_path):
    copy = tmp_path / "copied-subs"
    shutil.copytree(graded["subs"], copy)
    again = grade.main(copy, graded["work"], jobs=2, solutions_dir=graded["solutions"])
    assert all(r.cached for r in again if r.status == "graded"), [r.student for r in again if not r.cached]


def test_a_manual_grade_survives_regrading(graded):
    url = grade.Workspace(graded["work"]).default_db_url()
    with open_gradebook(url) as gb:
        g = gb.find_grade("test_ex2_row_sums", "mini", CH, "carol")
        g.manual_score = 5
        gb.db.commit()
    again = grade.main(graded["subs"], graded["work"], jobs=1, force=True, solutions_dir=graded["solutions"])
    carol = next(r for r in again if r.student == "carol")
    assert carol.score == 5.0
    with open_gradebook(url) as gb:
        g = gb.find_grade("test_ex2_row_sums", "mini", CH, "carol")
        assert (g.auto_score, g.manual_score, g.needs_manual_grade) == (0.0, 5.0, True)


def test_results_are_written_as_json_per_submission(graded):
    data = json.loads((graded["work"] / "results" / "alice" / f"{CH}.json").read_text())
    assert data["status"] == "graded" and data["score"] == 10.0 and len(data["fingerprint"]) == 32
    autograded = nbformat.read(str(graded["work"] / "autograded" / "alice" / CH / "mini.ipynb"), as_version=4)
    assert autograded.cells[0].source.startswith("[![Open In Colab]"), "the notebook's own cells are intact"
    assert not any("__course_guard" in c.source for c in autograded.cells), "grader probes leave no trace"


def test_a_killed_batch_resumes_to_the_same_grades(graded, tmp_path):
    """Kill the grader (and its kernels) mid-batch, run it again: same grades as uninterrupted."""
    import signal
    import subprocess
    import sys
    import time

    subs = tmp_path / "subs"
    # as many as make the batch outlast the recorder's first transaction (its wait, at the fork engine's pace)
    of = {f"{student}{k or ''}": student for k in range(3) for student in ("alice", "bob", "carol", "dave", "erin", "frank")}
    for student, original in of.items():
        shutil.copytree(graded["subs"] / original, subs / student)
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "grader.cli.app", "grade", str(subs), "--workdir", str(work), "--jobs", "1",
           "--solutions", str(graded["solutions"])]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and len(list((work / "results").glob("*/*.json"))) < 2:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list((work / "results").glob("*/*.json")))
    assert 2 <= done_before < len(of), "the kill did not land mid-batch"
    again = grade.main(subs, work, jobs=2, solutions_dir=graded["solutions"])
    assert sum(r.cached for r in again) == done_before
    assert {r.student: r.score for r in again} == {s: graded["reports"][of[s]].score for s in of}


@pytest.mark.parametrize("engine", ["fork", "kernel"])
def test_ctrl_c_stops_the_batch_in_one_line_and_a_rerun_resumes(graded, tmp_path, engine):
    """Ctrl-C reaches the whole foreground process group: the grader stops at once with exit 130 and one
    line saying how far it got (no traceback, no AttributeError from concurrent.futures), and resumes."""
    import signal
    import subprocess
    import sys
    import time

    # as many as make the batch outlast the recorder's first transaction (up to 4 results per worker):
    # both engines' submissions come fast enough (forked kernels too) that 8 could all land in it
    copies = 3
    of = {f"{student}{k or ''}": student for k in range(copies)
          for student in ("alice", "bob", "carol", "dave", "erin", "frank", "gina", "jo")}
    students = tuple(of)
    subs = tmp_path / "subs"
    for student in students:
        shutil.copytree(graded["subs"] / of[student], subs / student)
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "grader.cli.app", "grade", str(subs), "--workdir", str(work), "--jobs", "2",
           "--engine", engine, "--solutions", str(graded["solutions"])]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal has it
    deadline = time.time() + 240
    while time.time() < deadline and len(list((work / "results").glob("*/*.json"))) < 2:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    interrupted = time.time()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert time.time() - interrupted < 30, "the batch did not stop at once"
    assert "Traceback" not in err and "AttributeError" not in err, err[-3000:]
    done_before = len(list((work / "results").glob("*/*.json")))
    assert 2 <= done_before < len(students), "the interrupt did not land mid-batch"
    last = err.strip().splitlines()[-1]
    assert last == (f"error: interrupted: {done_before} of {len(students)} submission(s) graded in this run, "
                    "their results recorded; rerun the same command to resume"), err[-3000:]
    again = grade.main(subs, work, jobs=2, engine=engine, solutions_dir=graded["solutions"])
    assert sum(r.cached for r in again) == done_before
    assert {r.student: r.score for r in again} == {s: graded["reports"][of[s]].score for s in students}


def test_an_interrupt_while_a_result_is_recorded_stops_the_workers_at_once(graded, tmp_path):
    """Ctrl-C can land in the coordinator's own work (recording, the progress bar), outside the
    dispatcher: the worker pool is stopped then too, not when the interpreter exits after the
    queued submissions have run."""
    import multiprocessing
    import time

    from grader.exceptions import Interrupted

    subs = tmp_path / "subs"
    for student in ("alice", "bob", "carol", "dave", "erin", "frank"):
        shutil.copytree(graded["subs"] / student, subs / student)
    seen = []

    def progress(report) -> None:
        seen.append(report)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted, match=r"^interrupted: 2 of 6 submission\(s\) graded in this run"):
        grade.main(subs, tmp_path / "work", jobs=2, engine="kernel", solutions_dir=graded["solutions"],
                   on_progress=progress)
    deadline = time.time() + 10
    while multiprocessing.active_children() and time.time() < deadline:
        time.sleep(0.1)
    assert multiprocessing.active_children() == []


def test_an_lms_zip_is_graded_like_a_folder(graded, tmp_path):
    import zipfile

    zp = tmp_path / "canvas.zip"
    with zipfile.ZipFile(zp, "w") as z:
        z.write(graded["subs"] / "alice" / CH / "mini.ipynb", "alicesmith_11_21_mini.ipynb")
        z.write(graded["subs"] / "bob" / CH / "mini.ipynb", "bobjones_LATE_12_22_mini-1.ipynb")
        z.writestr("bobjones_12_23_notes.txt", "extra")
    every = grade.main(zp, tmp_path / "w", jobs=2, solutions_dir=graded["solutions"])
    reports = {r.student: r for r in every if r.status == "graded"}  # students keyed by Canvas's user id
    assert {s: (r.name, r.score) for s, r in reports.items()} == {"canvas-11": ("alicesmith", 10.0),
                                                                  "canvas-12": ("bobjones", 4.0)}
    assert [(r.student, r.status) for r in every if r.status != "graded"] == [("canvas-12", "skipped")]  # notes.txt
    assert reports["canvas-12"].late and not reports["canvas-11"].late
    from grader.record import export

    rows = {r["student_id"]: r for r in csv.DictReader(export.write_grades_csv(
        grade.Workspace(tmp_path / "w").default_db_url(), tmp_path / "g.csv", workdir=tmp_path / "w").open())}
    assert (rows["canvas-12"]["late"], rows["canvas-11"]["late"]) == (CH, ""), "lateness reaches the LMS's CSV"
    assert (rows["canvas-12"]["student_name"], rows["canvas-11"]["student_name"]) == ("bobjones", "alicesmith")


def test_what_a_fork_server_preloads_never_makes_a_recorded_result_stale(mini_solutions):
    """Batches of other chapters preload other modules: a result recorded in one is still valid in
    the next (no re-grade, no "graded with other options"); a fork engine's reference is redone."""
    import dataclasses

    from grader.engines.execution import ExecOptions
    from grader.record import fingerprints
    from grader.verdict import reference

    source = next(mini_solutions.glob("*/*.ipynb"))
    plain = ExecOptions()
    preloaded = dataclasses.replace(plain, preload=["torch._dynamo"])
    assert fingerprints.result_key(b"{}", source, plain) == fingerprints.result_key(b"{}", source, preloaded)
    assert reference.options_key(dataclasses.asdict(plain)) == reference.options_key(dataclasses.asdict(preloaded))
    assert reference.fingerprint(source, plain, "kernel", "r") == reference.fingerprint(source, preloaded, "kernel", "r")
    assert reference.fingerprint(source, plain, "fork", "r") != reference.fingerprint(source, preloaded, "fork", "r")


def test_a_result_key_worked_out_once_per_chapter_is_the_key_results_were_recorded_with(mini_solutions):
    """A batch hashes each chapter's source once for all its submissions: the keys are those the
    workspace's recorded results carry (each part hashed, then the hashes), so nothing is graded again."""
    import dataclasses
    import hashlib

    from grader.engines.execution import ExecOptions, options_key
    from grader.record import fingerprints

    source = next(mini_solutions.glob("*/*.ipynb"))
    options, raw = ExecOptions(cell_timeout=30), b'{"cells": []}'
    settings = source.parent / "grading.toml"
    parts = [raw, source.read_bytes(), options_key(dataclasses.asdict(fingerprints.chapter_options(options, source.parent))),
             fingerprints.GRADER_REVISION.encode(), settings.read_bytes() if settings.is_file() else b""]
    recorded = hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).hexdigest()[:32]
    once = fingerprints.chapter_part(source, options)
    assert fingerprints.result_key(raw, source, options) == recorded
    assert fingerprints.result_key(raw, source, options, once) == recorded
    assert fingerprints.result_key(b"{}", source, options, once) != recorded


def test_a_workspace_graded_without_preload_takes_a_batch_that_preloads(tmp_path, mini_solutions):
    """What the workspace remembers of a chapter-01 batch, read back by a chapter-08 batch: the
    same options, so its recorded results are neither "graded with other options" nor stale."""
    import dataclasses

    from grader.engines.execution import NOT_GRADING, ExecOptions
    from grader.intake.workspace import Workspace
    from grader.record import fingerprints

    source = next(mini_solutions.glob("*/*.ipynb"))
    ws = Workspace(tmp_path / "work")
    ws.root.mkdir()
    first = ExecOptions(cell_timeout=30)
    ws.remember(grading={"engine": "fork", **{k: v for k, v in dataclasses.asdict(first).items() if k not in NOT_GRADING}})
    assert "preload" not in ws.settings()["grading"]
    later = dataclasses.replace(first, preload=["torch._dynamo", "sklearn.datasets"])
    before = fingerprints.remembered_options(ws, later)
    assert before == later
    assert fingerprints.result_key(b"{}", source, before) == fingerprints.result_key(b"{}", source, first)


def test_a_chapters_grading_toml_sets_its_timeout_and_memory_and_nothing_else(tmp_path):
    from grader.engines.execution import ExecOptions

    base = ExecOptions(cell_timeout=60, memory_mb=2048)
    assert grade.chapter_options(base, tmp_path) is base  # no grading.toml
    (tmp_path / "grading.toml").write_text('cell_timeout = 120\nmemory_mb = 3072\npreload = ["torch._dynamo"]\n')
    got = grade.chapter_options(base, tmp_path)
    assert (got.cell_timeout, got.memory_mb, got.preload) == (120, 3072, [])


def test_a_solution_that_fails_here_costs_no_learner_a_point_and_a_later_run_grades_them(tmp_path, mini_solutions):
    """The solution's run can fail for a cause in the machine, not the source: a memory cap or a
    GPU that does not work (both seen on a GPU machine). Its tests then judge nobody: the
    submission is an error, not a lower grade, the broken reference is not kept, and the next run,
    once the cause is gone, grades it without --force."""
    fixed = tmp_path / "fixed"  # the "machine problem" lasts while this file is missing
    source = next(mini_solutions.glob("*/*.ipynb"))
    nb = nbformat.read(str(source), as_version=4)
    test = next(c for c in nb.cells if cells.grade_id(c) == "test_ex1_double")
    test.source = test.source.replace(
        "### BEGIN HIDDEN TESTS",
        f"### BEGIN HIDDEN TESTS\nimport os\nif not os.path.exists({str(fixed)!r}):\n    raise MemoryError()", 1)
    nbformat.write(nb, str(source))
    subs, work = tmp_path / "subs", tmp_path / "work"
    answers = dict.fromkeys(samples.answer_ids(CH, mini_solutions), samples.SOLUTION)
    put(subs, "alice", samples.make_submission(CH, answers, solutions_dir=mini_solutions))

    (first,) = grade.main(subs, work, jobs=1, solutions_dir=mini_solutions, isolate=False)
    assert first.status == "error"
    assert "not graded in full" in first.message and "test_ex1_double" in first.message
    assert [t["status"] for t in first.tests if t["grade_id"] == "test_ex1_double"] == ["no reference"]
    assert not list((work / "reference").glob("*.json"))  # not kept for the next batch
    assert export.errors(work) == [("alice", CH)]
    from click.testing import CliRunner

    from grader.cli.app import cli

    said = CliRunner().invoke(cli, ["export", "--workdir", str(work)])
    assert said.exit_code == 0 and "warning: 1 submission(s) not graded" in said.output
    assert "did not pass test_ex1_double when run here (1: alice/00_mini)" in said.output

    fixed.touch()
    (again,) = grade.main(subs, work, jobs=1, solutions_dir=mini_solutions, isolate=False)
    assert again.status == "graded" and not again.cached
    assert again.score == again.max_score > 0
    assert list((work / "reference").glob("*.json"))
    assert export.errors(work) == []


def test_no_submission_runs_before_every_solution_has_and_the_solutions_run_side_by_side(tmp_path, mini_solutions,
                                                                                        monkeypatch):
    """The fork engine runs the chapters' solutions in threads (as many at once as --jobs) while the
    coordinator prepares submissions; a learner's notebook starts only once every solution's run ended."""
    import threading
    import time

    from grader.engines.execution import Execution
    from grader.engines.fork import pool as forkpool
    from grader.execute import watchdog

    shutil.copytree(mini_solutions / CH, mini_solutions / "01_twin")  # a second chapter
    subs = tmp_path / "subs"
    samples.write_samples(subs, solutions_dir=mini_solutions)
    runs, prepared = [], []
    both = threading.Barrier(2)

    def slow_solutions(nb, options, engine):  # stands in for the fork engine; nothing real runs
        kind = "solution" if threading.current_thread().name.startswith("reference") else "learner"
        start = time.monotonic()
        if kind == "solution":  # no timing to race with a busy machine: each run waits for what must come meanwhile
            try:
                both.wait(timeout=30)  # the other solution's run starts while this one runs
            except threading.BrokenBarrierError:
                pass  # it did not: the assertion below says so
            deadline = time.monotonic() + 30
            while not prepared and time.monotonic() < deadline:  # the coordinator prepares meanwhile
                time.sleep(0.01)
        runs.append((kind, start, time.monotonic()))
        return Execution(nb=nb)

    real_prepare = grade.prepare
    monkeypatch.setattr(watchdog, "execute_notebook", slow_solutions)
    monkeypatch.setattr(forkpool, "prestart", lambda *a, **k: None)
    monkeypatch.setattr(grade, "prepare", lambda *a, **k: prepared.append(time.monotonic()) or real_prepare(*a, **k))
    grade.main(subs, tmp_path / "work", jobs=2, engine="fork", solutions_dir=mini_solutions)
    solutions = [(s, e) for kind, s, e in runs if kind == "solution"]
    learners = [s for kind, s, _ in runs if kind == "learner"]
    assert len(solutions) == 2 and len(learners) == 8
    assert min(learners) >= max(e for _, e in solutions), "a submission ran before a solution's run ended"
    assert max(s for s, _ in solutions) < min(e for _, e in solutions), "the two solutions ran one after the other"
    assert len(prepared) == 8 and min(prepared) < min(e for _, e in solutions), "nothing was prepared meanwhile"


def test_a_practice_exercise_is_graded_for_feedback_and_counts_for_nothing(tmp_path, mini_solutions):
    """A practice exercise (tagged optional, its test worth 0) runs and says passed or failed with its
    reason, and counts for nothing: the score, its maximum and the grades CSV hold the core exercises
    only; its page says "practice, not counted" where points go, and the class report never lists it
    among the hardest tests."""
    from dataclasses import asdict

    from grader.pages import report_tables

    src = next(mini_solutions.glob("*/*.ipynb"))
    nb = nbformat.read(str(src), as_version=4)
    for c in nb.cells:
        if cells.grade_id(c) in ("ex2_row_sums", "test_ex2_row_sums") or c.source.startswith("## Exercise 2"):
            cells.add_tag(c, cells.OPTIONAL)
            if cells.is_test(c):
                c.metadata.nbgrader["points"] = 0
    nbformat.write(nb, str(src))
    subs, work = tmp_path / "subs", tmp_path / "work"
    S = samples.SOLUTION
    plans = {"all": {"ex1_double": S, "ex2_row_sums": S}, "core": {"ex1_double": S}, "practice": {"ex2_row_sums": S},
             "none": {}}
    for student, answers in plans.items():
        put(subs, student, samples.make_submission(CH, answers, solutions_dir=mini_solutions))
    reports = {r.student: r for r in grade.main(subs, work, jobs=1, solutions_dir=mini_solutions, isolate=False)}
    assert {s: (r.score, r.max_score) for s, r in reports.items()} == {
        "all": (4, 4), "core": (4, 4), "practice": (0, 4), "none": (0, 4)}
    assert [statuses(reports[s])["test_ex2_row_sums"] for s in ("all", "practice")] == ["passed", "passed"]
    unanswered = next(t for t in reports["core"].tests if t["grade_id"] == "test_ex2_row_sums")
    assert unanswered["status"] != "passed" and unanswered["reason"].startswith("not answered yet")
    rows = {row["student_id"]: row for row in csv.DictReader(
        export.write_grades_csv(grade.Workspace(work).default_db_url(), tmp_path / "g.csv").open())}
    assert [rows[s][CH] for s in plans] == ["4", "4", "0", "0"] and rows["all"]["max_total"] == "4"

    page = feedback.summary_html(asdict(reports["practice"]))
    assert "Score: 0 / 4" in page and "Practice exercises: 1 of 1 passed" in page
    assert feedback.PRACTICE in page and "0 / 0" not in page
    line = feedback.verdict_line(unanswered)
    assert feedback.PRACTICE in line and "points" not in line.split(":")[0]
    [stats] = report_tables.chapter_stats([asdict(r) for r in reports.values()])
    assert [t.grade_id for t in stats.hardest] == ["test_ex1_double"]
