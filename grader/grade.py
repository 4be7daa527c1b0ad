"""``course grade``: auto-grade every submission into the workspace's gradebook.

The coordinating process reads and sanitises submissions, owns the gradebook and writes
every result; workers only execute notebooks (no gradebook handle, no solutions), so one
misbehaving submission costs that submission and nothing else.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import OverwriteCells

from grader import cells, pipeline, project
from grader import gradebook as gbmod
from grader.execute import ExecOptions, execute
from grader.intake import Submission, discover, extract_lms_zip
from grader.integrity import Finding, scan
from grader.release import build_release
from grader.scoring import PASSED, TestResult, score

log = logging.getLogger(__name__)

#: Bump when a change to grading could change a score: cached results are then redone.
GRADER_REVISION = "1"

#: Execution engines: ``kernel`` (a Jupyter kernel per submission, the reference) and
#: ``fork`` (children of a warm interpreter, see grader.forkengine). Both give the same grades.
ENGINES = ("fork", "kernel")
DEFAULT_ENGINE = "fork"


@dataclass
class Report:
    """One status line of the batch: a student's chapter, or why it was not graded."""

    student: str
    chapter: str
    status: str  # graded | unreadable | missing | error
    score: float = 0.0
    max_score: float = 0.0
    message: str = ""
    tests: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: str = ""
    cached: bool = False


@dataclass
class Workspace:
    """The folders of a grading run (nbgrader's course-directory names)."""

    root: Path

    @property
    def submitted(self) -> Path:
        return self.root / "submitted"

    @property
    def autograded(self) -> Path:
        return self.root / "autograded"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def feedback(self) -> Path:
        return self.root / "feedback"

    def default_db_url(self) -> str:
        return f"sqlite:///{(self.root / 'gradebook.db').resolve()}"

    def result_path(self, student: str, chapter: str) -> Path:
        return self.results / student / f"{chapter}.json"


def read_submission(path: Path) -> NotebookNode:
    """Read a submitted notebook, upgrading old nbformat versions.

    Raises:
        ValueError: with a sentence saying what is wrong with the file.
    """
    raw = path.read_bytes()
    if not raw.strip():
        raise ValueError("the file is empty")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"the file is not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        raise ValueError("the file is JSON but not a Jupyter notebook")
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as exc:
        raise ValueError(f"the notebook could not be read ({type(exc).__name__}: {exc})") from None
    return nb


def _fingerprint(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:32]


def prepare(nb: NotebookNode, chapter: str, notebook: str, db_url: str, release: NotebookNode, device: str) -> NotebookNode:
    """Sanitise a submission (restore test cells, metadata) and inject the grading parameters."""
    from papermill.parameterize import parameterize_notebook

    release_meta = {cells.grade_id(c): cells.nbgrader_meta(c) for c in release.cells if cells.grade_id(c)}
    release_ids = {c.id: cells.grade_id(c) for c in release.cells if cells.grade_id(c) and c.get("id")}
    pairs, answer = {}, None
    for c in release.cells:
        if cells.is_solution(c):
            answer = cells.grade_id(c)
        elif cells.is_test(c) and answer:
            pairs[cells.grade_id(c)] = answer
    resources = {
        "nbgrader": {"notebook": notebook, "assignment": chapter, "db_url": db_url},
        "course": {"release_meta": release_meta, "release_ids": release_ids, "pairs": pairs},
    }
    nb, _ = pipeline.run(
        pipeline.SANITIZE, nb, resources, config={OverwriteCells: {"add_missing_cells": True}}
    )
    if cells.parameters_cell_index(nb) is None:
        # papermill puts the injected parameters on top when the tagged cell is gone
        log.info("%s: the parameters cell is missing; parameters go on top", notebook)
    nb = nbformat.from_dict(nb)  # cells nbgrader restored are plain dicts inside
    for i, cell in enumerate(nb.cells):
        if not cell.get("id"):
            cell["id"] = f"restored-{i}"
    # papermill's loader gives every notebook these keys; parameterize_notebook relies on them
    nb.metadata.setdefault("papermill", {}).setdefault("parameters", {})
    for cell in nb.cells:
        cell.setdefault("metadata", {}).setdefault("tags", [])
    return parameterize_notebook(nb, {"DEVICE": device, "SEED": 0, "FAST": True}, kernel_name="python3", language="python")


def learner_findings(nb: NotebookNode, release: NotebookNode) -> list[Finding]:
    """Suspicious code in the cells the learner wrote (answer cells and any cell added)."""
    released = {cells.source_text(c) for c in release.cells if c.cell_type == "code"}
    found: list[Finding] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cells.is_test(cell) or cells.has_tag(cell, "injected-parameters"):
            continue
        text = cells.source_text(cell)
        if text in released:
            continue
        found.extend(scan(text, i))
    return found


def chapter_belongs(nb: NotebookNode, release: NotebookNode, others: dict[str, NotebookNode]) -> str | None:
    """None when ``nb`` is a notebook of the release's chapter, else a sentence saying why not."""
    def ids(notebook: NotebookNode) -> set[str]:
        out = set()
        for c in notebook.cells:
            gid = cells.grade_id(c)
            if gid:
                out.add(gid)
            m = cells.marker(c)
            if m:
                out.add(m[1])
        return out

    mine, theirs = ids(release), ids(nb)
    if mine & theirs or not theirs:
        return None
    for chapter, other in others.items():
        if ids(other) & theirs:
            return f"this is a notebook of chapter {chapter}, not of this chapter"
    return "no exercise of this chapter was found in the notebook"


def run_one(payload: tuple) -> tuple[str, list[dict], dict[str, Any]]:
    """Worker: execute one prepared notebook and score it (no gradebook, no solutions here).

    ``payload`` is ``(notebook JSON, ExecOptions fields, findings[, engine])``; the engine
    is ``kernel`` (the reference) or ``fork`` (see :mod:`grader.forkengine`).
    """
    nb_json, options, findings, *rest = payload
    engine = rest[0] if rest else "kernel"
    nb = nbformat.reads(nb_json, as_version=4)
    if engine == "fork":
        from grader import forkengine

        execution = forkengine.execute(nb, ExecOptions(**options))
    elif engine == "kernel":
        execution = execute(nb, ExecOptions(**options))
    else:
        raise ValueError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    tests = [t.to_dict() for t in score(execution, [Finding(**f) for f in findings])]
    info = {
        "timed_out": execution.timed_out,
        "died": execution.died,
        "tampered": execution.tampered,
        "restarts": execution.restarts,
        "error": execution.error,
    }
    return nbformat.writes(execution.nb), tests, info


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # atomic: a killed run never leaves half a result


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
            downloaded from Canvas or Moodle (see :func:`grader.intake.extract_lms_zip`).
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
        on_start: called with the number of submissions about to be graded now.

    Returns:
        One :class:`Report` per status line, sorted by student and chapter.
    """
    ws = Workspace(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db_url = db_url or ws.default_db_url()
    gbmod.ensure_tools_on_path()
    chapters = project.chapters(solutions_dir)
    sources = {c: project.source_notebook(c, solutions_dir) for c in chapters}
    expected = {c: p.name for c, p in sources.items()}
    intake_notes: list[str] = []
    if submissions.is_file():  # an LMS download
        unpacked = ws.root / "intake" / submissions.stem
        shutil.rmtree(unpacked, ignore_errors=True)
        intake_notes = extract_lms_zip(submissions, unpacked, expected, chapter)
        for note in intake_notes:
            log.warning("%s: %s", submissions.name, note)
        submissions = unpacked
    found = discover(submissions, expected)
    hide = sorted({str(p.resolve()) for p in (workdir, submissions, solutions_dir)})
    base = ExecOptions(cell_timeout=cell_timeout, device=device, memory_mb=memory_mb, isolate=isolate, hide=hide)
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    waiting = sum(sub.path is not None for sub in found)
    if engine == "fork" and scheduler is None and waiting:
        from grader import forkpool

        forkpool.prestart(base, min(waiting, max(1, jobs or os.cpu_count() or 1)))  # imports torch while we prepare

    reports: list[Report] = []
    releases: dict[str, NotebookNode] = {}
    for chapter in sorted({s.chapter for s in found if s.chapter in sources}):
        gbmod.register_chapter(db_url, chapter, sources[chapter])
        releases[chapter] = build_release(chapter, sources[chapter])
    candidates: list[tuple[Submission, dict, bytes, str]] = []
    for sub in found:
        if sub.path is None:
            reports.append(_unreadable(sub, "missing", sub.problem or "nothing submitted", db_url, sources, ws=ws))
            continue
        source = sources[sub.chapter]
        options = asdict(chapter_options(base, source.parent))
        raw = sub.path.read_bytes()
        fp = _fingerprint(raw, source.read_bytes(), json.dumps(options, sort_keys=True).encode(), GRADER_REVISION.encode())
        cached = _cached(ws, sub, fp, db_url)
        if cached is not None and not force:
            reports.append(cached)
            continue
        candidates.append((sub, options, raw, fp))

    def not_executed(report: Report) -> None:
        reports.append(report)
        if on_progress:
            on_progress(report)

    def todo() -> Iterator[tuple[Submission, str, str, dict, list]]:
        """Prepared submissions, one at a time: the first ones run while the next are prepared."""
        for sub, options, raw, fp in candidates:
            chapter, source = sub.chapter, sources[sub.chapter]
            dest = ws.submitted / sub.student / chapter / source.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(raw)
            try:
                nb = read_submission(sub.path)
            except ValueError as exc:
                not_executed(_unreadable(sub, "unreadable", str(exc), db_url, sources, fingerprint=fp, ws=ws))
                continue
            others = {c: r for c, r in releases.items() if c != chapter}
            wrong = chapter_belongs(nb, releases[chapter], others or _all_releases(sources, releases, chapter))
            if wrong:
                not_executed(_unreadable(sub, "wrong chapter", wrong, db_url, sources, fingerprint=fp, ws=ws))
                continue
            try:
                prepared = prepare(nb, chapter, source.stem, db_url, releases[chapter], device)
            except Exception as exc:  # the notebook is readable but cannot be prepared: say why
                log.exception("preparing %s failed", sub.key)
                reason = f"could not prepare the notebook: {type(exc).__name__}: {exc}"
                not_executed(_unreadable(sub, "error", reason, db_url, sources, fingerprint=fp, ws=ws))
                continue
            findings = [asdict(f) for f in learner_findings(prepared, releases[chapter])]
            yield sub, nbformat.writes(prepared), fp, options, findings

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(candidates)))
    if on_start:
        on_start(len(candidates))
    for sub, fp, outcome in _execute_all(todo(), jobs, engine, scheduler):
        report = _record(ws, sub, fp, outcome, db_url, sources[sub.chapter])
        reports.append(report)
        if on_progress:
            on_progress(report)
    reports.sort(key=lambda r: (r.student, r.chapter))
    return reports


def chapter_options(base: ExecOptions, chapter_dir: Path) -> ExecOptions:
    """``base``, with the chapter's own ``grading.toml`` (``cell_timeout``, ``memory_mb``) applied."""
    import dataclasses

    import tomllib

    path = chapter_dir / "grading.toml"
    if not path.exists():
        return base
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    allowed = {k: v for k, v in data.items() if k in ("cell_timeout", "memory_mb")}
    return dataclasses.replace(base, **allowed)


def _all_releases(sources: dict[str, Path], releases: dict[str, NotebookNode], skip: str) -> dict[str, NotebookNode]:
    for chapter, source in sources.items():
        if chapter not in releases:
            releases[chapter] = build_release(chapter, source)
    return {c: r for c, r in releases.items() if c != skip}


def _execute_all(todo: Iterable[tuple], jobs: int, engine: str = "kernel", scheduler: str | None = None) -> Iterator[tuple]:
    """Yield (submission, fingerprint, worker outcome or exception) as executions finish.

    ``todo`` is consumed lazily: a submission starts as soon as it is prepared. A worker
    process that crashes costs the submission it was running; the others are run again in
    a fresh pool. The fork engine's workers are threads of this process: each drives the
    children of its own warm server, which do the work.
    """
    if scheduler:
        from grader import distributed

        yield from distributed.execute_all(todo, scheduler, engine)
        return
    if jobs == 1:
        for sub, nb_json, fp, options, findings in todo:
            try:
                yield sub, fp, run_one((nb_json, options, findings, engine))
            except Exception as exc:
                yield sub, fp, exc
        return
    if engine == "fork":
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="grade")
    else:
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
    broken = []
    with pool:
        for item, future in _as_submitted(pool, todo, engine):
            try:
                yield item[0], item[2], future.result()
            except concurrent.futures.process.BrokenProcessPool:
                broken.append(item)
            except Exception as exc:
                yield item[0], item[2], exc
    for item in broken:  # one at a time, each in a fresh process: a crash costs only its own
        with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            try:
                yield item[0], item[2], pool.submit(run_one, item[1:2] + item[3:] + (engine,)).result()
            except Exception as exc:
                yield item[0], item[2], exc


def _as_submitted(pool: concurrent.futures.Executor, todo: Iterable[tuple], engine: str) -> Iterator[tuple]:
    """Submit each item as it comes; yield (item, future) as futures finish, finished ones first."""
    pending: dict[concurrent.futures.Future, tuple] = {}
    for item in todo:
        try:
            pending[pool.submit(run_one, item[1:2] + item[3:] + (engine,))] = item
        except concurrent.futures.process.BrokenProcessPool:
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_exception(concurrent.futures.process.BrokenProcessPool("the worker pool broke"))
            pending[future] = item
        for future in [f for f in pending if f.done()]:
            yield pending.pop(future), future
    while pending:
        done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            yield pending.pop(future), future


def _record(ws: Workspace, sub: Submission, fp: str, outcome, db_url: str, source: Path) -> Report:
    if isinstance(outcome, Exception):
        report = Report(sub.student, sub.chapter, "error", message=f"grading failed: {type(outcome).__name__}: {outcome}")
        tests = [TestResult(g, 0.0, m, "not run", "grading failed") for g, m in _test_points(source).items()]
        report.tests = [t.to_dict() for t in tests]
    else:
        nb_json, tests_raw, info = outcome
        out = ws.autograded / sub.student / sub.chapter / source.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(nb_json, encoding="utf-8")
        report = Report(sub.student, sub.chapter, "graded", message=sub.note or "")
        report.tests = tests_raw
        if info.get("error"):
            report.status, report.message = "error", f"the kernel could not run the notebook: {info['error']}"
    _finish(report, sub.chapter, source, db_url, fp, ws)
    return report


def _test_points(source: Path) -> dict[str, float]:
    nb = nbformat.read(str(source), as_version=4)
    return {cells.grade_id(c): cells.points(c) for c in nb.cells if cells.is_test(c)}


def _finish(report: Report, chapter: str, source: Path, db_url: str, fp: str, ws: Workspace) -> None:
    """Write scores (one transaction), then the result file: the order makes resuming safe."""
    points = _test_points(source)
    got = {t["grade_id"]: float(t["points"]) for t in report.tests if t["grade_id"] in points}
    scores = {gid: got.get(gid, 0.0) for gid in points}
    gbmod.save_scores(db_url, chapter, source.stem, report.student, scores)
    total = gbmod.student_scores(db_url, chapter, report.student)
    report.score, report.max_score = total if total else (sum(scores.values()), sum(points.values()))
    report.fingerprint = fp
    _write_json(ws.result_path(report.student, chapter), asdict(report))


def _unreadable(sub: Submission, status: str, reason: str, db_url: str, sources: dict[str, Path], *, fingerprint: str = "", ws: Workspace | None = None) -> Report:
    report = Report(sub.student, sub.chapter, status, message=reason)
    if sub.chapter in sources and ws is not None:
        report.tests = [
            TestResult(g, 0.0, m, "not run", reason).to_dict() for g, m in _test_points(sources[sub.chapter]).items()
        ]
        _finish(report, sub.chapter, sources[sub.chapter], db_url, fingerprint, ws)
    return report


def _cached(ws: Workspace, sub: Submission, fp: str, db_url: str) -> Report | None:
    path = ws.result_path(sub.student, sub.chapter)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if data.get("fingerprint") != fp or data.get("status") == "error":
        return None
    total = gbmod.student_scores(db_url, sub.chapter, sub.student)
    if total is None:
        return None
    report = Report(**{k: v for k, v in data.items() if k in Report.__dataclass_fields__})
    report.score, report.max_score = total
    report.cached = True
    return report


def passed_tests(report: Report) -> list[str]:
    """grade_ids of the tests a report passed."""
    return [t["grade_id"] for t in report.tests if t["status"] == PASSED]
