"""Finding submissions: ``<student>/<chapter>/<notebook>.ipynb`` folders, one status each."""

from __future__ import annotations

import logging
import re
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
    for student_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        student = student_dir.name
        if student.startswith("."):
            continue
        if not STUDENT_RE.match(student):
            found.append(Submission(student, "-", None, problem="folder name is not a valid student id"))
            continue
        chapters = [d for d in sorted(student_dir.iterdir()) if d.is_dir() and d.name in expected]
        if not chapters:
            others = sorted(p.name for p in student_dir.iterdir() if not p.name.startswith("."))
            what = f" (found: {', '.join(others[:5])})" if others else " (the folder is empty)"
            found.append(
                Submission(student, "-", None, problem=f"no chapter folder among {sorted(expected)}{what}")
            )
            continue
        for chapter_dir in chapters:
            found.append(_one(student, chapter_dir, expected[chapter_dir.name]))
    return found


def _one(student: str, chapter_dir: Path, name: str) -> Submission:
    chapter = chapter_dir.name
    exact = chapter_dir / name
    if exact.is_file():
        return Submission(student, chapter, exact)
    notebooks = sorted(p for p in chapter_dir.glob("*.ipynb") if not p.name.startswith("."))
    if len(notebooks) == 1:
        return Submission(student, chapter, notebooks[0], note=f"graded {notebooks[0].name} (expected {name})")
    if not notebooks:
        return Submission(student, chapter, None, problem=f"no notebook: expected {name}")
    names = ", ".join(p.name for p in notebooks)
    return Submission(student, chapter, None, problem=f"{len(notebooks)} notebooks ({names}), none named {name}")
