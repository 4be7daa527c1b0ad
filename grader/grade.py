"""``course grade``: auto-grade every submission into the workspace's gradebook.

The coordinating process reads and sanitises submissions, owns the gradebook and writes
every result; workers only execute notebooks (no gradebook handle, no solutions), so one
misbehaving submission costs that submission and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import OverwriteCells

from grader import cells, dispatch, instrument, pipeline, project, reference
from grader import gradebook as gbmod
from grader.dispatch import DEFAULT_ENGINE, ENGINES
from grader.execute import ExecOptions, Execution
from grader.intake import Submission, discover, extract_lms_zip
from grader.integrity import Finding, scan
from grader.release import build_release
from grader.verdict import PASSED, TestResult, score

log = logging.getLogger(__name__)

#: Bump when a change to grading could change a score: cached results are then redone.
GRADER_REVISION = "2"



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
    name: str | None = None  # the student's folder name when ``student`` was derived from it


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
        data = json.loads(raw.decode("utf-8-sig"))  # Windows editors may write a byte-order mark
    except UnicodeDecodeError as exc:
        raise ValueError(f"the file is not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the file is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict) or "cells" not in data and "worksheets" not in data:
        raise ValueError("the file is JSON but not a Jupyter notebook")
    try:
        nb = nbformat.reads(raw.decode("utf-8-sig"), as_version=4)
    except Exception as exc:
        raise ValueError(f"the notebook could not be read ({type(exc).__name__}: {exc})") from None
    return nb


def _fingerprint(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:32]


def prepare(nb: NotebookNode, chapter: str, notebook: str, db_url: str, release: NotebookNode, device: str,
            tests: dict[str, instrument.TestSource] | None = None) -> NotebookNode:
    """Sanitise a submission (restore test cells, metadata), inject the grading parameters and
    put the grader's version of every test cell in place (see :mod:`grader.instrument`)."""
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
    nb, resources = pipeline.run(
        pipeline.SANITIZE, nb, resources, config={OverwriteCells: {"add_missing_cells": True}}
    )
    forgotten = resources.get("course", {}).get("forgotten", [])
    if forgotten:
        nb.metadata["course_forgotten"] = forgotten
    if cells.parameters_cell_index(nb) is None:
        # papermill puts the injected parameters on top when the tagged cell is gone
        log.info("%s: the parameters cell is missing; parameters go on top", notebook)
    return reference.grading_notebook(nb, tests or {}, device)


def learner_findings(nb: NotebookNode, release: NotebookNode) -> list[Finding]:
    """Suspicious code in the cells the learner wrote (answer cells and any cell added)."""
    released = {_code_shape(cells.source_text(c)) for c in release.cells if c.cell_type == "code"}
    found: list[Finding] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cells.is_test(cell) or cells.has_tag(cell, "injected-parameters"):
            continue
        text = cells.source_text(cell)
        if _code_shape(text) in released:  # a released cell, give or take comments and spacing
            continue
        found.extend(scan(text, i))
    return found


def _code_shape(source: str) -> str:
    """The code of a cell without its comments, blank lines, spacing or line-ending style."""
    import ast

    text = source.replace("\r\n", "\n").replace("\r", "\n")
    try:
        return ast.dump(ast.parse(text))
    except SyntaxError:
        return text.strip()


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
    tests: dict[str, dict[str, instrument.TestSource]] = {}
    for chapter in sorted({s.chapter for s in found if s.chapter in sources}):
        gbmod.register_chapter(db_url, chapter, sources[chapter])
        releases[chapter] = build_release(chapter, sources[chapter])
        tests[chapter] = instrument.chapter_tests(nbformat.read(str(sources[chapter]), as_version=4))
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

    # The solutions' runs, before any learner code of this batch runs (see grader.reference).
    references: dict[str, dict[str, list[dict]]] = {}
    for chapter in sorted({sub.chapter for sub, *_ in candidates}):
        options = chapter_options(base, sources[chapter].parent)
        try:
            references[chapter] = reference.run(
                chapter, sources[chapter], options, engine, GRADER_REVISION, ws.root / "reference"
            )
        except Exception as exc:  # the chapter cannot be graded: every test says why
            log.error("the reference run of %s failed: %s", chapter, exc)
            references[chapter] = {}
    findings_of: dict[tuple[str, str], list[Finding]] = {}

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
                prepared = prepare(nb, chapter, source.stem, db_url, releases[chapter], device, tests[chapter])
            except Exception as exc:  # the notebook is readable but cannot be prepared: say why
                log.exception("preparing %s failed", sub.key)
                reason = f"could not prepare the notebook: {type(exc).__name__}: {exc}"
                not_executed(_unreadable(sub, "error", reason, db_url, sources, fingerprint=fp, ws=ws))
                continue
            forgotten = prepared.metadata.pop("course_forgotten", [])
            if forgotten:
                ignored = f"ignored graded cell(s) this chapter does not have: {', '.join(forgotten)}"
                sub.note = "; ".join(filter(None, [sub.note, ignored]))
            findings = learner_findings(prepared, releases[chapter])
            findings_of[(sub.student, chapter)] = findings
            yield sub, nbformat.writes(prepared), fp, options, [asdict(f) for f in findings]

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(candidates)))
    if on_start:
        on_start(len(candidates))
    for sub, fp, outcome in dispatch.execute_all(todo(), jobs, engine, scheduler):
        judged = (references.get(sub.chapter, {}), tests[sub.chapter], findings_of.pop((sub.student, sub.chapter), []))
        report = _record(ws, sub, fp, outcome, db_url, sources[sub.chapter], judged)
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


def _record(ws: Workspace, sub: Submission, fp: str, outcome, db_url: str, source: Path, judged: tuple) -> Report:
    """Score an executed submission here, in the coordinator, and record it."""
    if isinstance(outcome, Exception):
        report = Report(sub.student, sub.chapter, "error", message=f"grading failed: {type(outcome).__name__}: {outcome}",
                        name=sub.name)
        tests = [TestResult(g, 0.0, m, "not run", "grading failed") for g, m in _test_points(source).items()]
        report.tests = [t.to_dict() for t in tests]
    else:
        nb_json, info = outcome
        out = ws.autograded / sub.student / sub.chapter / source.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(nb_json, encoding="utf-8")
        execution = Execution(
            nb=nbformat.reads(nb_json, as_version=4),
            timed_out=list(info.get("timed_out", [])),
            died=list(info.get("died", [])),
            not_run_from=info.get("not_run_from"),
            tampered={int(k): v for k, v in info.get("tampered", {}).items()},
            error=info.get("error"),
            restarts=info.get("restarts", 0),
        )
        refs, chapter_tests, findings = judged
        report = Report(sub.student, sub.chapter, "graded", message=sub.note or "", name=sub.name)
        report.tests = [t.to_dict() for t in score(execution, refs, chapter_tests, findings)]
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
    gbmod.save_scores(db_url, chapter, source.stem, report.student, scores, name=report.name)
    total = gbmod.student_scores(db_url, chapter, report.student)
    report.score, report.max_score = total if total else (sum(scores.values()), sum(points.values()))
    report.fingerprint = fp
    _write_json(ws.result_path(report.student, chapter), asdict(report))


def _unreadable(sub: Submission, status: str, reason: str, db_url: str, sources: dict[str, Path], *, fingerprint: str = "", ws: Workspace | None = None) -> Report:
    report = Report(sub.student, sub.chapter, status, message=reason, name=sub.name)
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
