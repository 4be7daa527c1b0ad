"""Fidelity: one misbehaving batch graded by the kernel engine (the reference) and the fork
engine, one and two at a time, and on a Dask cluster, gets identical grades everywhere."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from grader import grade, samples
from grader.release import dumps

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
#: the kernel engine runs once, with two workers, as the reference.
RUNS = {
    "kernel, 2 jobs": {"engine": "kernel", "jobs": 2},
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
    reference = graded["kernel, 2 jobs"]
    assert {s: g[1] for s, g in reference.items()} == EXPECTED_SCORES
    assert all(g[0] == "graded" for g in reference.values())


@pytest.mark.parametrize("name", [n for n in RUNS if n != "kernel, 2 jobs"])
def test_every_engine_and_job_count_gives_identical_grades(graded, name):
    reference, other = graded["kernel, 2 jobs"], graded[name]
    assert other.keys() == reference.keys()
    differ = {s: (reference[s], other[s]) for s in reference if reference[s] != other[s]}
    assert not differ, differ


def test_an_output_off_nbformats_schema_is_cleaned_before_nbclient_sees_it():
    """A kernel's process can publish ``text/plain`` as a list of numbers: nbclient would refuse the
    output and the kernel engine would take the run for a dead kernel (every test "not run")."""
    from grader.engines.kernel import _schema_content

    data = _schema_content("display_data", {"data": {"text/plain": [1, 2], "text/html": {"a": 1}, "image/png": "iVBO",
                                                     "application/vnd.x+json": {"k": [1]}}, "metadata": [1]})
    assert data["data"] == {"image/png": "iVBO", "application/vnd.x+json": {"k": [1]}} and data["metadata"] == {}
    assert _schema_content("stream", {"name": "stdin", "text": [1]}) == {"name": "stdout", "text": ""}
    error = _schema_content("error", {"ename": 3, "evalue": None, "traceback": "x"})
    assert error == {"ename": "3", "evalue": "None", "traceback": []}
    assert _schema_content("display_data", "not a dict") == {}
