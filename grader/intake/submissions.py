"""Finding submissions: ``<student>/<chapter>/<notebook>.ipynb`` folders (an LMS's zip: :mod:`grader.intake.lms`).

Every student folder, every LMS user and every file an LMS zip holds ends in a row of the
batch: a :class:`Submission` to grade, one with a ``problem`` (nothing gradable: a "missing"
row, recorded as 0), or one with a ``status`` (:data:`SKIPPED`, :data:`SUPERSEDED`): a folder
or file that is no student's submission, shown in the results and never recorded. Ids:
:mod:`grader.intake.ids`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.intake.ids import folder_ids, is_system

__all__ = ["LATE_MARK", "SKIPPED", "SUPERSEDED", "Submission", "discover"]

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
    #: the file graded, as the learner uploaded it (an LMS's download), and the earlier uploads it superseded
    file: str | None = None
    superseded: list[str] = field(default_factory=list)

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
