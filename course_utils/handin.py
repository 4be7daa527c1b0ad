"""``cu.submit()``: check a chapter as the grader will read it, run its visible tests, write the file to hand in."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_utils.env import in_colab, is_grading

#: what Colab writes into a notebook that is not the learner's work (its ``executionInfo`` names the user)
EDITOR_CELL_KEYS = ("colab", "executionInfo", "outputId", "collapsed", "scrolled", "ExecuteTime")
NOTEBOOK_KEYS = ("kernelspec", "language_info", "course")
REASON_CHARS = 90


class NotebookNotFound(Exception):
    """This notebook's saved file cannot be found or read."""


@dataclass
class Exercise:
    """One exercise as the grader will see it: its answer cell, its test cell, its visible test."""

    answer: str
    test: str | None
    answer_state: str = "missing"
    test_state: str = "missing"
    visible: str = "not run"
    problems: list[str] = field(default_factory=list)


@dataclass
class Submission:
    """What :func:`submit` found and wrote."""

    chapter: str
    exercises: list[Exercise]
    path: Path | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """Every graded cell there once and unchanged, every answer written, every visible test passed."""
        return not self.problems and all(not e.problems and e.visible == "passed" for e in self.exercises)


def _cells_module():
    """The grader's own cell predicates, checksums and markers (no solution or test in there)."""
    from grader import cells

    return cells


def _read_notebook(path: str | os.PathLike | None, namespace: dict) -> tuple[dict, Path | None]:
    """The notebook as the grader will get it: Colab's copy, else the saved file; (notebook, its path)."""
    if path is None and in_colab():
        from google.colab import _message  # type: ignore[import-not-found]

        reply = _message.blocking_request("get_ipynb", request="", timeout_sec=60)
        if not isinstance(reply, dict) or not isinstance(reply.get("ipynb"), dict):
            raise NotebookNotFound("Colab did not hand over this notebook: File > Save, then run this cell again")
        return reply["ipynb"], None
    candidates = [path] if path is not None else [
        os.environ.get("JPY_SESSION_NAME"), namespace.get("__session__"), namespace.get("__vsc_ipynb_file__")]
    for candidate in candidates:
        if not candidate:
            continue
        found = Path(candidate)
        for option in (found, Path.cwd() / found.name):
            if option.suffix == ".ipynb" and option.is_file():
                try:
                    return json.loads(option.read_text(encoding="utf-8")), option
                except (OSError, ValueError) as exc:
                    raise NotebookNotFound(f"{option.name} could not be read ({exc})") from None
    raise NotebookNotFound("this notebook's saved file was not found: save it, then run this cell"
                           " in JupyterLab (or in Colab)")


def _find(nb: dict, cells) -> dict[str, list[dict]]:
    """grade_id -> the notebook's cells that carry it (in metadata, or on the release's marker line)."""
    found: dict[str, list[dict]] = {}
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict):
            continue
        gid = cells.grade_id(cell)
        mark = cells.marker(cell)
        gid = gid if isinstance(gid, str) else mark[1] if mark else None
        if gid:
            found.setdefault(gid, []).append(cell)
    return found


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def _run(source: str, namespace: dict) -> str | None:
    """Run one cell's code in ``namespace``, quietly; None when it ran, else why it stopped."""
    with contextlib.suppress(ImportError):
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)  # a %magic, as the kernel reads it
    plt = sys.modules.get("matplotlib.pyplot")
    before = set(plt.get_fignums()) if plt else set()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(source, "<cell>", "exec"), namespace)  # the learner's own code, in their own kernel
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- any failure is a row of the table
        return _reason(exc)
    finally:
        plt = sys.modules.get("matplotlib.pyplot")
        for number in set(plt.get_fignums()) - before if plt else ():
            plt.close(number)
    return None


def _unchanged(cells, source: str, meta: dict) -> bool | None:
    """Whether a cell's source is the release's (by nbgrader's checksum); None when none was recorded."""
    if "checksum" not in meta:
        return None
    return cells.checksum(source, "code", meta) == meta["checksum"]


def check(nb: dict, namespace: dict | None = None) -> Submission:
    """Check a notebook as the grader will read it and, given a namespace, run its visible tests there."""
    cells = _cells_module()
    course = nb.get("metadata", {}).get("course") or {}
    release = [c for c in course.get("cells", []) if isinstance(c, dict) and c.get("grade_id")]
    sub = Submission(str(course.get("chapter") or "chapter"), [])
    found, current = _find(nb, cells), None
    if not release:  # an editor dropped the notebook's metadata: the marker lines still say which cell is which
        marked = [cells.marker(c) for c in nb.get("cells", []) if isinstance(c, dict) and cells.marker(c)]
        release = [{"grade_id": gid, "solution": kind == "answer", "grade": kind == "tests"} for kind, gid in marked]
        sub.notes.append("this copy lost the release's list of graded cells (an editor dropped its metadata):"
                         " a deleted exercise or a changed locked cell cannot be seen here")
    for meta in release:
        gid = meta["grade_id"]
        if meta.get("solution"):
            current = Exercise(gid, None)
            sub.exercises.append(current)
        elif meta.get("grade") and current is not None and current.test is None:
            current.test = gid
        else:
            current = None
    by_id = {m["grade_id"]: m for m in release}
    ns = dict(namespace) if namespace is not None else None
    for ex in sub.exercises:
        copies = found.get(ex.answer, [])
        answer_src = cells.source_text(copies[-1]) if copies else None
        if not copies:
            ex.problems.append(f"answer cell {ex.answer} was deleted: the exercise scores 0")
        else:
            ex.answer_state = "written"
            if _unchanged(cells, answer_src, by_id[ex.answer]) or cells.STUB_MESSAGE in answer_src:
                ex.answer_state = "the stub"
                ex.problems.append(f"{ex.answer} is still the stub")
            if len(copies) > 1:
                ex.answer_state += f" ×{len(copies)}"
                ex.problems.append(f"answer cell {ex.answer} is there {len(copies)} times: the grader keeps the last")
        if ex.test is None:
            continue
        tests = found.get(ex.test, [])
        if not tests:
            ex.test_state = "deleted"
            ex.problems.append(f"test cell {ex.test} was deleted: undo that (Edit menu), or copy it back from a fresh copy of the chapter")
        elif len(tests) > 1:
            ex.test_state = f"×{len(tests)}"
            ex.problems.append(f"test cell {ex.test} is there {len(tests)} times: delete the copies")
        elif _unchanged(cells, cells.source_text(tests[0]), by_id[ex.test]) is False:
            ex.test_state = "changed"
            ex.problems.append(f"locked test cell {ex.test} was changed: the grader runs the original")
        else:
            ex.test_state = "ok"
        if ns is not None and tests and answer_src is not None:
            why = _run(answer_src, ns) or _run(cells.source_text(tests[-1]), ns)
            ex.visible = "passed" if why is None else f"failed: {why}"
    return sub


def clean(nb: dict) -> dict:
    """The notebook without outputs, execution counts or what the editor adds about its user."""
    out = {**nb, "metadata": {k: v for k, v in (nb.get("metadata") or {}).items() if k in NOTEBOOK_KEYS}}
    out["cells"] = []
    for cell in nb.get("cells", []):
        cell = {**cell, "metadata": {k: v for k, v in (cell.get("metadata") or {}).items() if k not in EDITOR_CELL_KEYS}}
        if cell.get("cell_type") == "code":
            cell.update(outputs=[], execution_count=None)
        out["cells"].append(cell)
    return out


def table(sub: Submission, saved: str) -> str:
    """The one table :func:`submit` prints: each exercise, then what to do."""
    rows = [("exercise", "answer", "test cell", "visible test")]
    rows += [(e.answer, e.answer_state, e.test_state if e.test else "-", e.visible) for e in sub.exercises]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"Hand-in check of {sub.chapter}, {saved}"]
    lines += ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    problems = sub.problems + [p for e in sub.exercises for p in e.problems if "stub" not in p]
    lines += [f"  ! {p}" for p in problems] + [f"  · {n}" for n in sub.notes]
    passed = sum(e.visible == "passed" for e in sub.exercises)
    if sub.path is None:
        return "\n".join(lines)
    if sub.ready:
        lines.append(f"Ready: {sub.path.name} ({passed} of {len(sub.exercises)} visible tests pass).")
    else:
        lines.append(f"Not ready yet ({passed} of {len(sub.exercises)} visible tests pass; fix what is marked,"
                     f" then run this cell again), but {sub.path.name} is written if you hand it in as it is.")
    return "\n".join(lines)


def submit(path: str | os.PathLike | None = None, *, out_dir: str | os.PathLike | None = None,
           namespace: dict[str, Any] | None = None) -> Submission | None:
    """Check this notebook as the grader will read it, run its visible tests, write the file to hand in.

    Reads the notebook as last saved (JupyterLab, VS Code) or as Colab has it, checks that every
    graded cell is there once with its id, that locked cells are unchanged from the release and that
    answers are written, runs each visible test after its answer, and writes the notebook without
    outputs as ``<chapter>-<short hash>.ipynb`` beside it (in Colab: downloads it). Prints one table.
    Does nothing in a grading run.

    Args:
        path: the notebook file (default: the one this kernel runs).
        out_dir: where to write the file (default: beside the notebook, or the working folder).
        namespace: where the visible tests run (default: the notebook's own variables).
    """
    if is_grading():
        return None
    if namespace is None:
        shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
        namespace = shell.user_ns if shell is not None else sys._getframe(1).f_globals
    try:
        nb, source = _read_notebook(path, namespace)
    except NotebookNotFound as exc:
        print(f"cu.submit(): {exc}.")
        return None
    sub = check(nb, namespace)
    if sub.chapter == "chapter" and source is not None and source.parent.name[:3].rstrip("_").isdigit():
        sub.chapter = source.parent.name  # no recorded chapter: the folder it sits in (NN_name)
    text = json.dumps(clean(nb), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    folder = Path(out_dir) if out_dir is not None else source.parent if source is not None else Path.cwd()
    sub.path = folder / f"{sub.chapter}-{digest}.ipynb"
    sub.path.write_text(text, encoding="utf-8")
    saved = "as Colab has it" if source is None else \
        f"as saved at {time.strftime('%H:%M:%S', time.localtime(source.stat().st_mtime))} (save first if you changed it since)"
    colab = source is None and in_colab()
    where = f"your browser downloads {sub.path.name}" if colab else f"the file is {sub.path}"
    print(table(sub, saved) + f"\nTo hand it in: {where}; upload it where your course collects {sub.chapter}.")
    if colab:
        from google.colab import files  # type: ignore[import-not-found]

        files.download(str(sub.path))
    return sub
