"""What a recorded result depends on, as a fingerprint: the submitted file, the chapter source, the
options that can change a grade and the grader's revision.

``course grade`` records it with every result (:mod:`grader.record.results`) and grades a submission again
only when it changed; :func:`grader.batch.pending` reads it to tell, before any server starts,
whether a batch has anything to do.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from grader import project
from grader.engines.execution import NOT_GRADING, ExecOptions, options_key

if TYPE_CHECKING:
    from grader.intake.workspace import Workspace

#: Bump when a change to grading could change a score: cached results are then redone.
GRADER_REVISION = "3"


def result_key(raw: bytes, source: Path, options: ExecOptions, chapter: tuple[bytes, ...] | None = None) -> str:
    """What a recorded result depends on: the submitted file, the chapter source, the options that
    can change a grade (the chapter's own ``grading.toml`` applied) and the grader's revision.

    ``chapter`` is :func:`chapter_part` of the same source and options, when the caller worked it
    out once for the chapter's submissions; the key is the same either way."""
    h = hashlib.sha256(hashlib.sha256(raw).digest())  # each part hashed on its own first: no two
    for digest in chapter if chapter is not None else chapter_part(source, options):
        h.update(digest)  # splits of the same bytes agree
    return h.hexdigest()[:32]


def chapter_part(source: Path, options: ExecOptions) -> tuple[bytes, ...]:
    """The hashes of what a result key takes from the chapter rather than the submission: its
    source, the options with its ``grading.toml`` applied, the grader's revision, its rules."""
    chapter_opts = asdict(chapter_options(options, source.parent))
    settings = source.parent / "grading.toml"  # its rules too (grader.verdict.rules)
    parts = (source.read_bytes(), options_key(chapter_opts), GRADER_REVISION.encode(),
             settings.read_bytes() if settings.is_file() else b"")
    return tuple(hashlib.sha256(part).digest() for part in parts)


def remembered_options(ws: Workspace, base: ExecOptions) -> ExecOptions | None:
    """The options the workspace's last batch graded with (None when it remembers none)."""
    remembered = ws.settings().get("grading")
    if not isinstance(remembered, dict):
        return None
    fields = {f.name for f in dataclasses.fields(ExecOptions)} - set(NOT_GRADING)
    return dataclasses.replace(base, **{k: v for k, v in remembered.items() if k in fields})


def chapter_options(base: ExecOptions, chapter_dir: Path) -> ExecOptions:
    """``base``, with the chapter's own ``grading.toml`` (``cell_timeout``, ``memory_mb``) applied."""
    data = project.grading_settings(chapter_dir)
    allowed = {k: v for k, v in data.items() if k in ("cell_timeout", "memory_mb")}
    return dataclasses.replace(base, **allowed) if allowed else base
