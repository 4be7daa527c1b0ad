"""Where the release is published (``[tool.course]``: badges, the Colab install, checks) and what cu.submit() checks."""

from __future__ import annotations

import logging
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Unicode

from grader import cells, project
from grader.exceptions import ReleaseError

log = logging.getLogger(__name__)

GITHUB_RE = re.compile(r"https://github\.com/(?P<owner>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+)")
TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
#: words that stand for "fill this in", never a real owner, repository or tag
PLACEHOLDERS = re.compile(r"owner|your[-_]|example|changeme|todo|xxx|^repo$|^user$|^org$|^tag$|x\.y", re.I)
#: the line of a setup cell whose block `course release` writes (the block is everything indented below it)
COLAB_IF = 'if "google.colab" in sys.modules:'


@dataclass(frozen=True)
class Publication:
    """A repository URL and the release tag its learners install and open (``version``: pyproject's)."""

    repository: str
    tag: str
    version: str | None = None

    @property
    def requirement(self) -> str:
        """What pip installs in Colab: this distribution from the repository at the tag."""
        return f"{project.DISTRIBUTION} @ git+{self.repository}@{self.tag}"

    def colab_url(self, path: str) -> str:
        """Colab's page for a file of the repository at the tag (GitHub repositories only)."""
        owner_repo = self.repository.split("github.com/", 1)[-1]
        return f"https://colab.research.google.com/github/{owner_repo}/blob/{self.tag}/{path}"


def read(pyproject: Path) -> Publication:
    """The ``[tool.course]`` table of a pyproject.toml.

    Raises:
        ReleaseError: the file or the table's ``repository`` or ``tag`` is missing.
    """
    import tomllib

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ReleaseError(f"{pyproject}: not read ({exc})", hint="run from a checkout of the course") from None
    table = data.get("tool", {}).get("course", {})
    missing = [key for key in ("repository", "tag") if not isinstance(table.get(key), str) or not table[key]]
    if missing:
        raise ReleaseError(f"{pyproject}: [tool.course] has no {' or '.join(missing)}",
                           hint='add repository = "https://github.com/OWNER/REPO" and tag = "v<version>"')
    version = data.get("project", {}).get("version")
    return Publication(table["repository"].rstrip("/"), table["tag"], version if isinstance(version, str) else None)


@lru_cache(maxsize=1)
def current() -> Publication:
    """This checkout's publication (its pyproject.toml)."""
    return read(project.ROOT / "pyproject.toml")


def install_block(pub: Publication) -> str:
    """The setup cell's Colab block: install this release's helpers, or stop in one line."""
    return f'''\
{COLAB_IF}  # on Colab only: install the course helpers of this release
    import importlib
    import subprocess

    # written by `course release` from pyproject.toml's [tool.course]; --no-deps keeps Colab's torch
    COURSE = "{pub.requirement}"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", COURSE],
                         capture_output=True, text=True)
    if pip.returncode != 0:

        class SetupStopped(Exception):
            def _render_traceback_(self):  # Jupyter and Colab show this one line, no traceback
                return [str(self)]

        said = [line.strip() for line in pip.stderr.splitlines() if line.strip()] or ["no message"]
        why = next((line for line in said if line.startswith(("fatal:", "ERROR:", "error: pathspec"))),
                   said[-1])[:200]  # git's or pip's own reason, not pip's closing note
        raise SetupStopped(
            f"Setup stopped: pip could not install the course helpers from {{COURSE[COURSE.index('git+'):]}}"
            f" ({{why}}). Check that this runtime is online, then Runtime > Run all again; if it still"
            " fails, open the chapter again from the course's page."
        )
    importlib.invalidate_caches()'''


def write_install(source: str, pub: Publication) -> str:
    """A setup cell's source with its Colab block replaced by :func:`install_block` (unchanged without one)."""
    lines = source.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(COLAB_IF)), None)
    if start is None:
        return source
    end = start + 1
    while end < len(lines) and (lines[end][:1] in (" ", "\t") or (
            not lines[end].strip() and end + 1 < len(lines) and lines[end + 1][:1] in (" ", "\t"))):
        end += 1
    return "\n".join([*lines[:start], install_block(pub), *lines[end:]])


class WriteColabInstall(Preprocessor):
    """Write the Colab install of the setup cell (the block under ``if "google.colab" in sys.modules:``)."""

    repository = Unicode(help="The repository learners install from ([tool.course] repository).").tag(config=True)
    tag = Unicode(help="The release tag they install ([tool.course] tag).").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict[str, Any], index: int):
        if cell.cell_type == "code" and COLAB_IF in cells.source_text(cell):
            cell.source = write_install(cells.source_text(cell), Publication(self.repository, self.tag))
        return cell, resources


class RecordGradedCells(Preprocessor):
    """Write the chapter and its graded cells (grade_id, nbgrader flags, release checksum, in order)
    into the notebook's ``course`` metadata: what ``cu.submit()`` checks a learner's notebook against
    (present once, locked cells unchanged, answers not the stub). Nothing secret: the release's own."""

    chapter = Unicode(help="The chapter (nbgrader assignment) name.").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]):
        graded = []
        for cell in nb.cells:
            meta = cells.nbgrader_meta(cell)
            if meta.get("grade_id") and "checksum" in meta:
                keep = {k: meta[k] for k in ("grade_id", "grade", "solution", "locked", "points", "checksum") if k in meta}
                graded.append(keep)
        nb.metadata["course"] = NotebookNode({"chapter": self.chapter, "cells": graded})
        return nb, resources


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)


def problems(pub: Publication, notebooks: list[str], *, root: Path = project.ROOT) -> list[str]:
    """Why learners could not open and install this publication; [] when they can.

    Offline rule: the tags of the git repository at ``root`` stand for the published
    repository's (a clone carries them; ``git fetch --tags`` brings new ones). The tag must be
    there, and every released notebook (paths relative to ``root``) must be in it, since each
    badge opens the notebook at the tag.
    """
    found = []
    match = GITHUB_RE.fullmatch(pub.repository)
    if match is None:
        found.append(f"[tool.course] repository {pub.repository!r} is not https://github.com/OWNER/REPO"
                     " (Colab opens notebooks from GitHub only)")
    elif any(PLACEHOLDERS.search(part) for part in (match["owner"], match["name"])):
        found.append(f"[tool.course] repository {pub.repository!r} is a placeholder: write where the course is published")
    if not TAG_RE.fullmatch(pub.tag) or PLACEHOLDERS.search(pub.tag):
        found.append(f"[tool.course] tag {pub.tag!r} is a placeholder or not a git tag name (the scheme: v<version>)")
        return found
    if pub.version is not None and pub.tag != f"v{pub.version}":
        found.append(f"[tool.course] tag {pub.tag!r} is not v<version> (version {pub.version}): bump both together")
    if _git(root, "rev-parse", "--git-dir").returncode != 0:
        return [*found, f"{root} is not a git checkout: cannot tell whether the repository has tag {pub.tag}"]
    if _git(root, "rev-parse", "-q", "--verify", f"refs/tags/{pub.tag}").returncode != 0:
        return [*found, f"the repository has no tag {pub.tag}: badges and installs would fail; tag the release"
                        f" commit (`git tag {pub.tag}` and push it), or `git fetch --tags`"]
    absent = [path for path in notebooks if _git(root, "cat-file", "-e", f"{pub.tag}:{path}").returncode != 0]
    found += [f"{path}: not in tag {pub.tag}, so its badge opens nothing" for path in absent]
    remotes = _git(root, "remote", "-v").stdout
    if remotes and pub.repository.removesuffix(".git") not in remotes:
        log.warning("no git remote of this checkout is %s: its tags were checked", pub.repository)
    return found
