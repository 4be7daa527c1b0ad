"""What an LMS's member names say, read by each LMS's own structure: Canvas's file names, Moodle's folders.

An LMS download is keyed by the LMS's own identity, never by a name, since two students can
share a name: ``canvas-<user id>`` for Canvas (its user id, the ``ID`` column of its gradebook)
and ``moodle-<participant id>`` for Moodle (the number in its folder names, the ``Participant N``
of its grading worksheet). The name the LMS wrote (Canvas's login part ``smithjohn``, Moodle's
``José Núñez``) is the display name, kept for pages only.

- Canvas writes ``login[_LATE]_userid_submissionid_name.ext`` at the top of its zip: the fields
  *start* the file name, and the rest (``name.ext``) is the learner's own.
- Moodle writes ``Full Name_participantid_assignsubmission_plugin_/file``: the participant id is
  the ``_<digits>_assignsubmission_<plugin>_`` that *ends* the first folder; the display name
  before it is the learner's and may hold anything, that very pattern included. Flat (no folder)
  ``Full Name_participantid_assignsubmission_plugin_file`` is read only when the pattern occurs
  once in it: otherwise the member is named as neither.

Which LMS wrote a zip is decided from the zip as a whole (:func:`zip_format`), and every
member is then read as that LMS names members; one that does not fit is refused by name.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

CANVAS, MOODLE = "Canvas", "Moodle"

#: Canvas: ``smithjohn_12345_67890_tensors.ipynb``, ``smithjohn_LATE_12345_67890_tensors-1.ipynb``
#: (login part, user id, submission id, the file as uploaded; ``-1`` marks a later upload of a name).
CANVAS_RE = re.compile(r"^(?P<login>[^_/]+)(?P<late>_LATE)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>[^/]+)$", re.S)
#: Moodle's participant folder: the display name (anything), then the marker that ends it.
MOODLE_FOLDER_RE = re.compile(r"^(?P<name>.*)_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_$", re.S)
MOODLE_MARK_RE = re.compile(r"_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_")
#: Canvas's suffix for a later upload of the same file name: ``tensors-2.ipynb``.
UPLOAD_RE = re.compile(r"^(?P<stem>.+?)-(?P<n>\d+)(?P<ext>\.[^.]+)$")
#: The most characters of a learner's name (a display name, a file name) shown anywhere.
NAME_CAP = 80


def shown(text: str, cap: int = NAME_CAP) -> str:
    """A learner-chosen name fit for a message: one line, control characters as ``?``, at most
    ``cap`` characters (escaping for each medium is the writer's: :mod:`grader.escaping`)."""
    flat = "".join("?" if unicodedata.category(c).startswith("C") else c for c in text)
    return flat if len(flat) <= cap else flat[: cap - 3] + "..."


def display_name(raw: str) -> str:
    """The display name an LMS wrote, normalised (NFC, single spaces) and capped."""
    return shown(" ".join(unicodedata.normalize("NFC", raw).split()))


@dataclass(frozen=True)
class LmsFile:
    """What an LMS's member name says about a file: whose it is, and which upload."""

    student: str  # the id: canvas-<user id> or moodle-<participant id>
    name: str  # the display name: Canvas's login part, Moodle's full name
    file: str  # the file's name as the learner uploaded it (Canvas's -N suffix kept)
    late: bool = False  # Canvas's _LATE_
    submission: int = 0  # Canvas's submission id (0 for Moodle)

    @property
    def upload(self) -> int:
        """Canvas's ``-N`` suffix (0 for the first upload of a name)."""
        m = UPLOAD_RE.match(self.file)
        return int(m["n"]) if m else 0

    @property
    def base(self) -> str:
        """The file's name without Canvas's ``-N`` suffix."""
        m = UPLOAD_RE.match(self.file)
        return f"{m['stem']}{m['ext']}" if m else self.file


def parse_canvas(member: str) -> LmsFile | None:
    """``member`` read as Canvas names submissions (at the top of the zip); None when it is not."""
    m = CANVAS_RE.match(member)
    if m is None:
        return None
    return LmsFile(f"canvas-{int(m['uid'])}", display_name(m["login"]), m["file"], late=bool(m["late"]),
                   submission=int(m["sid"]))


def parse_moodle(member: str) -> LmsFile | None:
    """``member`` read as Moodle names submissions; None when it is not (or reads two ways)."""
    folder, _, rest = member.partition("/")
    if rest:
        m = MOODLE_FOLDER_RE.match(folder)
        if m is None or not PurePosixPath(rest).name:
            return None
        return LmsFile(f"moodle-{int(m['uid'])}", display_name(m["name"]), PurePosixPath(rest).name)
    marks = list(MOODLE_MARK_RE.finditer(member))
    if len(marks) != 1 or not member[marks[0].end():]:
        return None
    m = marks[0]
    return LmsFile(f"moodle-{int(m['uid'])}", display_name(member[: m.start()]), member[m.end():])


PARSERS = {CANVAS: parse_canvas, MOODLE: parse_moodle}


def parse_lms_name(member: str, lms: str | None = None) -> LmsFile | None:
    """What ``member`` says when read as ``lms`` names members; with no ``lms``, as the one LMS
    it fits (None when it fits neither, or both)."""
    if lms is not None:
        return PARSERS[lms](member)
    fits = [p for p in (parse_canvas(member), parse_moodle(member)) if p is not None]
    return fits[0] if len(fits) == 1 else None


def zip_format(members: Iterable[str]) -> str | None:
    """Which LMS wrote a zip of these member names: the one whose structure more members fit;
    None when none fits, or both fit as many."""
    names = list(members)
    canvas = sum(parse_canvas(n) is not None for n in names)
    moodle = sum(parse_moodle(n) is not None for n in names)
    if canvas == moodle:
        return None
    return CANVAS if canvas > moodle else MOODLE
