"""An LMS's zip of submissions: one format per zip, a row per LMS user, the latest upload by the LMS's record.

Which LMS wrote the zip is decided from all its members (:func:`grader.intake.lms_names.zip_format`);
each member is then read as that LMS names members, and one that does not fit is a row of
its own with status :data:`~grader.intake.submissions.SKIPPED`, named (capped), never a guess.
Of a user's notebooks the one graded is the latest upload as the LMS recorded it: Canvas's
``-N`` suffix on a re-upload of one name, then its submission id; Moodle's upload time (the
zip member's modification time). Never the name's order.
"""

from __future__ import annotations

import logging
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

from grader.exceptions import SubmissionError
from grader.intake.ids import is_system
from grader.intake.lms_names import CANVAS, LmsFile, parse_lms_name, shown, zip_format
from grader.intake.submissions import SKIPPED, SUPERSEDED, Submission

__all__ = ["extract_lms_zip", "lms_zip_chapter", "member_name"]

log = logging.getLogger(__name__)

MAX_MEMBERS = 5000
MAX_BYTES = 512 * 2**20
#: A copy's mark an editor or a browser adds to a file name: ``dtypes (1).ipynb``, ``dtypes-2.ipynb``.
COPY_RE = re.compile(r"^(?P<stem>.+?)(?: \(\d+\)|-\d+)(?P<ext>\.[^.]+)$")


def _plain(file: str) -> str:
    """A file's name without a copy's mark (``dtypes (1).ipynb`` -> ``dtypes.ipynb``)."""
    m = COPY_RE.match(file)
    return f"{m['stem']}{m['ext']}" if m else file


def _chapters_named(expected: dict[str, str], files: Iterable[LmsFile]) -> set[str]:
    """The chapters whose notebook the learners' files are (a copy's mark aside)."""
    by_file = {name: ch for ch, name in expected.items()}
    return {by_file.get(_plain(f.file)) for f in files if f.file.endswith(".ipynb")} - {None}


def _safe(member: zipfile.ZipInfo) -> bool:
    """Whether a zip member may be unpacked: a relative path, no ``..``, not a symbolic link."""
    name = member.filename
    return not (name.startswith("/") or ".." in Path(name).parts or (member.external_attr >> 16) & 0o170000 == 0o120000)


def member_name(member) -> str:
    """A member's name as its LMS wrote it: UTF-8 even where the zip does not say so (zipfile then
    reads it as cp437, ``José`` as ``Jos├⌐``)."""
    if member.flag_bits & 0x800:
        return member.filename
    try:
        return member.filename.encode("cp437").decode("utf-8")
    except UnicodeError:
        return member.filename


def _members(archive: zipfile.ZipFile) -> list[tuple[zipfile.ZipInfo, str]]:
    """The members a student may have made (not folders, not an archiver's own), with their names."""
    return [(m, n) for m in archive.infolist() if not m.is_dir() for n in [member_name(m)] if not is_system(n)]


def lms_zip_chapter(zip_path: Path, expected: dict[str, str]) -> str | None:
    """The chapter :func:`extract_lms_zip` will guess for ``zip_path``, read from its member names
    alone (nothing is extracted); None when the zip is unreadable or names no single chapter."""
    try:
        with zipfile.ZipFile(zip_path) as archive:
            names = [n for m, n in _members(archive)[:MAX_MEMBERS] if _safe(m)]
    except (zipfile.BadZipFile, OSError):
        return None
    lms = zip_format(names)
    if lms is None:
        return None
    found = _chapters_named(expected, filter(None, (parse_lms_name(n, lms) for n in names)))
    return found.pop() if len(found) == 1 else None


def extract_lms_zip(zip_path: Path, dest: Path, expected: dict[str, str], chapter: str | None = None) -> list[Submission]:
    """Read an LMS download: one row per LMS user (its latest notebook unpacked into
    ``dest/<student>/<chapter>/``), and one per file that is not graded.

    Args:
        zip_path: the zip the LMS produced (Canvas or Moodle naming).
        dest: an empty folder to unpack into.
        expected: chapter -> notebook file name.
        chapter: the chapter these submissions are for; guessed from the file names when None.

    Returns:
        The rows, by student id (``-`` for a member no user can be told for); every row's chapter
        is the zip's. A user's notebooks not graded are rows with status :data:`SUPERSEDED` (an
        earlier upload) or :data:`SKIPPED` (another chapter's notebook, not a notebook).

    Raises:
        SubmissionError: the file is not a zip, is too large, is named as neither LMS names
            submissions (or as both alike), or its chapter is unclear.
    """
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{zip_path} is not a readable zip file ({exc})") from None
    with archive:
        members = _members(archive)
        if len(members) > MAX_MEMBERS or sum(m.file_size for m, _ in members) > MAX_BYTES:
            raise SubmissionError(f"{zip_path} is too large to be a class's submissions")
        lms = zip_format(n for m, n in members if _safe(m))
        if lms is None:
            raise SubmissionError(f"{zip_path.name} is not read as a Canvas or a Moodle download: its members are "
                                  "named as neither, or as both alike",
                                  hint="give the zip as the LMS wrote it (Canvas's or Moodle's 'Download submissions')")
        stray: list[str] = []  # members no user can be told for
        files: dict[str, list[tuple[zipfile.ZipInfo, LmsFile]]] = {}
        for member, name in members:
            parsed = parse_lms_name(name, lms) if _safe(member) else None
            if parsed is None:
                why = "unsafe path" if not _safe(member) else f"not named as {lms} names submissions"
                stray.append(f"{shown(name)} skipped: {why}")
            else:
                files.setdefault(parsed.student, []).append((member, parsed))
        chapter = _chapter(zip_path, expected, chapter, [f for mine in files.values() for _, f in mine])
        rows = [Submission("-", chapter, None, problem=why, status=SKIPPED) for why in stray]
        for student, mine in sorted(files.items()):
            rows += _student_rows(archive, dest, student, chapter, mine, expected, lms)
    for row in rows:
        if row.status:
            log.warning("%s: %s: %s", zip_path.name, row.student, row.problem)
    return rows


def _chapter(zip_path: Path, expected: dict[str, str], chapter: str | None, files: list[LmsFile]) -> str:
    if chapter is None:
        guesses = _chapters_named(expected, files)
        if len(guesses) != 1:
            raise SubmissionError(f"cannot tell which chapter {zip_path.name} is for", hint="pass --chapter NN_name")
        return guesses.pop()
    if chapter not in expected:
        raise SubmissionError(f"--chapter {chapter!r} is not a chapter of this course",
                              hint=f"use one of {', '.join(sorted(expected))}")
    return chapter


def _latest_first(items: list[tuple[zipfile.ZipInfo, LmsFile]], lms: str) -> list[tuple[zipfile.ZipInfo, LmsFile]]:
    """A user's notebooks, the latest upload first, by the LMS's record: Canvas's ``-N`` suffix
    among re-uploads of one name, then its submission id; Moodle's upload time."""
    if lms != CANVAS:
        return sorted(items, key=lambda i: (i[0].date_time, i[1].file), reverse=True)
    best_of: dict[str, tuple[int, int]] = {}  # name as first uploaded -> its latest (suffix, submission id)
    for _, f in items:
        best_of[f.base] = max(best_of.get(f.base, (-1, -1)), (f.upload, f.submission))
    return sorted(items, key=lambda i: ((i[1].upload, i[1].submission) == best_of[i[1].base], i[1].submission,
                                        i[1].upload, i[1].file), reverse=True)


def _student_rows(archive: zipfile.ZipFile, dest: Path, student: str, chapter: str, mine: list,
                  expected: dict[str, str], lms: str) -> list[Submission]:
    """The rows of one LMS user's files: the graded notebook (unpacked), the others with a status."""
    wanted = expected[chapter]
    of_other = {name: ch for ch, name in expected.items() if ch != chapter}
    notebooks = [i for i in mine if i[1].file.endswith(".ipynb")]
    others = sorted((f for _, f in mine if not f.file.endswith(".ipynb")), key=lambda f: f.file)
    theirs = [i for i in notebooks if _plain(i[1].file) not in of_other] or notebooks
    foreign = sorted((f for m, f in notebooks if all(m is not t[0] for t in theirs)), key=lambda f: f.file)
    name = (theirs or mine)[0][1].name
    if not notebooks:
        listed = ", ".join(shown(f.file) for f in others)
        return [Submission(student, chapter, None, problem=f"no notebook among the files submitted ({listed})",
                           name=name, late=any(f.late for f in others))]
    ordered = _latest_first(theirs, lms)
    (member, best), rest = ordered[0], [f for _, f in ordered[1:]]
    name = best.name
    target = dest / student / chapter / _target_name(best.file)
    target.parent.mkdir(parents=True, exist_ok=True)
    with archive.open(member) as src:
        target.write_bytes(src.read(MAX_BYTES))
    row = dict(name=name, late=best.late)
    rows = [Submission(student, chapter, None, **row, status=SUPERSEDED,
                       problem=f"{shown(f.file)} superseded by {shown(best.file)}, a later upload") for f in rest]
    rows += [Submission(student, chapter, None, **row, status=SKIPPED, problem=(
        f"{shown(f.file)} skipped: the notebook of {of_other[_plain(f.file)]}, not of this chapter "
        f"({shown(best.file)} is graded)")) for f in foreign]
    rows += [Submission(student, chapter, None, **row, status=SKIPPED, problem=f"{shown(f.file)} skipped: not a notebook")
             for f in others]
    notes = ["submitted late"] if best.late else []
    if best.file != wanted:
        uploads = f"the latest of {len(rest) + 1} uploads, " if rest else ""
        notes.append(f"graded {shown(best.file)} ({uploads}expected {wanted})")
    elif rest:
        notes.append(f"graded {wanted}, the latest of {len(rest) + 1} uploads")
    if len(rows):
        notes.append(f"not graded: {', '.join(shown(f.file) for f in rest + foreign + others)}")
    return [Submission(student, chapter, target, note="; ".join(notes) or None, name=name, late=best.late,
                       file=shown(best.file), superseded=[shown(f.file) for f in rest]), *rows]


def _target_name(file: str) -> str:
    """The name a notebook is unpacked under: the learner's, without anything a path could make of it."""
    name = Path(file).name
    usable = name not in ("", ".", "..") and not name.startswith(".") and len(name.encode()) <= 200
    return name if usable else "submission.ipynb"
