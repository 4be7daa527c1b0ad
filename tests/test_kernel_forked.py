"""The kernel engine's kernels, forked from one warm process per batch (grader/engines/kernel/warm.py):
each sees only its own folder, a learner's files survive a restart there, COURSE_KERNEL_FORK=0
starts them fresh, and a warm process that forks no kernel hands over to fresh kernels."""

from __future__ import annotations

import pytest
from test_forkengine import OPTIONS, run, text

from grader.engines.isolation.sandbox import sandbox_level
from grader.engines.kernel import engine as kernel_engine
from grader.engines.kernel import forked

pytestmark = pytest.mark.slow

PEEK = "import os, sys; os.getcwd(), sorted(os.listdir('..')), os.getpid(), os.path.basename(sys.argv[0])"


def test_two_submissions_share_one_warm_process_and_each_kernel_sees_only_its_own_folder():
    if not forked.forks_kernels(OPTIONS):
        pytest.skip("this machine starts every kernel fresh (CUDA, or no nested sandbox)")
    forked.shutdown()
    first = run(PEEK, engine=kernel_engine.execute)
    warm = list(forked._warm.values())
    second = run(PEEK, engine=kernel_engine.execute)
    assert list(forked._warm.values()) == warm and len(warm) == 1  # one warm process, both kernels its
    seen = [eval(text(ex.nb.cells[0]).removeprefix("[execute_result]")) for ex in (first, second)]  # noqa: S307
    for cwd, siblings, pid, argv0 in seen:
        assert cwd.startswith(warm[0].workdir + "/") and argv0 == "ipykernel_launcher.py"
        if sandbox_level() == "nested":  # namespaces of its own (pid 1 their init), no other folder in view
            assert siblings == [cwd.rsplit("/", 1)[1]] and pid == 2
    assert seen[0][0] != seen[1][0]


def test_a_file_a_kernel_wrote_is_still_there_after_it_died():
    ex = run("open('notes.txt', 'w').write('kept')", "import os; os.kill(os.getpid(), 9)",
             "open('notes.txt').read()", engine=kernel_engine.execute)
    assert ex.restarts == 1 and text(ex.nb.cells[2]) == "[execute_result]'kept'"


def test_course_kernel_fork_0_starts_every_kernel_fresh(monkeypatch):
    monkeypatch.setenv("COURSE_KERNEL_FORK", "0")
    assert not forked.forks_kernels(OPTIONS)
    ex = run(PEEK, engine=kernel_engine.execute)
    cwd = eval(text(ex.nb.cells[0]).removeprefix("[execute_result]"))[0]  # noqa: S307
    assert "/course-kernels-" not in cwd and ex.error is None


def test_a_warm_process_that_forks_no_kernel_hands_over_to_fresh_kernels(monkeypatch, caplog):
    if not forked.forks_kernels(OPTIONS):
        pytest.skip("this machine starts every kernel fresh (CUDA, or no nested sandbox)")
    forked.shutdown()

    def refuse(self, request, timeout):
        raise forked.ForkFailed("refused for the test")

    monkeypatch.setattr(forked.WarmProcess, "fork_kernel", refuse)
    with caplog.at_level("WARNING"):
        first = run("6 * 7", engine=kernel_engine.execute)
        second = run("6 * 8", engine=kernel_engine.execute)
    assert text(first.nb.cells[0]) == "[execute_result]42" and first.error is None and first.restarts == 0
    assert text(second.nb.cells[0]) == "[execute_result]48" and second.error is None
    assert sum("no kernel could be forked" in r.getMessage() for r in caplog.records) == 1  # then fresh at once
    forked.shutdown()
