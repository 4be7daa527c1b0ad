"""Finding submissions: ``<student>/<chapter>/<notebook>.ipynb`` folders, or an LMS's zip, one status each.

Every student folder, every LMS user and every file an LMS zip holds ends in a row of the
batch: a :class:`Submission` to grade, one with a ``problem`` (nothing gradable: a "missing"
row, recorded as 0), or one with a ``status`` (:data:`SKIPPED`, :data:`SUPERSEDED`): a folder
or file that is no student's submission, shown in the results and never recorded. Ids:
:mod:`grader.intake.ids`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.intake.ids import LmsFile, folder_ids, is_system, parse_lms_name

__all__ = ["LATE_MARK", "SKIPPED", "SUPERSEDED", "Submission", "discover", "extract_lms_zip", "lms_zip_chapter",
           "parse_lms_name"]

log = logging.getLogger(__name__)

#: the status of a folder or file that is not read as a submission (hidden, not a notebook, ...)
SKIPPED = "skipped"
#: the status of a notebook not graded because the same student's later upload is
SUPERSEDED = "superseded"


@dataclass
class Submission:
    """One student's notebook for one chapter, or the reason it cannot be graded."""

    student: str
    chapter: str
    path: Path | None
    problem: str | None = None
    note: str | None = None
    #: the student's name as it came (``José Núñez``, Canvas's ``smithjohn``) when ``student`` is not it
    name: str | None = None
    late: bool = False  # the LMS marked it late (Canvas's _LATE_ in the file name)
    #: None for a student's row; SKIPPED or SUPERSEDED for a folder or file that is none (``problem`` says why)
    status: str | None = None

    @property
    def key(self) -> str:
        return f"{self.student}/{self.chapter}"


def discover(root: Path, expected: dict[str, str]) -> list[Submission]:
    """Every submission under ``root``.

    Args:
        root: a folder laid out ``<student>/<chapter>/<notebook>.ipynb``.
        expected: chapter -> notebook file name of the source (``tensors.ipynb``).

    Returns:
        One :class:`Submission` per student and chapter found, each student under an id of
        its own (:func:`grader.intake.ids.folder_ids`); a chapter folder whose notebook is missing, or
        a student folder with no chapter, yields a Submission with ``problem`` set, so that
        every student gets a status line. A hidden folder (``.name``) yields one with status
        :data:`SKIPPED`; the entries of :data:`grader.intake.ids.SYSTEM_ENTRIES` none.
    """
    found: list[Submission] = []
    if not root.is_dir():
        return found
    folders, hidden = [], []
    for path in sorted(p for p in root.iterdir() if p.is_dir()):
        if is_system(path.name):
            log.debug("%s: not a student's folder, left out", path)
        elif path.name.startswith("."):
            hidden.append(Submission(path.name, "-", None, status=SKIPPED, problem=(
                f"hidden folder {path.name}/ skipped: a name starting with '.' is not read as a student's "
                "(rename the folder to grade it)")))
        else:
            folders.append(path)
    ids = folder_ids(p.name for p in folders)
    for student_dir in folders:
        folder = student_dir.name
        student, id_note = ids[folder]
        name = None if student == folder else folder
        chapters = [d for d in sorted(student_dir.iterdir()) if d.is_dir() and d.name in expected]
        if not chapters:
            others = sorted(p.name for p in student_dir.iterdir() if not p.name.startswith("."))
            what = f" (found: {', '.join(others[:5])})" if others else " (the folder is empty)"
            problem = f"no chapter folder among {sorted(expected)}{what}"
            found.append(Submission(student, "-", None, problem=_join(problem, id_note), name=name))
            continue
        for chapter_dir in chapters:
            sub = _one(student, chapter_dir, expected[chapter_dir.name])
            sub.name = name
            if sub.problem:
                sub.problem = _join(sub.problem, id_note)
            else:
                sub.note = _join(sub.note, id_note)
            found.append(sub)
    # a student without a folder for a chapter others submitted gets a row for it too
    batch = sorted({s.chapter for s in found if s.chapter in expected})
    for student in sorted({s.student for s in found}):
        mine = [s for s in found if s.student == student]
        have = {s.chapter for s in mine}
        for chapter in batch:
            if chapter in have:
                continue
            why = mine[0].problem if have == {"-"} else f"no folder {chapter}/: nothing submitted"
            found.append(Submission(student, chapter, None, problem=why, name=mine[0].name))
        if have == {"-"} and batch:  # its rows per chapter say why; no row without a chapter
            found.remove(mine[0])
    for sub in hidden:
        log.warning("%s", sub.problem)
    found += hidden
    found.sort(key=lambda s: (s.student, s.chapter))
    return found


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


def _one(student: str, chapter_dir: Path, name: str) -> Submission:
    chapter = chapter_dir.name
    exact = chapter_dir / name
    notebooks = sorted(p for p in chapter_dir.glob("*.ipynb") if not p.name.startswith("."))
    if exact.is_file() or len(notebooks) == 1:
        path = exact if exact.is_file() else notebooks[0]
        handed_in = re.fullmatch(rf"{re.escape(chapter)}-[0-9a-f]{{8}}\.ipynb", path.name)  # what cu.submit() writes
        notes = [] if path == exact or handed_in else [f"graded {path.name} (expected {name})"]
        extra = sorted(p.name for p in chapter_dir.iterdir() if p != path and not p.name.startswith("."))
        if extra:
            notes.append(f"ignored {len(extra)} other file(s): {', '.join(extra[:5])}")
        late = (chapter_dir / LATE_MARK).exists()
        if late:
            notes.insert(0, "submitted late")
        return Submission(student, chapter, path, note="; ".join(notes) or None, late=late)
    if not notebooks:
        return Submission(student, chapter, None, problem=f"no notebook: expected {name}")
    names = ", ".join(p.name for p in notebooks)
    return Submission(student, chapter, None, problem=f"{len(notebooks)} notebooks ({names}), none named {name}")


# --- LMS downloads ---------------------------------------------------------------------

#: left next to a notebook its LMS marked late, in a folder laid out for :func:`discover`
LATE_MARK = ".late"
MAX_MEMBERS = 5000
MAX_BYTES = 512 * 2**20


def _chapters_named(expected: dict[str, str], files: Iterable[LmsFile]) -> set[str]:
    """The chapters whose notebook the learners' files are (Canvas's ``-1`` suffix aside)."""
    by_file = {name: ch for ch, name in expected.items()}
    return {by_file.get(f.base) for f in files if f.file.endswith(".ipynb")} - {None}


def _safe(member) -> bool:
    """Whether a zip member may be unpacked: a relative path, no ``..``, not a symbolic link."""
    name = member.filename
    return not (name.startswith("/") or ".." in Path(name).parts or (member.external_attr >> 16) & 0o170000 == 0o120000)


def _name(member) -> str:
    """A member's name as its LMS wrote it: UTF-8 even where the zip does not say so (zipfile then
    reads it as cp437, ``José`` as ``Jos├⌐``)."""
    if member.flag_bits & 0x800:
        return member.filename
    try:
        return member.filename.encode("cp437").decode("utf-8")
    except UnicodeError:
        return member.filename


def lms_zip_chapter(zip_path: Path, expected: dict[str, str]) -> str | None:
    """The chapter :func:`extract_lms_zip` will guess for ``zip_path``, read from its file names
    alone (nothing is extracted); None when the zip is unreadable or names no single chapter."""
    import zipfile

    try:
        with zipfile.ZipFile(zip_path) as archive:
            names = [_name(m) for m in archive.infolist() if not m.is_dir() and _safe(m)]
    except (zipfile.BadZipFile, OSError):
        return None
    found = _chapters_named(expected, filter(None, (parse_lms_name(n) for n in names[:MAX_MEMBERS])))
    return found.pop() if len(found) == 1 else None


def extract_lms_zip(zip_path: Path, dest: Path, expected: dict[str, str], chapter: str | None = None) -> list[Submission]:
    """Read an LMS download: one row per student (its latest notebook unpacked into
    ``dest/<student>/<chapter>/``), and one per file that is not graded.

    Students are keyed by the LMS's identity (:func:`grader.intake.ids.parse_lms_name`), never by
    name. Of a student's notebooks the one graded is the chapter's notebook before any other
    name, then the latest upload: Canvas's ``-N`` suffix highest, then its highest submission
    id. The others are rows with status :data:`SUPERSEDED`; a file that is not a notebook, not
    named as an LMS names submissions, or at an unsafe path, one with status :data:`SKIPPED`;
    a student with no notebook a row with a ``problem``. Entries of
    :data:`grader.intake.ids.SYSTEM_ENTRIES` (``__MACOSX/``) get none.

    Args:
        zip_path: the zip the LMS produced (Canvas or Moodle naming).
        dest: an empty folder to unpack into.
        expected: chapter -> notebook file name.
        chapter: the chapter these submissions are for; guessed from the file names when None.

    Returns:
        The rows, by student id (``-`` for a file no student can be told for); every row's
        chapter is the zip's.

    Raises:
        SubmissionError: when the file is not a zip, is too large, or the chapter is unclear.
    """
    import zipfile

    from grader.exceptions import SubmissionError

    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{zip_path} is not a readable zip file ({exc})") from None
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > MAX_MEMBERS or sum(m.file_size for m in members) > MAX_BYTES:
            raise SubmissionError(f"{zip_path} is too large to be a class's submissions")
        stray: list[str] = []  # problems of files no student can be told for
        files: dict[str, list[tuple[zipfile.ZipInfo, LmsFile]]] = {}
        for member in members:
            name = _name(member)
            if is_system(name):
                continue
            parsed = parse_lms_name(name) if _safe(member) else None
            if parsed is None:
                why = "unsafe path" if not _safe(member) else "not named as Canvas or Moodle name submissions"
                stray.append(f"{name} skipped: {why}")
            else:
                files.setdefault(parsed.student, []).append((member, parsed))
        chapter = _chapter(zip_path, expected, chapter, [f for mine in files.values() for _, f in mine])
        rows = [Submission("-", chapter, None, problem=why, status=SKIPPED) for why in stray]
        for student, mine in sorted(files.items()):
            rows += _student_rows(archive, dest, student, chapter, mine, expected)
    for row in rows:
        if row.status:
            log.warning("%s: %s: %s", zip_path.name, row.student, row.problem)
    return rows


def _chapter(zip_path: Path, expected: dict[str, str], chapter: str | None, files: list[LmsFile]) -> str:
    from grader.exceptions import SubmissionError

    if chapter is None:
        guesses = _chapters_named(expected, files)
        if len(guesses) != 1:
            raise SubmissionError(f"cannot tell which chapter {zip_path.name} is for", hint="pass --chapter NN_name")
        return guesses.pop()
    if chapter not in expected:
        raise SubmissionError(f"--chapter {chapter!r} is not a chapter of this course",
                              hint=f"use one of {', '.join(sorted(expected))}")
    return chapter


def _student_rows(archive, dest: Path, student: str, chapter: str, mine: list, expected: dict[str, str]) -> list[Submission]:
    """The rows of one LMS user's files: the graded notebook (unpacked), the others with a status."""
    wanted = expected[chapter]

    def latest(item) -> tuple:  # the chapter's notebook first, then the latest upload
        member, f = item
        return f.base == wanted, f.upload, f.submission, member.date_time, f.file

    notebooks = sorted((i for i in mine if i[1].file.endswith(".ipynb")), key=latest, reverse=True)
    others = sorted((f for _, f in mine if not f.file.endswith(".ipynb")), key=lambda f: f.file)
    name = (notebooks or sorted(mine, key=latest, reverse=True))[0][1].name
    if not notebooks:
        listed = ", ".join(f.file for f in others)
        return [Submission(student, chapter, None, problem=f"no notebook among the files submitted ({listed})",
                           name=name, late=any(f.late for f in others))]
    (member, best), rest = notebooks[0], [f for _, f in notebooks[1:]]
    target = dest / student / chapter / Path(best.file).name
    target.parent.mkdir(parents=True, exist_ok=True)
    with archive.open(member) as src:
        target.write_bytes(src.read(MAX_BYTES))
    rows = [Submission(student, chapter, None, name=name, late=f.late, status=status, problem=f"{f.file} {why}")
            for f in rest for status, why in [_not_graded(f, best, wanted, expected)]]
    rows += [Submission(student, chapter, None, name=name, late=f.late, status=SKIPPED,
                        problem=f"{f.file} skipped: not a notebook") for f in others]
    notes = ["submitted late"] if best.late else []
    if best.file != wanted:
        uploads = f"the latest of {len(rest) + 1} uploads, " if best.base == wanted and rest else ""
        notes.append(f"graded {best.file} ({uploads}expected {wanted})")
    if rows:
        notes.append(f"not graded: {', '.join(f.file for f in rest + others)}")
    return [Submission(student, chapter, target, note="; ".join(notes) or None, name=name, late=best.late), *rows]


def _not_graded(f: LmsFile, best: LmsFile, wanted: str, expected: dict[str, str]) -> tuple[str, str]:
    """(status, reason) of a student's notebook that is not the one graded (``best``)."""
    other = {name: ch for ch, name in expected.items()}.get(f.base)
    if other and f.base != wanted:
        return SKIPPED, f"skipped: the notebook of {other}, not of this chapter ({best.file} is graded)"
    why = "the chapter's notebook" if best.base == wanted and f.base != wanted else "a later upload"
    return SUPERSEDED, f"superseded by {best.file}, {why}"
