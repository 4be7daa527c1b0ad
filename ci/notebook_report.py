"""The notebook runner's timing report: one JSON per execution, summary.json and summary.md."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path


def _verdict(r) -> str:
    if not r.ok:
        return "FAIL"
    return f"skipped: {r.skipped}" if r.skipped else "ok"


def write_reports(
    results: list, report_dir: Path, *, device: str, fast: bool, jobs: int = 1,
    wall_seconds: float | None = None,
) -> None:
    """One JSON file per execution, plus summary.json and summary.md (the timing report)."""
    report_dir.mkdir(parents=True, exist_ok=True)
    for r in results:
        (report_dir / f"{r.chapter}.{r.mode}.json").write_text(json.dumps(asdict(r), indent=2) + "\n")
    summary = {
        "device": device, "fast": fast, "jobs": jobs, "wall_seconds": wall_seconds,
        "results": [asdict(r) for r in results],
    }
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    wall = f", {wall_seconds:.1f} s wall clock with {jobs} job(s)" if wall_seconds is not None else ""
    lines = [
        f"# Notebook run (device={device}, fast={fast}{wall})",
        "",
        "| chapter | mode | seconds | code cells run | result | timeout (s) | skipped cells |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.chapter} | {r.mode} | {r.seconds:.1f} | {r.code_cells_run} | {_verdict(r)} |"
            f" {r.timeout if r.timeout is not None else ''} | {'; '.join(r.skipped_cells)} |"
        )
    failures = [f for r in results for f in r.failures]
    if failures:
        lines += ["", "## Failures", ""] + [f"- {f}" for f in failures]
    (report_dir / "summary.md").write_text("\n".join(lines) + "\n")
