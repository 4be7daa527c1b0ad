"""Where things live: the repository's folders, chapters, version and repository URL."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from grader.exceptions import ChapterNotFound

DISTRIBUTION = "pytorch-foundations"
ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
CHAPTER_RE = re.compile(r"^\d\d_[a-z0-9_]+$")


@lru_cache(maxsize=1)
def repository_url() -> str:
    """The repository URL declared in pyproject.toml (``[project.urls] Repository``)."""
    for entry in metadata.metadata(DISTRIBUTION).get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository":
            return url.strip().rstrip("/")
    raise RuntimeError("pyproject.toml declares no [project.urls] Repository")


def version() -> str:
    """The installed course version (the tag Colab installs is ``v<version>``)."""
    return metadata.version(DISTRIBUTION)


def chapters(solutions_dir: Path = SOLUTIONS) -> list[str]:
    """Names of all chapters (``NN_name``) that have a source notebook, in order."""
    return sorted(
        p.name for p in solutions_dir.iterdir() if p.is_dir() and CHAPTER_RE.match(p.name) and any(p.glob("*.ipynb"))
    ) if solutions_dir.is_dir() else []


def source_notebook(chapter: str, solutions_dir: Path = SOLUTIONS) -> Path:
    """The one source notebook of a chapter.

    Raises:
        ChapterNotFound: when the chapter has no (or more than one) notebook.
    """
    found = sorted((solutions_dir / chapter).glob("*.ipynb"))
    if len(found) != 1:
        known = ", ".join(chapters(solutions_dir)) or "none"
        raise ChapterNotFound(
            f"expected one notebook in {solutions_dir / chapter}, found {len(found)}",
            hint=f"chapters are: {known}",
        )
    return found[0]


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
