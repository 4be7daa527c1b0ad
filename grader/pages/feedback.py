"""``course feedback``: per-student HTML that says which test failed and why, never how it tests.

Pages go to ``WORKDIR/course-feedback/<student>/<chapter>/<notebook>.html`` beside one shared
``feedback.css`` (nbgrader's own ``feedback/`` folder is left to nbgrader, which the workspace's
``nbgrader_config.py`` stops from writing pages there: :mod:`grader.intake.interop`). Scores and
comments come from the gradebook at the time the pages are made, so a manual grade entered in
formgrader shows on the page and the rows add up to the score. Pages are built in parallel; a
page that cannot be built is reported (student and chapter) and the others are written.
"""

from __future__ import annotations

import json
import logging
import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from grader import cells, project
from grader.escaping import html_text
from grader.intake import interop
from grader.intake.lms_names import shown
from grader.intake.workspace import Workspace
from grader.pages import markup as pages
from grader.record import review
from grader.verdict import hints

log = logging.getLogger(__name__)

FEEDBACK_DIR = interop.FEEDBACK_DIR
STYLESHEET = "feedback.css"
#: Marks drawn from common fonts (DejaVu has them), so they show wherever the page is opened.
ICON = {"passed": "✓", "not graded yet": "…"}
FAIL_ICON = "✗"
AFTER_TESTS = "(output not shown: this cell ran after the grader's tests)\n"
#: What of a learner's rich output a page may show: text and pictures, never markup or script.
INERT = ("text/plain", "image/png", "image/jpeg")
#: Outputs the grader's checks emit (:data:`course_utils.observe.MIME`): data, never shown. Matched
#: by prefix, so that building pages does not import course_utils (and torch with it).
OBSERVATION_PREFIX = "application/vnd.course."
#: A result the grader could not grade (its status): the page shows no score, and no test of it
#: a number, until it is graded again (:data:`grader.record.export.NOT_GRADED`).
NOT_GRADED = ("error",)
#: What a test the grader could not judge says on the page, and the line under the title.
PENDING = "not graded yet"
PENDING_NOTE = ("This notebook has not been graded yet: grading it could not be completed this time. It will be "
                "graded again, with nothing to change on your side, and this page will then show its score.")
#: What a status other than a grade means, in the learner's words (the instructor's reason stays in the report).
STATUS_WORDS = {
    "missing": "No notebook of this chapter was received from you, so nothing could be graded.",
    "unreadable": "The file received from you could not be opened as a notebook, so nothing could be graded. "
                  "Hand in the .ipynb file the notebook's last cell (submit) wrote.",
    "wrong chapter": "The notebook received from you is not this chapter's, so nothing could be graded. "
                     "Hand in this chapter's notebook.",
}
NOT_GRADED_WORDS = "Your notebook was not graded. Your instructor has the details."
#: A worker costs a fork and its start (~0.1 s); below this many pages each, one process is faster.
MIN_PAGES_PER_WORKER = 50


def feedback_dir(workdir: Path) -> Path:
    """Where ``course feedback`` writes (never nbgrader's ``feedback/``)."""
    return workdir / FEEDBACK_DIR


#: What a practice test shows where a counted test shows its points.
PRACTICE = "practice, not counted"


def _points(t: dict) -> str:
    return PRACTICE if cells.is_practice_result(t) else f"{t['points']:g} / {t['max_points']:g}"


def learner_view(result: dict) -> dict:
    """``result`` as its page shows it: a submission the grader could not grade has no score, and
    each test it could not judge says "not graded yet" (no points, no reason meant for the
    instructor); the tests it did judge keep their result, without points."""
    if result.get("status") not in NOT_GRADED:
        return result
    tests = []
    for t in result.get("tests", []):
        judged = t.get("status") not in ("no reference", "not run")
        tests.append(dict(t, pending=True, **({} if judged else {"status": PENDING, "reason": ""})))
    return dict(result, tests=tests, message="", pending=True)


def verdict_line(t: dict | None) -> str:
    """What a test cell shows on the page instead of its output."""
    if t is None:
        return "not graded"
    line = f"{ICON.get(t['status'], FAIL_ICON)} {t['status']}"
    if t.get("pending"):
        return line + (f": {t['reason']}" if t.get("reason") else "")
    if cells.is_practice_result(t):
        line += f" ({PRACTICE})"
    elif t.get("manual"):
        line += f" (the grader's tests gave {t.get('auto_points', 0):g}; manual grade {_points(t)} points)"
    else:
        line += f" ({t['points']:g}/{t['max_points']:g} points)"
    if t.get("reason"):
        line += f": {t['reason']}"
    if t.get("comment"):
        line += f"\ncomment: {t['comment']}"
    return line


def _why(reason: str, esc) -> str:
    """A reason as its cell shows it: what happened, then the exercise's hint on a line of its own."""
    what, lead, hint = reason.partition(hints.LEAD)
    if not lead:
        return esc(reason)
    return f'{esc(what)}<br><span class="hint"><strong>What to try:</strong> {esc(hint)}</span>'


def title(result: dict) -> str:
    """``Feedback — 01_tensors — José Núñez``: the learner's own name (capped; escaped where shown)."""
    return f"Feedback — {result['chapter']} — {shown(str(result.get('name') or result['student']))}"


def status_words(result: dict) -> str:
    """What the learner reads under the score: why nothing was graded, in their words; that the
    notebook was handed in late; which upload was graded. Never the instructor's notes."""
    status = result.get("status") or "graded"
    said = [] if status == "graded" else [STATUS_WORDS.get(status, NOT_GRADED_WORDS)]
    if result.get("file") and status == "graded":
        later = " (your latest upload)" if result.get("superseded") else ""
        said.append(f"Graded: {shown(str(result['file']))}{later}.")
    if result.get("late"):
        said.append("Handed in late.")
    return " ".join(said)


def summary_html(result: dict) -> str:
    """The top of a page: the score (the sum of the rows), then each test's points, result, reason, comment."""
    esc = html_text
    tests = result.get("tests", [])
    parts = [f"<h1>{esc(title(result))}</h1>"]
    if result.get("pending"):
        parts += [f"<p class=\"score\">Score: {PENDING}</p>", f"<p class=\"pending\">{esc(PENDING_NOTE)}</p>"]
    else:
        parts.append(f"<p class=\"score\">Score: {result['score']:g} / {result['max_score']:g}</p>")
        practice = [t for t in tests if cells.is_practice_result(t)]
        if practice:
            passed = sum(t["status"] == "passed" for t in practice)
            parts.append(f"<p class=\"practice\">Practice exercises: {passed} of {len(practice)} passed"
                         " (graded for feedback, not counted in the score).</p>")
        words = status_words(result)
        if words:
            parts.append(f"<p class=\"status\">{esc(words)}</p>")
    if any(t.get("manual") for t in tests):
        parts.append('<p class="manual">Some points were set by hand; the table shows them.</p>')
    rows = []
    for t in tests:
        cls = "passed" if t["status"] == "passed" else "pending" if t["status"] == PENDING else "failed"
        points = "–" if t.get("pending") else _points(t) + (' <span class="manual">(manual)</span>' if t.get("manual") else "")
        rows.append(
            f"<tr><td><code>{esc(t['grade_id'])}</code></td><td class=\"num\">{points}</td>"
            f"<td class=\"{cls}\">{ICON.get(t['status'], FAIL_ICON)} {esc(t['status'])}</td>"
            f"<td>{_why(t.get('reason', ''), esc)}</td><td class=\"comment\">{esc(t.get('comment', ''))}</td></tr>"
        )
    if rows:
        parts.append("<table><thead><tr><th>test</th><th>points</th><th>result</th><th>why</th>"
                     "<th>grader's comment</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    for name, text in sorted(result.get("comments", {}).items()):
        parts.append(f"<p class=\"comment\">Comment on <code>{esc(name)}</code>: {esc(text)}</p>")
    return "\n".join(parts)


def inert(outputs: list) -> list:
    """The outputs as plain text and images only (no HTML, SVG, JavaScript, widgets, observations)."""
    kept = []
    for out in outputs:
        if out.get("output_type") in ("display_data", "execute_result"):
            data = {k: v for k, v in out.get("data", {}).items() if k in INERT}
            if not data or any(k.startswith(OBSERVATION_PREFIX) for k in out.get("data", {})):
                continue
            out = dict(out, data=data, metadata={})
        kept.append(out)
    return kept


def redact(nb_cells: list[dict], visible: dict[str, str], result: dict) -> list[dict]:
    """Show each test cell as the learner received it, with its verdict instead of its output.

    The grader ran the hidden tests; their source, and any traceback that could quote it,
    is replaced here by the visible tests and a one-line result. Whatever the learner's cells
    printed once a test had run is left out (a cell could print what it read during a test).
    """
    verdicts = {t["grade_id"]: t for t in result.get("tests", [])}
    tests_ran, out = False, []
    for cell in nb_cells:
        if cells.has_tag(cell, "injected-parameters"):  # grading machinery, not the learner's work
            continue
        cell = dict(cell)
        if cell.get("cell_type") == "code":
            if cells.is_test(cell):
                tests_ran = True
                gid = cells.grade_id(cell)
                cell["source"] = visible.get(gid, "# (tests)")
                cell["outputs"] = [{"output_type": "stream", "name": "verdict", "text": verdict_line(verdicts.get(gid))}]
            elif tests_ran:
                cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": AFTER_TESTS}] if cell.get("outputs") else []
            else:
                cell["outputs"] = inert(cell.get("outputs") or [])
        out.append(cell)
    return out


def render(job: tuple[dict, str | None, dict[str, str], str]) -> int:
    """Write one page (run in a worker); returns its size in bytes."""
    result, autograded, visible, dest = job
    nb_cells: list[dict] = []
    if autograded is not None and os.path.exists(autograded):
        with open(autograded, encoding="utf-8") as fh:
            nb_cells = pages.valid_cells(json.load(fh))
    body = pages.page(title(result), summary_html(result), redact(nb_cells, visible, result), f"../../{STYLESHEET}")
    data = body.encode("utf-8")
    path = Path(dest)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return len(data)


def _render_or_none(job: tuple[dict, str | None, dict[str, str], str]) -> int | None:
    """:func:`render`, or None for a page that cannot be built (its traceback logged at debug level)."""
    try:
        return render(job)
    except Exception:  # noqa: BLE001 -- one page never stops the others
        log.debug("building %s failed", job[3], exc_info=True)
        return None


_todo: list[tuple[dict, str | None, dict[str, str], str]] = []


def _render_range(start: int, count: int) -> list[int | None]:
    """Render pages ``start`` .. ``start + count`` of the forked parent's list (in a worker)."""
    return [_render_or_none(job) for job in _todo[start:start + count]]


def visible_tests(chapter: str, source: Path) -> dict[str, str]:
    """Each test cell's source as the release gives it to learners (hidden tests removed)."""
    from grader.prepare.release import build_release

    release = build_release(chapter, source)
    return {cells.grade_id(c): cells.source_text(c) for c in release.cells if cells.is_test(c)}


def main(workdir: Path, *, solutions_dir: Path = project.SOLUTIONS, db_url: str | None = None,
         jobs: int | None = None) -> list[Path]:
    """Write ``course-feedback/<student>/<chapter>/<notebook>.html`` for every graded result.

    Args:
        workdir: the grading workspace.
        solutions_dir: the chapters' source notebooks (for the visible tests).
        db_url: the gradebook (manual grades and comments); the workspace's SQLite file by default.
        jobs: pages built at once (default: the CPU count; 1 builds them in this process).

    Returns:
        The pages written: a page that cannot be built is left out, with a warning naming its
        student and chapter, and the others are written.
    """
    ws = Workspace(workdir)
    interop.write_nbgrader_config(workdir)
    marks = review.read(db_url or ws.default_db_url())
    out_dir = feedback_dir(workdir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / STYLESHEET).write_bytes(pages.STYLESHEET.read_bytes())
    visible: dict[str, dict[str, str]] = {}
    todo: list[tuple[dict, str | None, dict[str, str], str]] = []
    for result_path in sorted(ws.results.glob("*/*.json")):
        result = json.loads(result_path.read_text(encoding="utf-8"))
        chapter, student = result["chapter"], result["student"]
        source = project.source_notebook(chapter, solutions_dir)
        if chapter not in visible:
            visible[chapter] = visible_tests(chapter, source)
        result = learner_view(review.merge(result, *marks.of(student, chapter)))
        autograded = ws.autograded / student / chapter / source.name
        dest = out_dir / student / chapter / f"{source.stem}.html"
        todo.append((result, str(autograded) if autograded.exists() else None, visible[chapter], str(dest)))
    workers = max(1, min(jobs or os.cpu_count() or 1, len(todo) // MIN_PAGES_PER_WORKER))
    if workers == 1:
        sizes = [_render_or_none(job) for job in todo]
    else:  # forked workers inherit the jobs and this process's imports: only page ranges travel
        global _todo
        _todo = todo
        try:
            step = -(-len(todo) // (4 * workers))
            with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
                sizes = [n for part in pool.map(_render_range, range(0, len(todo), step), [step] * len(todo))
                         for n in part]
        finally:
            _todo = []
    for job, size in zip(todo, sizes, strict=True):
        if size is None:
            log.warning("no feedback page for %s/%s: the page could not be built (course -vv shows why)",
                        job[0]["student"], job[0]["chapter"])
    written = [(Path(job[3]), size) for job, size in zip(todo, sizes, strict=True) if size is not None]
    log.info("wrote %d page(s), %d KB in all", len(written), sum(size for _, size in written) // 1024)
    return [path for path, _ in written]
