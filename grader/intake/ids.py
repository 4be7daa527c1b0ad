"""Student ids: one per submission folder or LMS user, unique, and safe as a file name and a CSV cell.

A folder already named as an id (``alice``, ``jdoe42``) is its own id. Any other folder name
(``José Núñez``) gets one derived from it (``jose_nunez``) and keeps its name as the display
name. Two folders never share an id: a derived id that another folder already has, or that two
folders derive alike, gets a suffix made from the folder's own name (``zzz_victim_perfect-3fa2c1``),
so that which folder gets which id does not depend on the order a directory is listed in.

An LMS download is keyed by the LMS's own identity, never by a name, since two students can
share a name: ``canvas-<user id>`` for Canvas (its user id, the ``ID`` column of its gradebook)
and ``moodle-<participant id>`` for Moodle (the number in its folder names). The name the LMS
wrote (Canvas's login part ``smithjohn``, Moodle's ``José Núñez``) is the display name.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

STUDENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")

#: Entries no student made, left out without a status line: macOS's archiver adds ``__MACOSX``
#: (resource forks, one per file zipped) and ``.DS_Store``; its volumes carry ``.Trashes``,
#: ``.Spotlight-V100`` and ``.fseventsd``; Jupyter makes ``.ipynb_checkpoints``; a class kept in
#: version control has ``.git``. Any other entry whose name starts with ``.`` gets a status line.
SYSTEM_ENTRIES = frozenset({"__MACOSX", ".DS_Store", ".Trashes", ".Spotlight-V100", ".fseventsd",
                            ".ipynb_checkpoints", ".git"})


def is_system(path: str) -> bool:
    """Whether a folder or zip member (``__MACOSX/._x.ipynb``) is one of :data:`SYSTEM_ENTRIES`."""
    return any(part in SYSTEM_ENTRIES for part in PurePosixPath(path).parts)


def derived_id(folder: str) -> str:
    """The id a folder name that is not one suggests (``José Núñez`` -> ``jose_nunez``)."""
    ascii_name = unicodedata.normalize("NFKD", folder).encode("ascii", "ignore").decode("ascii")
    sid = re.sub(r"[^a-z0-9_.@+-]+", "_", ascii_name.lower()).strip("_.-+@")
    return sid if sid and STUDENT_RE.match(sid) else f"student-{_digest(folder)[:6]}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def folder_ids(folders: Iterable[str]) -> dict[str, tuple[str, str | None]]:
    """One unique id per folder name.

    Returns:
        folder -> (id, note); the note says why a folder's id carries a suffix (None otherwise).
        The result depends on the set of names only, not on their order.
    """
    names = sorted(set(folders))
    ids: dict[str, tuple[str, str | None]] = {f: (f, None) for f in names if STUDENT_RE.match(f)}
    derived = {f: derived_id(f) for f in names if f not in ids}
    alike = Counter(sid.lower() for sid in derived.values())
    taken = {f.lower() for f in ids}
    # the ids no suffix is needed for, first: a suffixed id must not take one of them
    plain = {f: sid for f, sid in derived.items() if alike[sid.lower()] == 1 and sid.lower() not in taken}
    taken |= {sid.lower() for sid in plain.values()}
    for folder, sid in derived.items():
        if folder in plain:
            ids[folder] = (sid, None)
            continue
        size, unique = 6, f"{sid}-{_digest(folder)[:6]}"
        while unique.lower() in taken:  # another folder is named as this one's suffixed id
            size += 2
            unique = f"{sid}-{_digest(folder)[:size]}"
        taken.add(unique.lower())
        others = sorted(f for f in names if f != folder and (f.lower() == sid.lower() or derived.get(f) == sid))
        ids[folder] = (unique, f"folder {folder!r} is student {unique}: {sid} would also be the id of "
                               f"{', '.join(repr(f) for f in others)}")
    return ids


# --- LMS downloads ---------------------------------------------------------------------

#: Canvas: ``smithjohn_12345_67890_tensors.ipynb``, ``smithjohn_LATE_12345_67890_tensors-1.ipynb``
#: (login part, user id, submission id, the file as uploaded; ``-1`` marks a later upload of a name).
CANVAS_RE = re.compile(r"^(?P<login>[^\W_]+)(?P<late>_LATE)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
#: Moodle: ``José Núñez_23456_assignsubmission_file_/tensors.ipynb`` (also without the slash, and
#: ``_assignsubmission_onlinetext_``), possibly under a folder of the zip.
MOODLE_RE = re.compile(r"(?:^|/)(?P<name>[^/]+?)_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_/?(?P<file>.*)$")
#: Canvas's suffix for a later upload of the same file name: ``tensors-2.ipynb``.
UPLOAD_RE = re.compile(r"^(?P<stem>.+?)-(?P<n>\d+)(?P<ext>\.[^.]+)$")


@dataclass(frozen=True)
class LmsFile:
    """What an LMS's file name says about a file: whose it is, and which upload."""

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


def parse_lms_name(member: str) -> LmsFile | None:
    """What a file's name in a Canvas or Moodle download says; None when it is named as neither."""
    m = MOODLE_RE.search(member)
    if m:
        name = " ".join(unicodedata.normalize("NFC", m["name"]).split())
        return LmsFile(f"moodle-{int(m['uid'])}", name, PurePosixPath(m["file"]).name)
    m = CANVAS_RE.match(PurePosixPath(member).name)
    if m:
        return LmsFile(f"canvas-{int(m['uid'])}", unicodedata.normalize("NFC", m["login"]), m["file"],
                       late=bool(m["late"]), submission=int(m["sid"]))
    return None
