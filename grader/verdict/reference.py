"""Reference runs: the chapter's solution, run as a submission would be, observed check by check.

Before any learner's notebook of a batch runs, the coordinator executes the chapter's
source notebook (solutions and hidden tests) with the same engine, device, seed, ``FAST``
and grading mode, in a process that never runs learner code. What its test cells observe
is what the learners' test cells must observe (see :mod:`grader.verdict.judge`). A reference is
cached in the workspace by the fingerprint of everything it depends on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from grader import cells
from grader.engines.execution import ExecOptions, Execution, options_key
from grader.execute import watchdog
from grader.prepare.parameters import grading_notebook
from grader.verdict import fixed, instrument
from grader.verdict.observations import first_error, observations

log = logging.getLogger(__name__)

#: Code a recorded reference depends on: the learner-side helpers (checks, observations, the
#: datasets of course_utils.data), how notebooks are prepared and run (the engines, the
#: preloaded modules and warm-up of grader.prepare.integrity), how observations are read. All of it,
#: rather than a list to keep in step: a change costs one solution run per chapter.
_CODE = sorted(
    p for folder in (Path(__file__).parent.parent, Path(__file__).parent.parent.parent / "course_utils")
    for p in folder.rglob("*.py")
)


def fingerprint(source: Path, options: ExecOptions, engine: str, revision: str) -> str:
    """What a reference depends on: the chapter source, the options, the engine, the grader, and
    what a fork server preloaded for it (as for the learners' children of that batch)."""
    h = hashlib.sha256()
    expected = fixed.path(source.parent)
    for part in [source.read_bytes(), expected.read_bytes() if expected.is_file() else b"", options_key(asdict(options)), json.dumps(sorted(options.preload) if engine == "fork" else []).encode(),
                 engine.encode(), revision.encode()] + [p.read_bytes() for p in _CODE if p.exists()]:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:32]


def extract(execution: Execution, tests: dict[str, instrument.TestSource]) -> tuple[dict[str, list[dict]], list[str]]:
    """Per test, the observations of the solution's run; and the tests the solution failed."""
    found: dict[str, list[dict]] = {}
    broken = []
    for index, cell in enumerate(execution.nb.cells):
        gid = cells.grade_id(cell)
        if not cells.is_test(cell) or gid not in tests:
            continue
        obs = observations(cell)
        error = first_error(cell)
        complete = bool(obs) and obs[0].get("kind") == "begin" and obs[-1].get("kind") == "end"
        failed_assert = any(o.get("kind") == "assert" and o.get("actual") != {"t": "bool", "v": True} for o in obs)
        if error or not complete or failed_assert or index in execution.timed_out or index in execution.died:
            error = error or {}
            broken.append(f"{gid}: {error.get('ename', 'incomplete')}: {str(error.get('evalue', ''))[:300]}")
            continue
        found[gid] = obs
    return found, broken


def prepared(source: Path, options: ExecOptions) -> tuple[NotebookNode, dict[str, instrument.TestSource]]:
    """The solution notebook as the reference runs it, and its tests as the grader rewrote them.

    Made in the coordinator's own thread (:func:`run_all` does it before its threads start):
    CPython 3.11's ``ast`` is not safe to use from two threads at once ("AST constructor recursion
    depth mismatch"), and this thread prepares the submissions, parsing their cells, meanwhile.
    """
    src = nbformat.read(str(source), as_version=4)
    tests = instrument.chapter_tests(src)
    nb = grading_notebook(src, tests, options.device)
    checks = fixed.load(source.parent)
    if checks:  # the solution's fixed expectations, in the reference's process only
        nb.cells.append(fixed.cell(checks))
    return nb, tests


def run(chapter: str, source: Path, options: ExecOptions, engine: str, revision: str,
        cache_dir: Path, ready: tuple[NotebookNode, dict[str, instrument.TestSource]] | None = None,
        ) -> dict[str, list[dict]]:
    """The reference observations of ``chapter`` (from the cache when nothing changed); ``ready``:
    what :func:`prepared` made of it already."""
    fp = fingerprint(source, options, engine, revision)
    path = cache_dir / f"{chapter}-{fp}.json"
    if path.exists():
        try:
            return json.loads(path.read_text(encoding="utf-8"))["tests"]
        except (OSError, ValueError, KeyError):
            log.warning("%s: the cached reference is unreadable; running it again", path)
    nb, tests = ready if ready is not None else prepared(source, options)
    execution = watchdog.execute_notebook(nb, options, engine)
    if execution.error:
        raise RuntimeError(f"{chapter}: the solution notebook could not be run: {execution.error}")
    found, broken = extract(execution, tests)
    for problem in broken:
        log.error("%s: the solution fails its own test %s", chapter, problem)
    wrong = fixed.failures(execution.nb, fixed.load(source.parent))
    for problem in wrong:
        log.error("%s: the solution fails its fixed expectation %s (%s)", chapter, problem, fixed.path(source.parent))
    if wrong:  # a wrong solution is no oracle: the chapter is not graded against it
        return {}
    if broken:  # not kept: the cause may lie in this machine (a memory cap, a GPU), not in the
        return found  # source, and the next batch must try again rather than inherit the failure
    data: dict[str, Any] = {"chapter": chapter, "fingerprint": fp, "tests": found, "broken": broken}
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)
    return found


def run_all(chapters: dict[str, tuple[Path, ExecOptions]], engine: str, revision: str, cache_dir: Path, *,
            threads: int = 1, meanwhile: Iterator | None = None, keep: int = 256) -> tuple[dict[str, dict], list]:
    """The reference observations of every chapter (``chapter -> (source, options)``); ``{}`` for a
    chapter whose solution could not be run, which is logged and costs its tests, not the batch.

    With ``threads`` > 1 or ``meanwhile`` (the fork engine: its executions are threads of this
    process driving children of the warm servers), the solutions run in up to ``threads`` threads
    at once, while this thread takes up to ``keep`` items from ``meanwhile`` -- the batch's
    submissions being prepared, which runs no learner code: no submission runs before this
    returns. Returns the references and the items taken from ``meanwhile``.
    """
    found: dict[str, dict] = {}
    stopping = threading.Event()  # Ctrl-C: what fails after it (the servers stopped) is not news

    ready: dict[str, tuple] = {}
    for chapter, (source, options) in chapters.items():  # here, not in the threads (see prepared)
        try:
            ready[chapter] = prepared(source, options)
        except Exception as exc:  # noqa: BLE001 - run() meets it again and says why
            log.debug("preparing the reference of %s: %s", chapter, exc)

    def one(chapter: str) -> None:
        source, options = chapters[chapter]
        try:
            found[chapter] = run(chapter, source, options, engine, revision, cache_dir, ready.get(chapter))
        except Exception as exc:  # the chapter cannot be graded: every test says why
            if not stopping.is_set():
                log.error("the reference run of %s failed: %s", chapter, exc)
            found[chapter] = {}

    if threads <= 1 and meanwhile is None:
        for chapter in sorted(chapters):
            one(chapter)
        return found, []
    waiting: queue.SimpleQueue[str] = queue.SimpleQueue()
    for chapter in sorted(chapters):
        waiting.put(chapter)

    def worker() -> None:
        while True:
            try:
                one(waiting.get_nowait())
            except queue.Empty:
                return

    # daemon threads: Ctrl-C here ends the grader without waiting for a solution's run to finish
    workers = [threading.Thread(target=worker, name=f"reference-{i}", daemon=True)
               for i in range(max(1, min(threads, len(chapters))))]
    for t in workers:
        t.start()
    taken: list = []
    try:
        while meanwhile is not None and len(taken) < keep and any(t.is_alive() for t in workers):
            try:
                taken.append(next(meanwhile))
            except StopIteration:
                break
        for t in workers:
            t.join()
    except BaseException:
        stopping.set()
        raise
    return found, taken
