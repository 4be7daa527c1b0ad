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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import OverwriteCells

from grader import cells, pipeline, project
from grader import gradebook as gbmod
from grader.execute import ExecOptions, execute
from grader.intake import Submission, discover
from grader.release import build_release
from grader.scoring import PASSED, TestResult, score

log = logging.getLogger(__name__)

#: Bump when a change to grading could change a score: cached results are then redone.
GRADER_REVISION = "1"


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
    resources = {
        "nbgrader": {"notebook": notebook, "assignment": chapter, "db_url": db_url},
        "course": {"release_meta": release_meta},
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


def run_one(payload: tuple[str, dict[str, Any]]) -> tuple[str, list[dict], dict[str, Any]]:
    """Worker: execute one prepared notebook and score it (no gradebook, no solutions here)."""
    nb_json, options = payload
    nb = nbformat.reads(nb_json, as_version=4)
    execution = execute(nb, ExecOptions(**options))
    tests = [t.to_dict() for t in score(execution)]
    info = {"timed_out": execution.timed_out, "died_at": execution.died_at, "error": execution.error}
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
    force: bool = False,
    solutions_dir: Path = project.SOLUTIONS,
    on_progress: Callable[[Report], None] | None = None,
) -> list[Report]:
    """Grade every submission under ``submissions`` into ``workdir``.

    Args:
        submissions: folder laid out ``<student>/<chapter>/<notebook>.ipynb``.
        workdir: the grading workspace (gradebook, autograded/, results/, feedback/).
        db_url: SQLAlchemy URL of the gradebook; ``sqlite:///<workdir>/gradebook.db`` by default.
        jobs: submissions executed at once (default: the number of CPUs).
        device: ``cpu`` (default) or ``cuda``: the DEVICE the notebooks get.
        cell_timeout: seconds a cell may run before it is stopped and scored 0.
        force: re-grade submissions whose result is already recorded.
        solutions_dir: where the chapters' source notebooks are.
        on_progress: called with each finished :class:`Report`.

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
    found = discover(submissions, expected)

    reports: list[Report] = []
    releases: dict[str, NotebookNode] = {}
    for chapter in sorted({s.chapter for s in found if s.chapter in sources}):
        gbmod.register_chapter(db_url, chapter, sources[chapter])
        releases[chapter] = build_release(chapter, sources[chapter])
    todo: list[tuple[Submission, str, str]] = []  # (submission, prepared nb json, fingerprint)
    options = asdict(ExecOptions(cell_timeout=cell_timeout, device=device))
    for sub in found:
        if sub.path is None:
            reports.append(_unreadable(sub, "missing", sub.problem or "nothing submitted", db_url, sources, ws=ws))
            continue
        chapter, source = sub.chapter, sources[sub.chapter]
        raw = sub.path.read_bytes()
        fp = _fingerprint(raw, source.read_bytes(), json.dumps(options, sort_keys=True).encode(), GRADER_REVISION.encode())
        cached = _cached(ws, sub, fp, db_url)
        if cached is not None and not force:
            reports.append(cached)
            continue
        dest = ws.submitted / sub.student / chapter / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(raw)
        try:
            nb = read_submission(sub.path)
        except ValueError as exc:
            reports.append(_unreadable(sub, "unreadable", str(exc), db_url, sources, fingerprint=fp, ws=ws))
            continue
        try:
            prepared = prepare(nb, chapter, source.stem, db_url, releases[chapter], device)
        except Exception as exc:  # the notebook is readable but cannot be prepared: say why
            log.exception("preparing %s failed", sub.key)
            reason = f"could not prepare the notebook: {type(exc).__name__}: {exc}"
            reports.append(_unreadable(sub, "error", reason, db_url, sources, fingerprint=fp, ws=ws))
            continue
        todo.append((sub, nbformat.writes(prepared), fp))

    jobs = max(1, jobs or os.cpu_count() or 1)
    for sub, fp, outcome in _execute_all(todo, options, jobs):
        report = _record(ws, sub, fp, outcome, db_url, sources[sub.chapter])
        reports.append(report)
        if on_progress:
            on_progress(report)
    reports.sort(key=lambda r: (r.student, r.chapter))
    return reports


def _execute_all(todo, options, jobs):
    """Yield (submission, fingerprint, worker outcome or exception) as executions finish."""
    if jobs == 1 or len(todo) <= 1:
        for sub, nb_json, fp in todo:
            try:
                yield sub, fp, run_one((nb_json, options))
            except Exception as exc:
                yield sub, fp, exc
        return
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(run_one, (nb_json, options)): (sub, fp) for sub, nb_json, fp in todo}
        for future in concurrent.futures.as_completed(futures):
            sub, fp = futures[future]
            try:
                yield sub, fp, future.result()
            except Exception as exc:  # a worker crashed: that submission only
                yield sub, fp, exc


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
