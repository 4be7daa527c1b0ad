"""grader.verdict.reference.run_all: the chapters' solutions run side by side; a failure is logged unless the grader is stopping."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from grader.engines.execution import ExecOptions
from grader.verdict import reference

CHAPTERS = {"01_a": (Path("a.ipynb"), ExecOptions()), "02_b": (Path("b.ipynb"), ExecOptions())}


def _failing_runs(monkeypatch, release: threading.Event, done: threading.Event) -> None:
    """Each solution's run waits for ``release``, then fails (as one does when its server is stopped)."""
    finished = []

    def run(chapter, *args, **kwargs):
        try:
            release.wait(10)
            raise RuntimeError(f"{chapter}: the solution notebook could not be run: the grader stopped its fork servers")
        finally:
            finished.append(chapter)
            if len(finished) == len(CHAPTERS):
                done.set()

    monkeypatch.setattr(reference, "run", run)


def test_a_solution_that_fails_is_logged_and_costs_its_chapter_only(monkeypatch, caplog):
    release, done = threading.Event(), threading.Event()
    release.set()
    _failing_runs(monkeypatch, release, done)
    items = iter(range(3))
    with caplog.at_level(logging.ERROR, logger="grader.verdict.reference"):
        found, taken = reference.run_all(CHAPTERS, "fork", "r", Path("."), threads=2, meanwhile=items)
    assert found == {"01_a": {}, "02_b": {}}
    assert taken + list(items) == [0, 1, 2], "what was prepared meanwhile is handed back, nothing lost"
    assert sorted(r.getMessage().split(" failed")[0] for r in caplog.records) == [
        "the reference run of 01_a", "the reference run of 02_b"]


def test_ctrl_c_while_the_solutions_run_leaves_no_error_behind_the_graders_last_line(monkeypatch, caplog):
    """Ctrl-C lands while submissions are prepared: the grader stops its servers, so the solutions'
    runs fail after it has said it was interrupted; that failure is not an error to print."""
    release, done = threading.Event(), threading.Event()
    _failing_runs(monkeypatch, release, done)

    def preparing():
        yield "first"
        raise KeyboardInterrupt

    with caplog.at_level(logging.ERROR, logger="grader.verdict.reference"):
        with pytest.raises(KeyboardInterrupt):
            reference.run_all(CHAPTERS, "fork", "r", Path("."), threads=2, meanwhile=preparing())
        release.set()  # the servers stop: the runs fail
        assert done.wait(10)
    assert [r.getMessage() for r in caplog.records] == []


def test_the_solutions_are_parsed_in_the_coordinators_thread_never_beside_its_own_parsing(tmp_path, monkeypatch):
    """CPython 3.11's ast is not safe in two threads at once ("AST constructor recursion depth
    mismatch" failed a whole chapter's reference now and then): the test cells are rewritten here,
    before the threads that run the solutions start, while this thread prepares submissions."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    from grader.verdict import instrument

    src = new_notebook(cells=[new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "solution": False, "grade_id": "test_a", "points": 1, "locked": True}})])
    path = tmp_path / "a.ipynb"
    nbformat.write(src, str(path))
    where, ran = [], []
    real = instrument.chapter_tests

    def recording(*args, **kwargs):
        where.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kwargs)

    def run(chapter, source, options, engine, revision, cache_dir, ready=None):
        ran.append(ready is not None)
        return {}

    monkeypatch.setattr(instrument, "chapter_tests", recording)
    monkeypatch.setattr(reference, "run", run)
    reference.run_all({"01_a": (path, ExecOptions()), "02_b": (path, ExecOptions())}, "fork", "r", tmp_path,
                      threads=2, meanwhile=iter(range(2)))
    assert where == [True, True] and ran == [True, True]
