"""Finding submissions: ``<student>/<chapter>/<notebook>.ipynb`` folders, one status each."""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

STUDENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")


@dataclass
class Submission:
    """One student's notebook for one chapter, or the reason it cannot be graded."""

    student: str
    chapter: str
    path: Path | None
    problem: str | None = None
    note: str | None = None
    #: the student's folder name as it came (``José Núñez``) when ``student`` had to be derived from it
    name: str | None = None
    late: bool = False  # the LMS marked it late (Canvas's _LATE_ in the file name)

    @property
    def key(self) -> str:
        return f"{self.student}/{self.chapter}"


def discover(root: Path, expected: dict[str, str]) -> list[Submission]:
    """Every submission under ``root``.

    Args:
        root: a folder laid out ``<student>/<chapter>/<notebook>.ipynb``.
        expected: chapter -> notebook file name of the source (``tensors.ipynb``).

    Returns:
        One :class:`Submission` per student and chapter found; a chapter folder whose
        notebook is missing, or a student folder with no chapter, yields a Submission with
        ``problem`` set, so that every student gets a status line.
    """
    found: list[Submission] = []
    if not root.is_dir():
        return found
    used: set[str] = set()
    for student_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        folder = student_dir.name
        if folder.startswith("."):
            continue
        student = folder if STUDENT_RE.match(folder) else student_id(folder, used)
        used.add(student)
        name = None if student == folder else folder
        chapters = [d for d in sorted(student_dir.iterdir()) if d.is_dir() and d.name in expected]
        if not chapters:
            others = sorted(p.name for p in student_dir.iterdir() if not p.name.startswith("."))
            what = f" (found: {', '.join(others[:5])})" if others else " (the folder is empty)"
            found.append(
                Submission(student, "-", None, problem=f"no chapter folder among {sorted(expected)}{what}", name=name)
            )
            continue
        for chapter_dir in chapters:
            sub = _one(student, chapter_dir, expected[chapter_dir.name])
            sub.name = name
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
    found.sort(key=lambda s: (s.student, s.chapter))
    return found


def student_id(folder: str, used: set[str] = frozenset()) -> str:
    """A stable student id for a folder name that is not one (``José Núñez`` -> ``jose_nunez``)."""
    ascii_name = unicodedata.normalize("NFKD", folder).encode("ascii", "ignore").decode("ascii")
    sid = re.sub(r"[^a-z0-9_.@+-]+", "_", ascii_name.lower()).strip("_.-+@")
    digest = hashlib.sha256(folder.encode("utf-8")).hexdigest()[:6]
    if not sid or not STUDENT_RE.match(sid):
        sid = f"student-{digest}"
    if sid in used:
        sid = f"{sid}-{digest}"
    return sid


def _one(student: str, chapter_dir: Path, name: str) -> Submission:
    chapter = chapter_dir.name
    exact = chapter_dir / name
    notebooks = sorted(p for p in chapter_dir.glob("*.ipynb") if not p.name.startswith("."))
    if exact.is_file() or len(notebooks) == 1:
        path = exact if exact.is_file() else notebooks[0]
        notes = [] if path == exact else [f"graded {path.name} (expected {name})"]
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

#: Canvas: ``doejane_12345_67890_tensors.ipynb`` (``doejane_LATE_12345_67890_tensors-1.ipynb``).
CANVAS_RE = re.compile(r"^(?P<name>[a-z0-9]+)(?:_LATE)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
#: Moodle: ``Jane Doe_12345_assignsubmission_file_/tensors.ipynb`` or the same without the slash.
MOODLE_RE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_file_/?(?P<file>.*)$")

#: left next to an unpacked notebook the LMS marked late (discover() ignores dot files)
LATE_MARK = ".late"
MAX_MEMBERS = 5000
MAX_BYTES = 512 * 2**20


def _student_id(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip()).strip("_").lower() or "unknown"


def parse_lms_name(member: str) -> tuple[str, str] | None:
    """(student id, original file name) of a file in a Canvas or Moodle download, or None."""
    m = MOODLE_RE.match(member)
    if m:
        return _student_id(f"{m['name']}_{m['uid']}"), Path(m["file"]).name
    base = Path(member).name
    m = CANVAS_RE.match(base)
    if m:
        return _student_id(m["name"]), m["file"]
    return None


def is_late(member: str) -> bool:
    """Whether an LMS file name says the submission came after the deadline (Canvas's ``_LATE_``)."""
    return bool(CANVAS_RE.match(Path(member).name)) and "_LATE_" in Path(member).name


def _chapters_named(expected: dict[str, str], originals: Iterable[str]) -> set[str]:
    """The chapters whose notebook the learners' original file names are (a download's ``-1``
    suffix aside)."""
    by_file = {name: ch for ch, name in expected.items()}
    return {by_file.get(re.sub(r"-\d+(?=\.ipynb$)", "", orig)) for orig in originals} - {None}


def _safe(member) -> bool:
    """Whether a zip member may be unpacked: a relative path, no ``..``, not a symbolic link."""
    name = member.filename
    return not (name.startswith("/") or ".." in Path(name).parts or (member.external_attr >> 16) & 0o170000 == 0o120000)


def lms_zip_chapter(zip_path: Path, expected: dict[str, str]) -> str | None:
    """The chapter :func:`extract_lms_zip` will guess for ``zip_path``, read from its file names
    alone (nothing is extracted); None when the zip is unreadable or names no single chapter."""
    import zipfile

    try:
        with zipfile.ZipFile(zip_path) as archive:
            names = [m.filename for m in archive.infolist() if not m.is_dir() and _safe(m)]
    except (zipfile.BadZipFile, OSError):
        return None
    parsed = (parse_lms_name(name) for name in names[:MAX_MEMBERS])
    found = _chapters_named(expected, (p[1] for p in parsed if p is not None and p[1].endswith(".ipynb")))
    return found.pop() if len(found) == 1 else None


def extract_lms_zip(zip_path: Path, dest: Path, expected: dict[str, str], chapter: str | None = None) -> list[str]:
    """Unpack an LMS download into ``dest/<student>/<chapter>/<notebook>``.

    Args:
        zip_path: the zip the LMS produced (Canvas or Moodle naming).
        dest: an empty folder to unpack into (the layout :func:`discover` reads).
        expected: chapter -> notebook file name.
        chapter: the chapter these submissions are for; guessed from the file names when None.

    Returns:
        Notes on files that were skipped (not a notebook, unknown naming, unsafe path).

    Raises:
        SubmissionError: when the file is not a zip, is too large, or the chapter is unclear.
    """
    import zipfile

    from grader.exceptions import SubmissionError

    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{zip_path} is not a readable zip file ({exc})") from None
    notes: list[str] = []
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > MAX_MEMBERS or sum(m.file_size for m in members) > MAX_BYTES:
            raise SubmissionError(f"{zip_path} is too large to be a class's submissions")
        picked: list[tuple[zipfile.ZipInfo, str, str]] = []
        for member in members:
            name = member.filename
            if not _safe(member):
                notes.append(f"skipped {name!r}: unsafe path")
                continue
            parsed = parse_lms_name(name)
            if parsed is None:
                notes.append(f"skipped {name!r}: not named as Canvas or Moodle name submissions")
                continue
            student, original = parsed
            if not original.endswith(".ipynb"):
                notes.append(f"skipped {name!r}: not a notebook")
                continue
            picked.append((member, student, original))
        if chapter is None:
            guesses = _chapters_named(expected, (orig for _, _, orig in picked))
            if len(guesses) != 1:
                raise SubmissionError(
                    f"cannot tell which chapter {zip_path.name} is for", hint="pass --chapter NN_name"
                )
            chapter = guesses.pop()
        elif chapter not in expected:
            raise SubmissionError(f"--chapter {chapter!r} is not a chapter of this course",
                                  hint=f"use one of {', '.join(sorted(expected))}")
        taken: set[str] = set()
        for member, student, original in picked:
            if student in taken:
                notes.append(f"skipped {member.filename!r}: a second notebook from {student}")
                continue
            taken.add(student)
            target = dest / student / chapter / original
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as src:
                target.write_bytes(src.read(MAX_BYTES))
            if is_late(member.filename):
                (target.parent / LATE_MARK).write_text("late\n", encoding="utf-8")
    return notes
