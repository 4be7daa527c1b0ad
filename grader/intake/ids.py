"""Student ids: one per submission folder or LMS user, unique, and safe as a file name and a CSV cell.

A folder already named as an id (``alice``, ``jdoe42``) is its own id. Any other folder name
(``José Núñez``) gets one derived from it (``jose_nunez``) and keeps its name as the display
name. Two folders never share an id: a derived id that another folder already has, or that two
folders derive alike, gets a suffix made from the folder's own name (``zzz_victim_perfect-3fa2c1``),
so that which folder gets which id does not depend on the order a directory is listed in.

An LMS download is keyed by the LMS's own identity instead (:mod:`grader.intake.lms_names`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
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
