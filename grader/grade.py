"""``course grade``: auto-grade every submission into the workspace's gradebook.

A submission passes once through the stages, each a module of its own: intake
(:mod:`grader.intake.submissions`) -> prepare (:mod:`grader.prepare.submission`) -> execute (:mod:`grader.execute.dispatch`,
:mod:`grader.execute.watchdog` and the engines) -> verdict (:mod:`grader.verdict.judge`, against
:mod:`grader.verdict.reference`, one :mod:`grader.verdict.outcome` each) -> record (:mod:`grader.record.results`). The coordinating process does all
but execution: it owns the gradebook, the solutions and every decision; workers only execute
notebooks, so one misbehaving submission costs that submission and nothing else.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import nbformat
from nbformat import NotebookNode

from grader import batch, project
from grader.engines.execution import NOT_GRADING, ExecOptions
from grader.exceptions import Interrupted, OptionError
from grader.execute import dispatch
from grader.execute.watchdog import DEFAULT_ENGINE, ENGINES
from grader.intake.lms import extract_lms_zip
from grader.intake.submissions import Submission, discover
from grader.intake.workspace import Workspace, check_options
from grader.prepare.integrity import Finding
from grader.prepare.release import build_release, check_practice, check_regions
from grader.prepare.submission import chapter_belongs, learner_findings, prepare, read_submission
from grader.record import gradebook as gbmod
from grader.record import results as record
from grader.record.fingerprints import GRADER_REVISION, chapter_options
from grader.verdict import hints, instrument, outcome, reference
from grader.verdict.outcome import Report, passed_tests

__all__ = ["DEFAULT_ENGINE", "ENGINES", "Report", "Workspace", "main", "passed_tests", "read_submission"]

log = logging.getLogger(__name__)

#: results each worker hands back before an idle coordinator records them, and the longest a result waits
#: to be recorded (a killed batch grades at most that much again; the progress bar moves at least that often)
IDLE_RESULTS, RECORD_WAIT = 4, 2.0


def _one_batch_per_workspace(grade: Callable[..., list[Report]]) -> Callable[..., list[Report]]:
    """Check the options first, then grade holding the workspace's lock (:meth:`Workspace.lock`):
    a second batch on the same workspace is refused, and only one creates its gradebook."""

    @functools.wraps(grade)
    def checked(*args, **kwargs) -> list[Report]:
        bound = inspect.signature(grade).bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        check_options(cell_timeout=given["cell_timeout"], memory_mb=given["memory_mb"], jobs=given["jobs"])
        if given["engine"] not in ENGINES:
            raise OptionError(f"--engine {given['engine']!r} is not an engine", hint=f"use one of {', '.join(ENGINES)}")
        batch.check_chapter(given["chapter"], project.sources(given["solutions_dir"]))  # a folder or a zip alike
        batch.check_device(given["device"])
        workdir = Path(given["workdir"])
        with batch.held(workdir), batch.batch_log(workdir):  # refused before anything was written: no workspace left
            try:
                return grade(*bound.args, **bound.kwargs)
            except KeyboardInterrupt:  # before any submission ran (see main for one in the batch)
                raise Interrupted("interrupted before grading began; rerun to grade") from None

    return checked


@_one_batch_per_workspace
def main(
    submissions: Path,
    workdir: Path,
    *,
    db_url: str | None = None,
    jobs: int | None = None,
    device: str = "cpu",
    cell_timeout: int = 60,
    memory_mb: int | None = 2048,
    isolate: bool = True,
    force: bool = False,
    solutions_dir: Path = project.SOLUTIONS,
    chapter: str | None = None,
    engine: str = DEFAULT_ENGINE,
    scheduler: str | None = None,
    on_progress: Callable[[Report], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> list[Report]:
    """Grade every submission under ``submissions`` into ``workdir``.

    Args:
        submissions: folder laid out ``<student>/<chapter>/<notebook>.ipynb``, or a zip
            downloaded from Canvas or Moodle (see :func:`grader.intake.lms.extract_lms_zip`).
        workdir: the grading workspace (gradebook, autograded/, results/, feedback/).
        db_url: SQLAlchemy URL of the gradebook; ``sqlite:///<workdir>/gradebook.db`` by default.
        jobs: submissions executed at once (default: the number of CPUs).
        device: ``cpu`` (default) or ``cuda``: the DEVICE the notebooks get.
        cell_timeout: seconds a cell may run before it is stopped and scored 0 (a chapter
            can raise it in ``solutions/<chapter>/grading.toml``).
        memory_mb: address-space cap of each kernel, in MiB (None: no cap).
        isolate: run kernels in a bubblewrap sandbox where the machine allows it.
        force: re-grade submissions whose result is already recorded.
        solutions_dir: where the chapters' source notebooks are.
        chapter: the chapter an LMS zip is for (guessed from file names when None).
        engine: ``fork`` (default: a warm interpreter forks a child per submission) or
            ``kernel`` (a Jupyter kernel per submission, the reference); same grades.
        scheduler: address of a Dask distributed scheduler: notebooks are executed on its
            workers (``jobs`` is then ignored); this process still writes the gradebook.
        on_progress: called with each :class:`Report` of a submission that was graded now
            (not taken from an earlier run's results).
        on_start: called with the number of submissions about to be graded now (before the
            solutions' runs).

    Raises:
        OptionError: an option is out of range, or differs from the one the recorded results
            were graded with (which it would re-grade) and ``force`` is not set.
        NothingToGrade: ``submissions`` holds no notebook.
        WorkspaceBusy: another batch is grading into ``workdir``.
        Interrupted: Ctrl-C; what was recorded stays, and a rerun resumes.

    Returns:
        One :class:`Report` per status line, sorted by student and chapter: a student's chapter
        (graded, or why not), and a folder or file that is no student's submission (status
        ``skipped`` or ``superseded``; shown, not recorded).
    """
    ws = Workspace(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db_url = db_url or ws.default_db_url()
    gbmod.ensure_tools_on_path()
    sources = project.sources(solutions_dir)
    hide = ws.hidden(submissions, solutions_dir)
    found = _intake(ws, submissions, sources, chapter)  # intake: one Submission (or status) per student and chapter
    gbmod.check(db_url, create=True)
    preload = project.preload({s.chapter for s in found if s.path is not None and s.chapter in sources}, solutions_dir)
    base = ExecOptions(cell_timeout=cell_timeout, device=device, memory_mb=memory_mb, isolate=isolate,
                       hide=hide, preload=preload)
    chapters = _chapters(db_url, sources, {s.chapter for s in found if s.chapter in sources})
    reports, candidates = record.already_graded(ws, db_url, found, sources, base, force)  # the rest is graded now
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(candidates)))
    if engine == "fork" and scheduler is None and candidates:  # none when nothing changed: no server starts
        from grader.engines.fork import pool as forkpool

        forkpool.prestart(base, jobs)  # torch, while we prepare
    ws.remember(grading={"engine": engine, **{k: v for k, v in asdict(base).items() if k not in NOT_GRADING}},
                solutions=str(Path(solutions_dir).resolve()))
    # waiting for workers, the coordinator records once each of them has handed back a few results, or the
    # oldest has waited RECORD_WAIT: a transaction and the totals read back cost more than a submission's verdict
    recorder = record.Recorder(ws, db_url, _collect(reports, on_progress), idle_batch=IDLE_RESULTS * jobs,
                               wait=RECORD_WAIT)
    _record_not_submitted(ws, recorder, found, sources, reports)
    if on_start:  # before the solutions' runs, which take a few seconds per chapter
        on_start(len(candidates))
    _grade_now(ws, chapters, candidates, recorder, reports, base, engine=engine, scheduler=scheduler, jobs=jobs)
    reports.sort(key=lambda r: (r.student, r.chapter))
    return reports


class _Chapters(NamedTuple):
    """The batch's chapters, each registered in the gradebook once."""

    db_url: str
    sources: dict[str, Path]  # every chapter's source notebook, in the batch or not
    releases: dict[str, NotebookNode]  # its student release
    tests: dict[str, dict[str, instrument.TestSource]]  # its test cells as the grader runs them
    registered: dict[str, gbmod.ChapterCells]  # its cells as the gradebook holds them


def _collect(reports: list[Report], on_progress: Callable[[Report], None] | None) -> Callable[[Report], None]:
    """What the recorder calls with each report recorded now: kept, and announced."""

    def recorded_now(report: Report) -> None:
        reports.append(report)
        if on_progress:
            on_progress(report)

    return recorded_now


def _record_not_submitted(ws: Workspace, recorder: record.Recorder, found: list[Submission],
                          sources: dict[str, Path], reports: list[Report]) -> None:
    """A student's row says why nothing was graded (recorded); a skipped file's is only shown. Both are
    listed in results.csv."""
    for sub in found:
        if sub.path is None:
            missing = outcome.unreadable(sub, sub.status or "missing", sub.problem or "nothing submitted", sources)
            if sub.chapter in sources and sub.status is None:
                recorder.add(missing, sources[sub.chapter], announce=False)
            reports.append(missing)
    recorder.flush()
    record.write_intake(ws, [s for s in found if s.status is not None])


def _grade_now(ws: Workspace, chapters: _Chapters, candidates: list[tuple[Submission, dict, bytes, str]],
               recorder: record.Recorder, reports: list[Report], base: ExecOptions, *, engine: str,
               scheduler: str | None, jobs: int) -> None:
    """Prepare, execute, judge and record ``candidates``: the solutions' runs first, then each
    submission as its execution comes back.

    The solutions' runs come before any learner code of this batch runs (see grader.verdict.reference):
    in threads, up to one per job (with the fork engine on the servers started for the batch, with the
    kernel engine each in a kernel of its own), while this thread prepares the first submissions.
    One after the other (as the kernel engine had them), a batch of 8 chapters waited for 8 solution
    runs, each in a fresh kernel, before its first submission started.
    """
    sources, findings_of = chapters.sources, {}
    overlap, items = scheduler is None, _prepared(ws, chapters, candidates, recorder, findings_of, base.device)
    references, prepared = reference.run_all(
        {c: (sources[c], chapter_options(base, sources[c].parent)) for c in {sub.chapter for sub, *_ in candidates}},
        engine, GRADER_REVISION, ws.root / "reference", threads=jobs if overlap else 1,
        meanwhile=items if overlap else None)
    done = len(reports)
    executed = dispatch.execute_all(itertools.chain(prepared, items), jobs, engine, scheduler, on_idle=recorder.idle)
    try:
        for sub, fp, ran in executed:
            judged = (references.get(sub.chapter, {}), chapters.tests[sub.chapter],
                      findings_of.pop((sub.student, sub.chapter), []))
            report = outcome.scored(ws, sub, ran, sources[sub.chapter], judged)  # verdict
            recorder.add(report, sources[sub.chapter], fp)  # record
        recorder.flush()
    except KeyboardInterrupt:
        try:
            recorder.flush()  # what was scored is kept
        except KeyboardInterrupt:
            pass
        graded, total = len(reports) - done, len(candidates)
        raise Interrupted(f"interrupted: {graded} of {total} submission(s) graded in this run, "
                          "their results recorded; rerun the same command to resume") from None
    finally:  # stop the workers now, not when the traceback holding this frame is freed (at exit, after they finish)
        executed.close()


def _prepared(ws: Workspace, chapters: _Chapters, candidates: list[tuple[Submission, dict, bytes, str]],
              recorder: record.Recorder, findings_of: dict[tuple[str, str], list[Finding]],
              device: str) -> Iterator[tuple[Submission, NotebookNode, str, dict, list]]:
    """Prepared submissions, one at a time: the first ones run while the next are prepared. One that
    cannot be is recorded with the reason, and not executed; the static scan's findings of each are
    kept in ``findings_of`` for its verdict."""
    for sub, options, raw, fp in candidates:
        source = chapters.sources[sub.chapter]
        dest = ws.submitted / sub.student / sub.chapter / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(raw)
        prepared, why = _prepare_one(sub, chapters, device)
        if prepared is None:
            recorder.add(outcome.unreadable(sub, *why, chapters.sources), source, fp)
            continue
        findings = learner_findings(prepared, chapters.releases[sub.chapter])
        findings_of[(sub.student, sub.chapter)] = findings
        yield sub, prepared, fp, options, [asdict(f) for f in findings]


def _prepare_one(sub: Submission, chapters: _Chapters, device: str) -> tuple[NotebookNode | None, tuple[str, str]]:
    """(the submission read, checked to be its chapter's and prepared, or None and why not: a status
    and a reason)."""
    chapter, releases = sub.chapter, chapters.releases
    try:
        nb = read_submission(sub.path)
    except ValueError as exc:
        return None, ("unreadable", str(exc))
    wrong = chapter_belongs(nb, releases[chapter], {})
    if wrong:  # say which chapter it is, looking at the chapters not in this batch too
        others = {c: r for c, r in releases.items() if c != chapter}
        wrong = chapter_belongs(nb, releases[chapter], others or _all_releases(chapters.sources, releases, chapter))
    if wrong:
        return None, ("wrong chapter", wrong)
    try:
        prepared = prepare(nb, chapter, chapters.sources[chapter].stem, chapters.db_url, releases[chapter], device,
                           chapters.tests[chapter], chapters.registered[chapter])
    except Exception as exc:  # the notebook is readable but cannot be prepared: say why
        log.exception("preparing %s failed", sub.key)
        return None, ("error", f"could not prepare the notebook: {type(exc).__name__}: {exc}")
    forgotten = prepared.metadata.pop("course_forgotten", [])
    if forgotten:
        ignored = f"ignored graded cell(s) this chapter does not have: {', '.join(forgotten)}"
        sub.note = "; ".join(filter(None, [sub.note, ignored]))
    return prepared, ("", "")


def _intake(ws: Workspace, submissions: Path, sources: dict[str, Path], chapter: str | None) -> list[Submission]:
    """Intake: one :class:`Submission` per student and chapter found in ``submissions`` (a folder,
    or an LMS zip unpacked into the workspace), with a status for what is not one; every chapter
    it names checked before the gradebook is touched.

    Raises:
        NothingToGrade: nothing in ``submissions`` is a submission of these chapters.
        ReleaseError: a chapter's source has a broken solution or hidden-test region.
    """
    expected = {c: p.name for c, p in sources.items()}
    if submissions.is_file():  # an LMS download: a row per student and per file not graded
        unpacked = ws.intake(submissions)
        shutil.rmtree(unpacked, ignore_errors=True)
        found = extract_lms_zip(submissions, unpacked, expected, chapter)
        batch.refuse_contradicting_chapter(chapter, found, sources)
        submissions = unpacked
    else:
        found = discover(submissions, expected)
    students = {s.student for s in found if s.status is None}  # not the folders and files skipped
    nothing = batch.nothing_to_grade(found, submissions, sources)
    if nothing is not None:
        raise nothing
    empty = sorted(students - {s.student for s in found if s.path is not None})
    if empty:
        log.warning("%d student folder(s) hold no notebook to grade, each gets a 'missing' status line: %s",
                    len(empty), ", ".join(empty[:10]) + (", ..." if len(empty) > 10 else ""))
    for name in sorted({s.chapter for s in found if s.chapter in sources}):
        source = nbformat.read(str(sources[name]), as_version=4)
        check_regions(name, source)
        check_practice(name, source)
    return found


def _chapters(db_url: str, sources: dict[str, Path], chapters: set[str]) -> _Chapters:
    """Each chapter of the batch registered in the gradebook, once: its student release, its test
    cells as the grader runs them with their rules and hints, its cells as the gradebook holds them."""
    releases, tests, registered = {}, {}, {}
    for chapter in sorted(chapters):
        releases[chapter] = gbmod.register_chapter(db_url, chapter, sources[chapter])
        registered[chapter] = gbmod.chapter_cells(db_url, chapter, sources[chapter].stem)
        tests[chapter] = instrument.chapter_tests(nbformat.read(str(sources[chapter]), as_version=4),
                                                  project.grading_settings(sources[chapter].parent),
                                                  hints.load(sources[chapter].parent))
    return _Chapters(db_url, sources, releases, tests, registered)


def _all_releases(sources: dict[str, Path], releases: dict[str, NotebookNode], skip: str) -> dict[str, NotebookNode]:
    for chapter, source in sources.items():
        if chapter not in releases:
            releases[chapter] = build_release(chapter, source)
    return {c: r for c, r in releases.items() if c != skip}


