"""Execute the course's notebooks with papermill and check that they behave as promised.

Two modes, per chapter:

* ``solution``: the source notebook in solutions/ must run top to bottom without an error.
* ``release``: the student release, with the hidden tests put back and every test cell split
  into its visible part and its hidden part, must run with every exercise cell failing
  (the unsolved stubs raise) and every other cell passing. A test part that passes on the
  stub cannot tell a wrong answer from a right one: it is reported as *vacuous*.

A notebook without a ``parameters`` cell, one that ran no code, or one that ran past its
timeout is a failure too. Each execution writes a JSON report; the exit status is non-zero
when anything failed, and every failure is listed.

    python ci/run_notebooks.py [CHAPTER ...] [--mode both] [--fast] [--device cpu] [--jobs 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
from nbformat import NotebookNode  # noqa: E402

from grader import cells, project  # noqa: E402
from grader.release import build_release, read  # noqa: E402

RAISES = "raises-exception"  # nbclient lets a cell with this tag raise and goes on
DEFAULT_TIMEOUT = 600


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


def execute(job: tuple[str, str, str, bool, int, str]) -> Result:
    """Run one chapter in one mode (in a worker process) and judge the result."""
    chapter, mode, device, fast, timeout, solutions_dir = job
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source_path = project.source_notebook(chapter, Path(solutions_dir))
    result = Result(chapter=chapter, mode=mode, notebook=_display(source_path))
    nb = read(source_path)
    labels: list[str] = []
    if mode == "release":
        nb, labels = graded_view(chapter, source_path)
        result.notebook = f"notebooks/{chapter}/{source_path.name}"
    if cells.parameters_cell_index(nb) is None:
        result.failures.append(f"{result.notebook}: no cell tagged 'parameters'")
        return result
    params = {"DEVICE": device, "SEED": 0, "FAST": fast}
    start = time.perf_counter()
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
            result.failures.append(f"{result.notebook}: execution stopped: {type(exc).__name__}: {exc}")
            return result
    result.seconds = time.perf_counter() - start
    result.code_cells_run = sum(
        1 for c in executed.cells if c.cell_type == "code" and c.get("execution_count")
    )
    if result.code_cells_run == 0:
        result.failures.append(f"{result.notebook}: ran no code")
    if mode == "release":
        for index, cell in enumerate(executed.cells):
            if cell.cell_type != "code":
                continue
            part = cell.get("metadata", {}).get("course", {}).get("part")
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
        if not labels:
            result.failures.append(f"{result.notebook}: has no graded test cell")
    result.ok = not result.failures
    return result


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
) -> list[Result]:
    """Execute every (chapter, mode) pair, ``jobs`` at a time; write reports when asked."""
    todo = [(c, m, device, fast, timeout, str(solutions_dir)) for c in chapters for m in modes]
    if jobs <= 1 or len(todo) == 1:
        results = [execute(job) for job in todo]
    else:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            results = list(pool.map(execute, todo))
    if report_dir is not None:
        write_reports(results, report_dir, device=device, fast=fast)
    return results


def write_reports(results: list[Result], report_dir: Path, *, device: str, fast: bool) -> None:
    """One JSON file per execution, plus summary.json and summary.md."""
    report_dir.mkdir(parents=True, exist_ok=True)
    for r in results:
        (report_dir / f"{r.chapter}.{r.mode}.json").write_text(json.dumps(asdict(r), indent=2) + "\n")
    summary = {"device": device, "fast": fast, "results": [asdict(r) for r in results]}
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        f"# Notebook run (device={device}, fast={fast})",
        "",
        "| chapter | mode | seconds | code cells run | result |",
        "|---|---|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.chapter} | {r.mode} | {r.seconds:.1f} | {r.code_cells_run} | {'ok' if r.ok else 'FAIL'} |"
        )
    (report_dir / "summary.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapters (01 or 01_tensors); all by default")
    parser.add_argument("--mode", choices=["solution", "release", "both"], default="both")
    parser.add_argument("--device", default="cpu", help="value of the DEVICE parameter (default: cpu)")
    parser.add_argument("--fast", action="store_true", help="set FAST=True (smaller sizes)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks executed at once")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="per-cell timeout, seconds")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "ci-reports", help="where reports go")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    chapters = project.resolve_chapters(args.chapters)
    if not chapters:
        print("no chapters found in solutions/", file=sys.stderr)
        return 2
    modes = ["solution", "release"] if args.mode == "both" else [args.mode]
    results = run(
        chapters, modes, device=args.device, fast=args.fast, jobs=args.jobs,
        timeout=args.timeout, report_dir=args.report_dir,
    )
    for r in results:
        print(f"{'ok  ' if r.ok else 'FAIL'} {r.chapter:<22} {r.mode:<8} {r.seconds:6.1f} s")
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
