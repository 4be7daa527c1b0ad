"""Fidelity: one misbehaving batch graded by the kernel engine (the reference) and the fork
engine, one and two at a time, and on a Dask cluster, gets identical grades everywhere."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from grader import grade, samples
from grader.prepare.release import dumps

pytestmark = pytest.mark.slow

CH = "00_mini"
S = samples.SOLUTION
#: exercise-1 answers, beside the demo class's perfect, partial, untouched and syntax-error notebooks
BODY = "import sys\nimport torch\n\ndef double(x):\n"
MISBEHAVIOURS = {
    "loop": BODY + "    while True:\n        pass",
    "stubborn_loop": BODY + "    import time\n    while True:\n        try:\n            time.sleep(100)\n"
                            "        except KeyboardInterrupt:\n            pass",
    "memory_bomb": BODY + "    hog = torch.empty(10**11)\n    return x * 2",
    "os_exit": BODY + "    import os\n    os._exit(1)",
    "input": BODY + "    return x * int(input('factor? '))",
    "runtime_cheat": "import importlib\n_m = importlib.import_module('course_utils.checks')\n"
                     "vars(_m)['check_tensor'] = lambda *a, **k: None\n\ndef double(x):\n    return x",
    "static_cheat": "import torch\ntorch.allclose = lambda *a, **k: True\n\ndef double(x):\n    return x",
    "breaks_the_kernel": "import builtins\nbuiltins.isinstance = lambda *a: True\n\ndef double(x):\n    return x",
}
EXPECTED_SCORES = {
    "alice": 10, "bob": 4, "carol": 0, "dave": 0, "loop": 6, "stubborn_loop": 6, "memory_bomb": 6, "os_exit": 6,
    # a patch of torch.allclose costs only the exercise it fails: no check relies on it, and what
    # the scan notices is a note, never a score; the runtime cheat's patch breaks both tests' checks
    "input": 6, "runtime_cheat": 0, "static_cheat": 6, "breaks_the_kernel": 6, "dies_midway": 4,
}
#: name -> grade.main options. Job counts are engine-independent (workers only run run_one), so
#: the kernel engine runs once, with four workers (its misbehaving submissions mostly wait), as the reference.
RUNS = {
    "kernel, 4 jobs": {"engine": "kernel", "jobs": 4},
    "fork, 1 job": {"engine": "fork", "jobs": 1},
    "fork, 2 jobs": {"engine": "fork", "jobs": 2},
    "fork on a Dask LocalCluster": {"engine": "fork", "dask": True},
}


def grades(reports) -> dict:
    """Everything a grade consists of: status, score and each test's status and reason."""
    return {r.student: (r.status, r.score, tuple((t["grade_id"], t["status"], t["reason"]) for t in r.tests))
            for r in reports}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("engines")
    solutions = tmp / "solutions"
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", solutions)
    subs = tmp / "subs"
    samples.write_samples(subs, solutions_dir=solutions)
    for name, answer in MISBEHAVIOURS.items():
        nb = samples.make_submission(CH, {"ex1_double": answer, "ex2_row_sums": S}, solutions_dir=solutions)
        (subs / name / CH).mkdir(parents=True)
        (subs / name / CH / "mini.ipynb").write_text(dumps(nb))
    dies = samples.make_submission(CH, {"ex1_double": S, "ex2_row_sums": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"},
                                   solutions_dir=solutions)
    (subs / "dies_midway" / CH).mkdir(parents=True)
    (subs / "dies_midway" / CH / "mini.ipynb").write_text(dumps(dies))
    return {"tmp": tmp, "subs": subs, "solutions": solutions}


def _grade(batch, name: str, options: dict):
    work = batch["tmp"] / name.replace(" ", "_").replace(",", "")
    options = dict(options)
    if options.pop("dask", False):
        distributed = pytest.importorskip("distributed")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                      memory_limit=0, silence_logs=logging.ERROR) as cluster:
            return grade.main(batch["subs"], work, cell_timeout=3, solutions_dir=batch["solutions"],
                              scheduler=cluster.scheduler_address, **options)
    return grade.main(batch["subs"], work, cell_timeout=3, solutions_dir=batch["solutions"], **options)


@pytest.fixture(scope="module")
def graded(batch):
    return {name: grades(_grade(batch, name, options)) for name, options in RUNS.items()}


def test_the_reference_run_scores_every_behaviour_as_expected(graded):
    reference = graded["kernel, 4 jobs"]
    assert {s: g[1] for s, g in reference.items()} == EXPECTED_SCORES
    assert all(g[0] == "graded" for g in reference.values())


@pytest.mark.parametrize("name", [n for n in RUNS if n != "kernel, 4 jobs"])
def test_every_engine_and_job_count_gives_identical_grades(graded, name):
    reference, other = graded["kernel, 4 jobs"], graded[name]
    assert other.keys() == reference.keys()
    differ = {s: (reference[s], other[s]) for s in reference if reference[s] != other[s]}
    assert not differ, differ


def test_an_output_off_nbformats_schema_is_cleaned_before_nbclient_sees_it():
    """A kernel's process can publish ``text/plain`` as a list of numbers: nbclient would refuse the
    output and the kernel engine would take the run for a dead kernel (every test "not run")."""
    from grader.engines.kernel.client import _schema_content

    data = _schema_content("display_data", {"data": {"text/plain": [1, 2], "text/html": {"a": 1}, "image/png": "iVBO",
                                                     "application/vnd.x+json": {"k": [1]}}, "metadata": [1]})
    assert data["data"] == {"image/png": "iVBO", "application/vnd.x+json": {"k": [1]}} and data["metadata"] == {}
    assert _schema_content("stream", {"name": "stdin", "text": [1]}) == {"name": "stdout", "text": ""}
    error = _schema_content("error", {"ename": 3, "evalue": None, "traceback": "x"})
    assert error == {"ename": "3", "evalue": "None", "traceback": []}
    assert _schema_content("display_data", "not a dict") == {}


# --- a stalled execution never hangs the batch ------------------------------------------------

STALL_MARK = "# the engine stalls on this one"


def _stall_batch(tmp_path: Path) -> tuple[Path, Path]:
    solutions = tmp_path / "solutions"
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", solutions)
    subs = tmp_path / "subs"
    samples.write_samples(subs, solutions_dir=solutions)
    nb = samples.make_submission(CH, {"ex1_double": STALL_MARK + "\n" + BODY + "    return x * 2", "ex2_row_sums": S},
                                 solutions_dir=solutions)
    (subs / "aaron" / CH).mkdir(parents=True)  # first: the others run (or wait) beside it
    (subs / "aaron" / CH / "mini.ipynb").write_text(dumps(nb))
    return subs, solutions


def _stalling_engine(stopped: list):
    """An engine that returns at once (nothing runs), except on the marked submission, where it
    waits for ever -- until the grader fires the stop hook it registered."""
    import threading

    from grader.engines.execution import Execution, on_stop

    def engine(nb, options):
        if any(STALL_MARK in c.source for c in nb.cells):
            woken = threading.Event()
            on_stop(woken.set)
            woken.wait()
            stopped.append(True)
            raise RuntimeError("killed")  # what an engine meets once its kernels are dead
        return Execution(nb=nb)

    return engine


@pytest.mark.parametrize("engine, jobs", [("kernel", 1), ("fork", 2)])
def test_a_stalled_execution_is_stopped_and_recorded_and_the_batch_completes(tmp_path, monkeypatch, engine, jobs):
    import time

    from grader.engines.fork import engine as fork
    from grader.engines.fork import pool as forkpool
    from grader.execute import watchdog

    stopped: list = []
    monkeypatch.setattr(watchdog, "execute", _stalling_engine(stopped))
    monkeypatch.setattr(fork, "execute", _stalling_engine(stopped))
    monkeypatch.setattr(forkpool, "prestart", lambda *a, **k: None)
    monkeypatch.setattr(watchdog, "stall_limit", lambda options: 1.5)
    subs, solutions = _stall_batch(tmp_path)
    start = time.monotonic()
    reports = {r.student: r for r in grade.main(subs, tmp_path / "work", jobs=jobs, engine=engine, solutions_dir=solutions)}
    assert time.monotonic() - start < 60
    stuck = reports.pop("aaron")
    assert stuck.status == "error" and watchdog.STALLED in stuck.message, stuck.message
    assert all(t["status"] == "not run" for t in stuck.tests)
    assert {r.status for r in reports.values()} == {"graded"} and len(reports) == 4
    deadline = time.monotonic() + 5
    while not stopped and time.monotonic() < deadline:  # the engine's own stop hook was fired
        time.sleep(0.05)
    assert stopped == [True]


def test_a_wedged_worker_process_is_killed_by_the_coordinator_and_the_others_run_again(tmp_path, monkeypatch):
    """The kernel engine's submissions run in worker processes; one whose process does not answer at
    all (its own watch included) is killed from the coordinator, and the submissions the broken pool
    took with it are run again."""
    import sys
    import time

    from grader.execute import dispatch

    helper = tmp_path / "wedge_helper.py"
    helper.write_text(
        "import time\n"
        f"MARK = {STALL_MARK!r}\n"
        "def job(payload, token, started):\n"
        "    nb = payload[0]\n"
        "    if any(MARK in c.source for c in nb.cells):\n"
        "        import os, signal\n"
        "        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
        "        open(f'{started}/{token}', 'w').write(str(os.getpid()))\n"
        f"        open({str(tmp_path / 'wedged.pid')!r}, 'w').write(str(os.getpid()))\n"
        "        while True:\n"
        "            time.sleep(1)\n"
        f"    open({str(tmp_path / 'runs.txt')!r}, 'a').write('run\\n')\n"
        "    time.sleep(1.0)  # still running when the pool is killed: run again in the fresh one\n"
        "    from grader.engines.execution import Execution\n"
        "    return Execution(nb=nb).nb, {'timed_out': [], 'died': [], 'not_run_from': None, 'tampered': {},\n"
        "                                 'restarts': 0, 'error': None, 'cell_timeout': 3}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import wedge_helper

    monkeypatch.setattr(dispatch, "_pool_job", wedge_helper.job)
    monkeypatch.setattr(dispatch, "stall_limit", lambda options: 1.0)
    monkeypatch.setattr(dispatch, "BACKSTOP", 1.0)
    monkeypatch.setattr(dispatch, "TICK", 0.2)
    monkeypatch.setattr(grade.reference, "run_all", lambda chapters, *a, **k: ({c: {} for c in chapters}, []))
    subs, solutions = _stall_batch(tmp_path)
    start = time.monotonic()
    reports = {r.student: r for r in grade.main(subs, tmp_path / "work", jobs=2, engine="kernel", solutions_dir=solutions)}
    assert time.monotonic() - start < 120
    stuck = reports.pop("aaron")
    assert stuck.status == "error" and dispatch.STALLED in stuck.message, stuck.message
    assert len(reports) == 4 and not any(dispatch.STALLED in (r.message or "") for r in reports.values())
    assert sys.modules.get("wedge_helper") is wedge_helper
    assert len((tmp_path / "runs.txt").read_text().split()) > 4, "no submission was taken down and run again"
    wedged = int((tmp_path / "wedged.pid").read_text())
    assert not Path(f"/proc/{wedged}").exists() or Path(f"/proc/{wedged}/stat").read_text().split(") ")[1][0] == "Z"


def test_the_kernel_engine_runs_the_chapters_solutions_at_once_as_the_fork_engine_does(tmp_path, monkeypatch):
    """With the kernel engine the solutions' runs went one after the other, before any submission
    started: with the sample class's 8 chapters on CUDA, 8 fresh kernels in a row, each importing a
    CUDA build of torch and starting CUDA, before the first of 32 submissions."""
    import threading
    import time

    from grader.engines.execution import Execution
    from grader.execute import dispatch, watchdog

    solutions = tmp_path / "solutions"
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", solutions)
    shutil.copytree(solutions / CH, solutions / "01_twin")  # a second chapter
    subs = tmp_path / "subs"
    samples.write_samples(subs, solutions_dir=solutions)
    runs = []

    def slow_solutions(nb, options, engine):  # nothing real runs
        start = time.monotonic()
        time.sleep(0.5)
        runs.append((threading.current_thread().name, start, time.monotonic()))
        return Execution(nb=nb)

    def in_process(todo, jobs, engine, scheduler=None, on_idle=None):
        for sub, nb, fp, options, findings in todo:
            yield sub, fp, watchdog.run_one((nb, options, findings, engine))

    monkeypatch.setattr(watchdog, "execute_notebook", lambda nb, options, engine: (
        slow_solutions(nb, options, engine) if threading.current_thread().name.startswith("reference")
        else Execution(nb=nb)))
    monkeypatch.setattr(dispatch, "execute_all", in_process)
    grade.main(subs, tmp_path / "work", jobs=2, engine="kernel", solutions_dir=solutions)
    assert len(runs) == 2
    (_, s1, e1), (_, s2, e2) = runs
    assert max(s1, s2) < min(e1, e2), "the two solutions ran one after the other"
