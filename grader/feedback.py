"""``course feedback``: per-student HTML that says which test failed and why, never how it tests."""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_markdown_cell, new_output

from course_utils.observe import MIME
from grader import cells, project
from grader.grade import Workspace
from grader.release import build_release

log = logging.getLogger(__name__)

#: Marks drawn from common fonts (DejaVu has them), so they show wherever the page is opened.
ICON = {"passed": "✓"}
FAIL_ICON = "✗"
AFTER_TESTS = "(output not shown: this cell ran after the grader's tests)\n"


def summary_markdown(result: dict) -> str:
    """The table on top of a feedback page: each test's name, points, status and reason."""
    lines = [
        f"# Feedback — {result['chapter']} — {result['student']}",
        "",
        f"**Score: {result['score']:g} / {result['max_score']:g}**"
        + (f" — {html.escape(result['message'])}" if result.get("message") else ""),
        "",
        "| test | points | result | why |",
        "|---|---:|---|---|",
    ]
    for t in result.get("tests", []):
        reason = html.escape(t.get("reason", "")).replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| `{t['grade_id']}` | {t['points']:g} / {t['max_points']:g} | "
            f"{ICON.get(t['status'], FAIL_ICON)} {t['status']} | {reason} |"
        )
    return "\n".join(lines)


#: What of a learner's rich output a page may show: text and pictures, never markup or script.
INERT = ("text/plain", "image/png", "image/jpeg")


def inert(outputs: list) -> list:
    """The outputs as plain text and images only (no HTML, SVG, JavaScript, widgets, observations)."""
    kept = []
    for out in outputs:
        if out.get("output_type") in ("display_data", "execute_result"):
            data = {k: v for k, v in out.get("data", {}).items() if k in INERT}
            if not data or MIME in out.get("data", {}):
                continue
            out = dict(out, data=data, metadata={})
        kept.append(out)
    return kept


def redact(nb: NotebookNode, release: NotebookNode, result: dict) -> NotebookNode:
    """Show each test cell as the learner received it, with its verdict instead of its output.

    The grader ran the hidden tests; their source, and any traceback that could quote it,
    is replaced here by the visible tests and a one-line result.
    """
    visible = {cells.grade_id(c): cells.source_text(c) for c in release.cells if cells.is_test(c)}
    verdicts = {t["grade_id"]: t for t in result.get("tests", [])}
    tests_ran = False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("papermill", None)
        if not cells.is_test(cell):
            if tests_ran:  # whatever the learner's code printed once hidden tests had run stays out
                cell.outputs = [new_output("stream", name="stdout", text=AFTER_TESTS)] if cell.get("outputs") else []
            else:
                cell.outputs = inert(cell.get("outputs", []))
            continue
        tests_ran = True
        gid = cells.grade_id(cell)
        cell.source = visible.get(gid, "# (tests)")
        t = verdicts.get(gid)
        text = (
            f"{ICON.get(t['status'], FAIL_ICON)} {t['status']} ({t['points']:g}/{t['max_points']:g} points)"
            + (f": {t['reason']}" if t.get("reason") else "")
            if t
            else "not graded"
        )
        cell.outputs = [new_output("stream", name="stdout", text=text + "\n")]
    nb.cells.insert(0, new_markdown_cell(summary_markdown(result)))
    # drop the injected-parameters cell: it is grading machinery, not the learner's work
    nb.cells = [c for c in nb.cells if not cells.has_tag(c, "injected-parameters")]
    return nb


def main(workdir: Path, *, solutions_dir: Path = project.SOLUTIONS) -> list[Path]:
    """Write ``feedback/<student>/<chapter>/<notebook>.html`` for every graded result."""
    from nbconvert import HTMLExporter

    ws = Workspace(workdir)
    exporter = HTMLExporter(template_name="lab")
    releases: dict[str, NotebookNode] = {}
    written = []
    for result_path in sorted(ws.results.glob("*/*.json")):
        result = json.loads(result_path.read_text(encoding="utf-8"))
        chapter, student = result["chapter"], result["student"]
        source = project.source_notebook(chapter, solutions_dir)
        if chapter not in releases:
            releases[chapter] = build_release(chapter, source)
        autograded = ws.autograded / student / chapter / source.name
        if autograded.exists():
            nb = nbformat.read(str(autograded), as_version=4)
        else:  # nothing ran (unreadable or missing): the page is the summary alone
            nb = nbformat.v4.new_notebook()
        nb = redact(nb, releases[chapter], result)
        body, _ = exporter.from_notebook_node(nb)
        out = ws.feedback / student / chapter / f"{source.stem}.html"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(body, encoding="utf-8")
        written.append(out)
    return written
