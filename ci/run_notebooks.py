"""Execute the course's notebooks with papermill and check that they behave as promised.

Two modes, per chapter:

* ``solution``: the source notebook in solutions/ must run top to bottom without an error.
* ``release``: the student release, with the hidden tests put back and every test cell split
  into its visible part and its hidden part, must run with every exercise cell failing
  (the unsolved stubs raise) and every other cell passing. A test part that passes on the
  stub cannot tell a wrong answer from a right one: it is reported as *vacuous*.

A notebook without a ``parameters`` cell, one that ran no code, or one that ran past its
timeout is a failure too. ci/manifest.toml gives each notebook its wall-clock timeout (for
one execution, kernel start included), says whether it needs a GPU, and which notebooks or
cells are skipped on which runner, each skip with its reason (see ci/notebook_manifest.py).
Each execution writes a JSON report, and a summary in JSON and Markdown; the exit status is
non-zero when anything failed, and every failure is listed.

    python ci/run_notebooks.py [CHAPTER ...] [--mode both] [--fast] [--device cpu] [--jobs 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import math
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
from nbformat import NotebookNode  # noqa: E402

from grader import cells, project  # noqa: E402
from grader.prepare.release import build_release, read  # noqa: E402

if str(ROOT / "ci") not in sys.path:  # the runner's own modules
    sys.path.insert(0, str(ROOT / "ci"))
import notebook_manifest  # noqa: E402
from notebook_report import write_reports  # noqa: E402

RAISES = "raises-exception"  # nbclient lets a cell with this tag raise and goes on
DEFAULT_TIMEOUT = 600  # per cell, seconds; the whole notebook's limit comes from the manifest
SKIPPED = "# skipped on {runner} by ci/manifest.toml: {reason}"


@dataclass
class Result:
    """What one execution of one notebook showed."""

    chapter: str
    mode: str
    notebook: str
    ok: bool = False
    seconds: float = 0.0
    code_cells_run: int = 0
    failures: list[str] = field(default_factory=list)
    timeout: int | None = None  # wall-clock limit of this execution (ci/manifest.toml)
    skipped: str = ""  # why the notebook was not executed on this runner ("" when it was)
    skipped_cells: list[str] = field(default_factory=list)  # "cell <id>: <reason>"


class Job(NamedTuple):
    """One execution: a chapter in a mode, with what the manifest says for this runner."""

    chapter: str
    mode: str
    device: str
    fast: bool
    timeout: int  # per cell, seconds
    solutions_dir: str
    notebook_timeout: int | None = None  # wall clock for the whole execution, seconds
    skip_reason: str = ""
    skip_cells: tuple[tuple[str, str], ...] = ()  # (cell id, reason)


def graded_view(chapter: str, source_path: Path) -> tuple[NotebookNode, list[str]]:
    """The release as the grader sees it, each test cell split in visible and hidden parts.

    Returns the notebook, with answer and test cells tagged ``raises-exception``, and the
    labels of the test parts in order (``test_ex1 (visible)``, ``test_ex1 (hidden)``).
    """
    source = read(source_path)
    by_id = {cells.grade_id(c): c for c in source.cells if cells.grade_id(c)}
    release = build_release(chapter, source_path)
    out_cells, labels = [], []
    for cell in release.cells:
        gid = cells.grade_id(cell)
        if cells.is_test(cell):
            visible, hidden = cells.split_hidden(cells.source_text(by_id[gid]))
            for part, text in (("visible", visible), ("hidden", hidden)):
                if not text.strip():
                    continue
                new = copy.deepcopy(cell)
                new.source = text
                new.id = f"{cell.id}-{part}"
                new.metadata.setdefault("course", {})["part"] = f"{gid} ({part})"
                cells.add_tag(new, RAISES)
                out_cells.append(new)
                labels.append(f"{gid} ({part})")
        else:
            if cells.is_solution(cell):
                cells.add_tag(cell, RAISES)
            out_cells.append(cell)
    release.cells = out_cells
    return release, labels


def _display(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _error_of(cell: NotebookNode) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {out.get('evalue')}"
    return None


def skip_cells(nb: NotebookNode, skips: dict[str, str], runner: str) -> tuple[list[str], list[str]]:
    """Blank the cells the manifest skips on this runner; returns (skipped, unknown ids).

    A cell is named by its id; in the release's graded view the parts of a split test cell
    (``<id>-visible``, ``<id>-hidden``) are skipped with it. A skipped cell keeps its place
    and says why it did not run, and is not judged.
    """
    skipped, seen = [], set()
    for cell in nb.cells:
        cid = cell.get("id", "")
        base = next((k for k in skips if cid == k or cid in (f"{k}-visible", f"{k}-hidden")), None)
        if base is None:
            continue
        seen.add(base)
        cell.cell_type = "code"
        cell.source = SKIPPED.format(runner=runner, reason=skips[base])
        cell.setdefault("outputs", [])
        cell.setdefault("execution_count", None)
        cell.metadata.setdefault("course", {})["skipped"] = skips[base]
        cell.metadata["course"].pop("part", None)
        if "tags" in cell.metadata and RAISES in cell.metadata.tags:
            cell.metadata.tags.remove(RAISES)
        skipped.append(f"cell {cid}: {skips[base]}")
    return skipped, sorted(set(skips) - seen)


def _budget(notebook_timeout: int | None, cell_timeout: int, start: float):
    """nbclient's ``timeout_func``: a cell may run at most what is left of the notebook's time."""
    if notebook_timeout is None:
        return None
    deadline = start + notebook_timeout

    def timeout_for(cell) -> int:
        left = math.ceil(deadline - time.perf_counter())
        return max(1, min(cell_timeout, left))  # 0 would mean "no timeout" to nbclient

    return timeout_for


def execute(job: Job | tuple) -> Result:
    """Run one chapter in one mode (in a worker process) and judge the result.

    ``job`` is a :class:`Job`, or the older 6-tuple ``(chapter, mode, device, fast,
    cell timeout, solutions dir)``, which runs without a notebook timeout or skips.
    """
    job = Job(*job)
    chapter, mode, device, fast, timeout, solutions_dir = job[:6]
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source_path = project.source_notebook(chapter, Path(solutions_dir))
    result = Result(chapter=chapter, mode=mode, notebook=_display(source_path), timeout=job.notebook_timeout)
    nb = read(source_path)
    labels: list[str] = []
    if mode == "release":
        nb, labels = graded_view(chapter, source_path)
        result.notebook = f"notebooks/{chapter}/{source_path.name}"
    if cells.parameters_cell_index(nb) is None:
        result.failures.append(f"{result.notebook}: no cell tagged 'parameters'")
        return result
    if job.skip_reason:
        result.skipped = job.skip_reason
        result.ok = True
        return result
    runner = notebook_manifest.runner_of(device)
    result.skipped_cells, unknown = skip_cells(nb, dict(job.skip_cells), runner)
    for cid in unknown:
        result.failures.append(
            f"{result.notebook}: ci/manifest.toml skips cell {cid!r}, but the notebook has no cell with"
            " that id (was it renamed? fix the manifest)"
        )
    if unknown:
        return result
    labels = [label for label in labels if any(
        c.get("metadata", {}).get("course", {}).get("part") == label for c in nb.cells)]
    params = {"DEVICE": device, "SEED": 0, "FAST": fast}
    start = time.perf_counter()
    budget = _budget(job.notebook_timeout, timeout, start)
    with tempfile.TemporaryDirectory(prefix=f"run-{chapter}-") as cwd:
        out_path = Path(cwd) / "executed.ipynb"
        try:
            executed = papermill.execute_notebook(
                nb,
                str(out_path),
                parameters=params,
                kernel_name="python3",
                cwd=cwd,
                progress_bar=False,
                execution_timeout=timeout,
                **({"timeout_func": budget} if budget else {}),
            )
        except PapermillExecutionError as exc:
            if mode == "solution":
                result.seconds = time.perf_counter() - start
                result.failures.append(
                    f"{result.notebook}: cell {exc.exec_count} raised {exc.ename}: {exc.evalue}"
                )
                return result
            # In the release, exercise cells are expected to raise (they carry the
            # raises-exception tag, so execution went on); judge every cell below.
            executed = nbformat.read(str(out_path), as_version=4)
        except Exception as exc:  # a timeout, a dead kernel: the notebook failed, say how
            result.seconds = time.perf_counter() - start
            if job.notebook_timeout is not None and result.seconds >= job.notebook_timeout - 1:
                result.failures.append(_too_slow(result, job.notebook_timeout))
            else:
                result.failures.append(f"{result.notebook}: execution stopped: {type(exc).__name__}: {exc}")
            return result
    result.seconds = time.perf_counter() - start
    if job.notebook_timeout is not None and result.seconds > job.notebook_timeout:
        result.failures.append(_too_slow(result, job.notebook_timeout))
    result.code_cells_run = sum(
        1 for c in executed.cells if c.cell_type == "code" and c.get("execution_count")
    )
    if result.code_cells_run == 0:
        result.failures.append(f"{result.notebook}: ran no code")
    if mode == "release":
        not_run = []
        for index, cell in enumerate(executed.cells):
            if cell.cell_type != "code":
                continue
            meta = cell.get("metadata", {}).get("course", {})
            if meta.get("skipped"):
                continue
            part = meta.get("part")
            if part and cell.get("execution_count") is None:
                not_run.append(part)  # execution stopped before it: neither pass nor fail
                continue
            error = _error_of(cell)
            if not cells.has_tag(cell, RAISES) and error is not None:
                result.failures.append(
                    f"{result.notebook}: cell {index} is not an exercise but raised {error} on the"
                    " release (does a demo call an exercise's function?)"
                )
            if part and error is None:
                result.failures.append(
                    f"{result.notebook}: {part} passes on the unsolved stub: the test is vacuous"
                )
        if not_run:
            result.failures.append(
                f"{result.notebook}: execution stopped before {len(not_run)} test part(s) ran"
                f" ({', '.join(not_run)}): fix the error above, then they are checked"
            )
        if not labels and not result.skipped_cells:
            result.failures.append(f"{result.notebook}: has no graded test cell")
    result.ok = not result.failures
    return result


def _too_slow(result: Result, limit: int) -> str:
    return (
        f"{result.notebook}: ran past its timeout ({result.seconds:.0f} s > {limit} s, wall clock for the"
        " whole notebook): make it faster (FAST sizes?) or raise `timeout` in ci/manifest.toml"
    )


def plan(
    chapters: list[str],
    modes: list[str],
    *,
    device: str = "cpu",
    fast: bool = False,
    timeout: int = DEFAULT_TIMEOUT,
    solutions_dir: Path = project.SOLUTIONS,
    manifest: notebook_manifest.Manifest | None = None,
) -> list[Job]:
    """The executions to run, in order, with the manifest's settings for this runner."""
    manifest = manifest if manifest is not None else notebook_manifest.load()
    runner = notebook_manifest.runner_of(device)
    jobs = []
    for chapter in chapters:
        settings = manifest.settings(chapter)
        for mode in modes:
            jobs.append(Job(
                chapter, mode, device, fast, timeout, str(solutions_dir),
                notebook_timeout=settings.timeout,
                skip_reason=settings.skip_reason(runner, mode) or "",
                skip_cells=tuple(settings.skipped_cells(runner, mode).items()),
            ))
    return jobs


def run(
    chapters: list[str],
    modes: list[str],
    *,
    device: str = "cpu",
    fast: bool = False,
    jobs: int = 1,
    timeout: int = DEFAULT_TIMEOUT,
    report_dir: Path | None = None,
    solutions_dir: Path = project.SOLUTIONS,
    manifest: notebook_manifest.Manifest | Path | None = None,
) -> list[Result]:
    """Execute every (chapter, mode) pair, ``jobs`` at a time; write reports when asked.

    Args:
        timeout: per-cell limit, seconds; the whole notebook's limit is the manifest's.
        manifest: a :class:`notebook_manifest.Manifest`, a path to one, or None for
            ci/manifest.toml.

    Returns:
        One :class:`Result` per (chapter, mode), in the order given.
    """
    if isinstance(manifest, Path):
        manifest = notebook_manifest.load(manifest)
    todo = plan(chapters, modes, device=device, fast=fast, timeout=timeout,
                solutions_dir=solutions_dir, manifest=manifest)
    started = time.perf_counter()
    if jobs <= 1 or len(todo) == 1:
        results = [execute(job) for job in todo]
    else:
        # longest first (the manifest's timeout is the estimate), so no worker idles at the end
        order = sorted(range(len(todo)), key=lambda i: -(todo[i].notebook_timeout or 0))
        results: list[Result] = [None] * len(todo)  # type: ignore[list-item]
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {pool.submit(execute, todo[i]): i for i in order}
            for future in concurrent.futures.as_completed(futures):
                results[futures[future]] = future.result()
    if report_dir is not None:
        write_reports(results, report_dir, device=device, fast=fast, jobs=jobs,
                      wall_seconds=time.perf_counter() - started)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapters (01 or 01_tensors); all by default")
    parser.add_argument("--mode", choices=["solution", "release", "both"], default="both")
    parser.add_argument("--device", default="cpu", help="value of the DEVICE parameter (default: cpu)")
    parser.add_argument("--fast", action="store_true", help="set FAST=True (smaller sizes)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks executed at once")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="per-cell timeout, seconds")
    parser.add_argument("--manifest", type=Path, default=notebook_manifest.MANIFEST,
                        help="per-notebook timeouts, GPU needs and skips (default: ci/manifest.toml)")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "ci-reports", help="where reports go")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    try:
        manifest = notebook_manifest.load(args.manifest)
    except notebook_manifest.ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    chapters = project.resolve_chapters(args.chapters)
    if not chapters:
        print("no chapters found in solutions/", file=sys.stderr)
        return 2
    for name in sorted(set(manifest.chapters) - set(project.chapters())):
        print(f"note: {args.manifest} names {name}, which has no notebook in solutions/ yet", file=sys.stderr)
    modes = ["solution", "release"] if args.mode == "both" else [args.mode]
    results = run(
        chapters, modes, device=args.device, fast=args.fast, jobs=args.jobs,
        timeout=args.timeout, report_dir=args.report_dir, manifest=manifest,
    )
    for r in results:
        print(f"{'ok  ' if r.ok else 'FAIL'} {r.chapter:<22} {r.mode:<8} {r.seconds:6.1f} s"
              + (f"  (skipped: {r.skipped})" if r.skipped else "")
              + (f"  ({len(r.skipped_cells)} cell(s) skipped)" if r.skipped_cells else ""))
    failures = [f for r in results for f in r.failures]
    if failures:
        print(f"\n{len(failures)} failure(s):", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    print(f"\nall {len(results)} notebook runs behaved as promised; reports in {args.report_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
