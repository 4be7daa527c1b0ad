"""Shared fixtures: a tiny two-exercise course the grader tests run on, and helpers."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
sys.path.insert(0, str(ROOT / "ci"))


@pytest.fixture(autouse=True)
def _close_figures():
    """Each test's matplotlib figures are closed after it (pictures' tests draw many)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture
def mini_solutions(tmp_path: Path) -> Path:
    """A private copy of the mini course's solutions/ (tests may edit it)."""
    dest = tmp_path / "solutions"
    shutil.copytree(MINI, dest)
    return dest


@pytest.fixture
def subs(tmp_path: Path) -> Path:
    """A class of one for the CLI tests: alice's untouched mini chapter (nothing here ever runs it)."""
    import nbformat

    path = tmp_path / "subs" / "alice" / "00_mini" / "mini.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.read(str(MINI / "00_mini" / "mini.ipynb"), as_version=4), str(path))
    return tmp_path / "subs"


@pytest.fixture(scope="session")
def grade_batch(tmp_path_factory):
    """``grade.main`` for the batches of real chapters, their reference runs shared by the session:
    a chapter's solution runs once per engine and options, not once per module. Each workspace
    starts with the references earlier batches of the same options made (the grader takes one
    only where its fingerprint matches: same source, options, engine, grader) and adds its own."""
    store = tmp_path_factory.mktemp("references")

    def run(submissions: Path, workdir: Path, **options):
        from grader import grade

        group = store / "-".join(f"{k}={v}" for k, v in sorted(options.items()) if k != "jobs").replace("/", "_")
        mine = Path(workdir) / "reference"
        if group.is_dir():
            shutil.copytree(group, mine, dirs_exist_ok=True)
        reports = grade.main(submissions, workdir, **options)
        if mine.is_dir():
            shutil.copytree(mine, group, dirs_exist_ok=True)
        return reports

    return run


# -- where the suite's CPU goes: COURSE_CPU_REPORT=FILE make test ---------------------------------
#
# Each test process (each pytest-xdist worker, or the one process) writes, per test file, the CPU
# its tests took, set-ups and teardowns included (a module's batch counts in its file): the
# machine's busy CPU over each test (``/proc/stat``: every process of the machine, killed sandboxes
# and kernels included; a true share only with TEST_JOBS=1 on an otherwise idle machine), and the
# CPU of the test process and of the processes it waited for (kernels and sandboxes killed before
# they reaped theirs are missing). The main process sums them into FILE (JSON), largest first.

_CPU_REPORT = os.environ.get("COURSE_CPU_REPORT")


def _cpu_now() -> tuple[float, float]:
    """(the machine's busy CPU seconds, this process's and its waited-for children's)."""
    import resource

    own, waited = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open("/proc/stat", encoding="ascii") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    return busy, own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


if _CPU_REPORT:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        import json
        import time

        (busy, own), wall = _cpu_now(), time.monotonic()
        yield
        (busy_after, own_after), worker = _cpu_now(), os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{_CPU_REPORT}.{worker}", "a", encoding="utf-8") as f:
            f.write(json.dumps({"file": item.nodeid.split("::")[0], "machine": busy_after - busy,
                                "own": own_after - own, "wall": time.monotonic() - wall}) + "\n")

    def pytest_terminal_summary(terminalreporter, config):
        import collections
        import glob
        import json

        if hasattr(config, "workerinput"):
            return
        machine, own, wall, tests = (collections.Counter() for _ in range(4))
        for part in glob.glob(glob.escape(_CPU_REPORT) + ".*"):
            with open(part, encoding="utf-8") as f:
                for line in f:
                    row = json.loads(line)
                    for total, key in ((machine, "machine"), (own, "own"), (wall, "wall")):
                        total[row["file"]] += row[key]
                    tests[row["file"]] += 1
        rows = [{"file": name, "machine_cpu_s": round(machine[name], 1), "own_cpu_s": round(own[name], 1),
                 "wall_s": round(wall[name], 1), "tests": tests[name]} for name, _ in machine.most_common()]
        with open(_CPU_REPORT, "w", encoding="utf-8") as f:
            json.dump({"machine_cpu_s": round(sum(machine.values()), 1), "own_cpu_s": round(sum(own.values()), 1),
                       "files": rows}, f, indent=1)
        terminalreporter.write_sep("=", f"CPU by test file ({_CPU_REPORT}): machine {sum(machine.values()):.0f} s, "
                                        f"test processes and what they waited for {sum(own.values()):.0f} s")
        for row in rows[:30]:
            terminalreporter.write_line(f"{row['machine_cpu_s']:8.1f} s machine {row['own_cpu_s']:8.1f} s own "
                                        f"{row['wall_s']:8.1f} s wall  {row['file']}")
