"""A batch's frame: what is checked before anything starts, the workspace's lock, the batch's log.

``course grade`` refuses a mistake before it starts a sandbox or a fork server (each imports
torch) and before it imports the grader itself (torch again): an option, a chapter, the
submissions, the gradebook's URL, the lock, a workspace it cannot write. What needs the
grader -- whether the submissions were graded already, with the same options -- is answered by
:func:`pending` from the recorded results, so that a rerun with nothing to do, or one
:func:`grader.grade.main` will refuse, starts no server. Nothing here imports torch until
:func:`pending` needs the grader's fingerprints.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grader.exceptions import NothingToGrade, OptionError, SubmissionError, WorkspaceBusy
from grader.intake.workspace import LOCK, LOG, Workspace

LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"

#: What :func:`pending` finds: something to grade; nothing (every submission recorded, same
#: file, chapter and options); or a rerun :func:`grader.grade.main` will refuse (changed options).
WORK, NOTHING, REFUSED = "work", "nothing", "refused"


def check_chapter(chapter: str | None, known: list[str] | dict) -> None:
    """Refuse a ``--chapter`` that is no chapter of the course (for a folder or a zip alike).

    Raises:
        OptionError: naming the chapters there are.
    """
    if chapter is not None and chapter not in known:
        raise OptionError(f"--chapter {chapter!r} is not a chapter of this course",
                          hint=f"chapters are {', '.join(sorted(known)) or 'none'}")


def check_device(device: str) -> None:
    """Refuse ``--device cuda`` where no CUDA device can be used: grading would run on the CPU
    while the workspace records "cuda". Asked of torch in a process of its own (this one must
    not start the CUDA driver before the fork servers fork), with NVML's check.

    Raises:
        OptionError: one line saying why, and that the CPU is the default.
    """
    if device != "cuda":
        return
    import subprocess
    import sys

    from grader.engines.isolation.sandbox import gpu_devices

    hint = "grade with --device cpu (the default), or on a machine with a GPU and a CUDA build of torch"
    if not gpu_devices(device):
        raise OptionError("--device cuda: this machine has no CUDA device (no /dev/nvidia* node)", hint=hint)
    probe = "import torch; print(torch.cuda.is_available(), torch.version.cuda)"
    try:
        said = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}).stdout.split()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OptionError(f"--device cuda: cannot ask torch whether CUDA works ({type(exc).__name__})", hint=hint) from None
    if said[:1] != ["True"]:
        why = "torch here is built without CUDA" if said[1:2] == ["None"] else "torch sees no usable CUDA device"
        raise OptionError(f"--device cuda: {why}", hint=hint)


def refuse_contradicting_chapter(chapter: str | None, found: list, sources: dict[str, Path]) -> None:
    """Refuse a ``--chapter`` that the notebooks given say they are not: more of them recognised
    (by their exercises' cells) as another chapter than as the one given.

    Raises:
        OptionError: naming the chapter the notebooks are, before anything is graded or recorded.
    """
    if chapter is None:
        return
    import json
    from collections import Counter

    import nbformat

    from grader import cells

    def exercises(nb: dict) -> set[str]:
        got = set()
        for cell in nb.get("cells") or []:
            try:
                node = nbformat.from_dict(cell)
                got |= {cells.grade_id(node) or ""} | {(cells.marker(node) or ("", ""))[1]}
            except Exception:  # noqa: BLE001 -- a malformed cell is the submission's status, later
                continue
        return got - {""}

    known = {c: exercises(nbformat.read(str(p), as_version=4)) for c, p in sources.items()}
    counts: Counter[str] = Counter()
    for sub in found:
        if sub.path is None:
            continue
        try:
            nb = json.loads(sub.path.read_bytes())
        except (OSError, ValueError):
            continue
        theirs = exercises(nb) if isinstance(nb, dict) else set()
        if theirs & known.get(chapter, set()):
            counts[chapter] += 1
        else:
            counts.update(c for c, ids in known.items() if ids & theirs)
    other, most = max(((c, n) for c, n in counts.items() if c != chapter), key=lambda cn: cn[1], default=(None, 0))
    if other is not None and most > counts[chapter]:
        read = sum(counts.values())
        raise OptionError(f"--chapter {chapter}: {most} of the {read} notebook(s) recognised are chapter {other}'s, "
                          f"{counts[chapter]} this chapter's; nothing was graded",
                          hint=f"give --chapter {other}, or leave --chapter out to tell it from the file names")


def nothing_to_grade(found: list, where: Path, chapters: list[str] | dict) -> NothingToGrade | None:
    """The refusal of a batch whose submissions (``found``, :func:`grader.intake.submissions.discover`'s rows)
    hold no notebook to grade; None when one does."""
    if any(sub.path is not None for sub in found):
        return None
    students = {s.student for s in found if s.status is None}  # not the folders and files skipped
    what = (f"{len(students)} student folder(s), none with a notebook in a chapter folder"
            if students else "nothing laid out as <student>/<chapter>/<notebook>.ipynb")
    return NothingToGrade(f"no submission to grade ({what})", where=str(where),
                          hint=f"chapters are {', '.join(chapters) or 'none'}")


def check_submissions(submissions: Path, sources: dict[str, Path], chapter: str | None) -> list | None:
    """Refuse submissions that hold nothing to grade, read without extracting anything.

    Returns:
        A folder's rows (:func:`grader.intake.submissions.discover`), or None for a zip.

    Raises:
        SubmissionError: a file that is not a zip, or a zip whose chapter cannot be told.
        NothingToGrade: a folder with no notebook laid out to grade, a zip with no notebook.
    """
    from grader.intake.lms import lms_zip_chapter
    from grader.intake.submissions import discover

    expected = {c: p.name for c, p in sources.items()}
    if submissions.is_dir():
        with _quiet("grader.intake.submissions"):  # grading reads it again, and says what it skips then
            found = discover(submissions, expected)
        refusal = nothing_to_grade(found, submissions, sources)
        if refusal is not None:
            raise refusal
        return found
    if not zipfile.is_zipfile(submissions):
        raise SubmissionError(f"{submissions} is a file but not a zip",
                              hint="give a folder laid out <student>/<chapter>/<notebook>.ipynb, or the zip of "
                                   "submissions downloaded from Canvas or Moodle")
    with zipfile.ZipFile(submissions) as archive:
        notebooks = [n for n in archive.namelist() if n.lower().endswith(".ipynb")]
    if not notebooks:
        raise NothingToGrade("no submission to grade (no notebook in this zip)", where=str(submissions),
                             hint="give the zip of a chapter's submissions downloaded from Canvas or Moodle")
    if chapter is None and lms_zip_chapter(submissions, expected) is None:
        raise SubmissionError(f"cannot tell which chapter {submissions.name} is for", hint="pass --chapter NN_name")
    return None


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    was = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(was)


@contextlib.contextmanager
def held(workdir: Path) -> Iterator[None]:
    """Hold the workspace's lock (creating the workspace); a workspace created here for a batch
    refused before it wrote anything is removed again, while the lock is still held.

    Raises:
        WorkspaceBusy: another batch holds it.
        WorkspaceError: the workspace cannot be created or written.
    """
    existed = workdir.exists()
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(Workspace(workdir).lock())
        except WorkspaceBusy:  # the batch holding the lock owns the folder, however new: touch nothing
            raise
        except BaseException:
            if not existed:
                remove_if_unused(workdir)
            raise
        try:
            yield
        except BaseException:
            if not existed:
                remove_if_unused(workdir)
            raise


def remove_if_unused(workdir: Path) -> None:
    """Remove ``workdir`` when it holds nothing but its lock (and a log)."""
    try:
        if {p.name for p in workdir.iterdir()} <= {LOCK, LOG}:
            for name in (LOG, LOCK):
                (workdir / name).unlink(missing_ok=True)
            workdir.rmdir()
    except OSError:
        pass


@contextlib.contextmanager
def batch_log(workdir: Path) -> Iterator[Path]:
    """Log the batch to ``workdir/grader.log`` (appended): the grader's lines from INFO up, other
    libraries' warnings. The file is created by its first line. Where nothing else handles
    logging (the grader used as a library), warnings still reach stderr as before."""
    path = workdir / LOG
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root, grader = logging.getLogger(), logging.getLogger("grader")
    was = grader.level
    if grader.getEffectiveLevel() > logging.INFO:
        grader.setLevel(logging.INFO)
    fallback = None
    if not root.handlers:  # logging's last resort prints warnings only when no handler is found
        fallback = logging.StreamHandler()
        fallback.setLevel(logging.WARNING)
        root.addHandler(fallback)
    root.addHandler(handler)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()
        if fallback is not None:
            root.removeHandler(fallback)
        grader.setLevel(was)


def pending(ws: Workspace, submissions: Path, sources: dict[str, Path], *, chapter: str | None, force: bool,
            options: dict[str, Any], found: list | None = None) -> str:
    """Whether ``course grade`` has work to do (:data:`WORK`), none (:data:`NOTHING`), or will be
    refused (:data:`REFUSED`: a recorded result these ``options`` would re-grade, without ``force``),
    judged as :func:`grader.grade.main` judges it, from the recorded results' fingerprints.

    A workspace without results (a first batch) has work: answered without importing the grader,
    so the fork servers start while it is imported. Otherwise the grader is imported (torch with
    it) to compute the fingerprints; a zip is unpacked where grading unpacks it (``found``: a
    folder's rows, when already read).
    """
    if force or not any(ws.results.glob("*/*.json")):
        return WORK
    from grader.engines.execution import ExecOptions
    from grader.intake.lms import extract_lms_zip
    from grader.intake.submissions import discover
    from grader.record import results as record
    from grader.record.fingerprints import remembered_options, result_key

    expected = {c: p.name for c, p in sources.items()}
    with _quiet("grader.intake.submissions"), _quiet("grader.intake.lms"):
        if submissions.is_file():
            unpacked = ws.intake(submissions)
            shutil.rmtree(unpacked, ignore_errors=True)
            found = extract_lms_zip(submissions, unpacked, expected, chapter)
        elif found is None:
            found = discover(submissions, expected)
    base = ExecOptions(**options)
    before = remembered_options(ws, base)
    verdict = NOTHING
    for sub in found:
        if sub.path is None or sub.chapter not in sources:
            continue
        raw, source = sub.path.read_bytes(), sources[sub.chapter]
        recorded = record.recorded_fingerprint(ws, sub)  # None: never graded, or an error (graded again)
        if recorded is not None and recorded == result_key(raw, source, base):
            continue
        if before is not None and recorded is not None and recorded == result_key(raw, source, before):
            return REFUSED
        verdict = WORK
    return verdict


def cpu_jobs(jobs: int | None) -> int:
    """``--jobs``, or one per CPU."""
    return max(1, jobs or os.cpu_count() or 1)
