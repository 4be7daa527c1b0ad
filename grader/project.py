"""Where things live: the repository's folders, chapters and version."""

from __future__ import annotations

import logging
import re
from importlib import metadata
from pathlib import Path

from grader.exceptions import ChapterNotFound

DISTRIBUTION = "pytorch-foundations"
ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
CHAPTER_RE = re.compile(r"^\d\d_[a-z0-9_]+$")
#: What an editor leaves beside a notebook: Jupyter's "Duplicate" (``x-Copy1.ipynb``), a new
#: notebook (``Untitled.ipynb``), hidden files and autosaves. Never a chapter's source.
STRAY_RE = re.compile(r"(^\.|^Untitled\d*\.ipynb$|-Copy\d*\.ipynb$|-checkpoint\.ipynb$|\.~)")

log = logging.getLogger(__name__)
_warned: set[Path] = set()


def version() -> str:
    """The installed course version (its release is tagged ``v<version>``: pyproject's ``[tool.course]``)."""
    return metadata.version(DISTRIBUTION)


def chapters(solutions_dir: Path = SOLUTIONS) -> list[str]:
    """Names of all chapters (``NN_name``) that have a source notebook, in order."""
    return sorted(
        p.name for p in solutions_dir.iterdir() if p.is_dir() and CHAPTER_RE.match(p.name) and any(p.glob("*.ipynb"))
    ) if solutions_dir.is_dir() else []


def is_stray(name: str) -> bool:
    """True for a file name an editor leaves beside a notebook (``tensors-Copy1.ipynb``)."""
    return bool(STRAY_RE.search(name))


def _pick(chapter: str, folder: Path) -> tuple[Path | None, list[Path]]:
    """(the chapter's notebook or None, the other notebooks of its folder).

    The notebook named after the chapter (``01_tensors/tensors.ipynb``) is the source; without
    one, the only notebook whose name is not an editor's stray copy.
    """
    found = sorted(p for p in folder.glob("*.ipynb") if p.is_file())
    named = folder / f"{chapter.split('_', 1)[-1]}.ipynb"
    if named in found:
        return named, [p for p in found if p != named]
    kept = [p for p in found if not is_stray(p.name)]
    if len(kept) == 1:
        return kept[0], [p for p in found if p != kept[0]]
    return None, found


def source_notebook(chapter: str, solutions_dir: Path = SOLUTIONS) -> Path:
    """The one source notebook of a chapter; other notebooks beside it are ignored with a warning.

    Raises:
        ChapterNotFound: when the chapter has no notebook, or several and none named after it.
    """
    folder = solutions_dir / chapter
    source, others = _pick(chapter, folder)
    if source is None:
        known = ", ".join(chapters(solutions_dir)) or "none"
        names = ", ".join(p.name for p in others) or "none"
        raise ChapterNotFound(
            f"expected one notebook in {folder}, found {len(others)} ({names})",
            hint=f"name the chapter's notebook {chapter.split('_', 1)[-1]}.ipynb; chapters are: {known}",
        )
    stray = [p for p in others if p not in _warned]
    if stray:
        _warned.update(stray)
        log.warning("%s: ignoring %s (only %s is the chapter's source; delete the others)",
                    folder, ", ".join(p.name for p in stray), source.name)
    return source


def sources(solutions_dir: Path = SOLUTIONS) -> dict[str, Path]:
    """Chapter -> its source notebook, for every chapter of ``solutions_dir``."""
    return {c: source_notebook(c, solutions_dir) for c in chapters(solutions_dir)}


def resolve_chapters(names: list[str] | tuple[str, ...] | None, solutions_dir: Path = SOLUTIONS) -> list[str]:
    """Expand chapter names given on a command line (``01`` or ``01_tensors``); all when empty."""
    known = chapters(solutions_dir)
    if not names:
        return known
    out = []
    for name in names:
        match = [c for c in known if c == name or c.split("_", 1)[0] == name]
        if not match:
            raise ChapterNotFound(f"no chapter named {name!r}", hint=f"chapters are: {', '.join(known) or 'none'}")
        out.extend(m for m in match if m not in out)
    return out


_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")


def grading_settings(chapter_dir: Path) -> dict:
    """A chapter's ``grading.toml`` (``cell_timeout``, ``memory_mb``, ``preload``), {} without one.

    Raises:
        OSError, UnicodeDecodeError, tomllib.TOMLDecodeError: the file is there but unreadable.
    """
    import tomllib

    path = Path(chapter_dir) / "grading.toml"
    if not path.is_file():
        return {}
    return tomllib.loads(path.read_text(encoding="utf-8"))


def preload(chapter_names: list[str] | set[str], solutions_dir: Path = SOLUTIONS) -> list[str]:
    """The modules the chapters' ``grading.toml`` ask a fork server to import for their children
    (``preload = ["torch._dynamo"]``: what a chapter's cells import lazily and slowly), sorted, once
    each. A name that is not a dotted module name is left out with a warning: preloading only
    saves time, it never changes a grade."""
    import tomllib

    names: set[str] = set()
    for chapter in chapter_names:
        path = Path(solutions_dir) / chapter / "grading.toml"
        try:
            wanted = grading_settings(path.parent).get("preload", [])
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            log.warning("%s: not read (%s); its chapter is graded without a preload", path, exc)
            continue
        if not isinstance(wanted, list):
            wanted = [wanted]
        for name in wanted:
            if isinstance(name, str) and _MODULE.match(name):
                names.add(name)
            else:
                log.warning("%s: preload %r is not a module name (write it as \"package.module\"); left out", path, name)
    return sorted(names)
