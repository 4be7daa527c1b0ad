"""Ordered preprocessor pipelines, declared as data (a test pins the order)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from nbgrader.preprocessors import (
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ComputeChecksums,
    LockCells,
    SaveCells,
)

from grader.prepare.preprocessors import (
    AddColabBadge,
    CheckCellMetadata,
    DeduplicateCells,
    ForgetUnknownCells,
    MarkExerciseCells,
    OrderTestCells,
    RecognizeCells,
    RestoreCells,
    RestoreKernelspec,
    StripMetadata,
)
from grader.prepare.publish import RecordGradedCells, WriteColabInstall
from grader.prepare.stubs import ClearSolutionsOrWriteStubs

Step = type[Preprocessor]

#: solutions/ -> notebooks/. nbgrader's generate_assignment order, plus our steps:
#: markers go in before the checksums are taken, so grading sees the same checksums;
#: SaveCells stores the cells (hidden tests included) when registering a chapter in a
#: gradebook, so it must come before ClearHiddenTests, as in nbgrader. A debugging exercise's
#: answer keeps its own stub (the buggy code) where every other answer gets nbgrader's.
RELEASE: tuple[Step, ...] = (
    LockCells,
    ClearSolutionsOrWriteStubs,
    MarkExerciseCells,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    SaveCells,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
    StripMetadata,
    AddColabBadge,
    WriteColabInstall,
    RecordGradedCells,
)

#: A submission before it runs: nbgrader's autograde sanitising steps (its Overwrite* steps
#: answered from the chapter's cells read once per batch, see grader.record.gradebook.ChapterCells), with cells whose
#: metadata an editor dropped recognised first by their markers (so that duplicates are
#: resolved and test cells restored from the gradebook for them too), and test cells a
#: learner moved above their answers put back below them.
SANITIZE: tuple[Step, ...] = (
    ClearOutput,
    RecognizeCells,
    ForgetUnknownCells,
    DeduplicateCells,
    RestoreKernelspec,
    RestoreCells,
    OrderTestCells,
    CheckCellMetadata,
)


def run(
    steps: Sequence[Step],
    nb: NotebookNode,
    resources: dict[str, Any] | None = None,
    *,
    skip: Sequence[Step] = (),
    config: dict[Step, dict[str, Any]] | None = None,
) -> tuple[NotebookNode, dict[str, Any]]:
    """Apply ``steps`` in order to ``nb`` (minus those in ``skip``), each with its options."""
    resources = resources if resources is not None else {}
    config = config or {}
    for step in steps:
        if step in skip:
            continue
        nb, resources = _instance(step, config.get(step, {})).preprocess(nb, resources)
    return nb, resources


_made = threading.local()  # per thread: (step, options) -> the step, configured


def _instance(step: Step, options: dict[str, Any]) -> Preprocessor:
    """``step(**options)``, made once per thread and options: constructing a configurable costs
    more than a step's work on a notebook (a batch runs the same steps hundreds of times). The
    steps keep nothing from one notebook to the next: what ``preprocess`` needs it sets first."""
    try:
        key = (step, tuple(sorted(options.items())))
        hash(key)
    except TypeError:  # options that are not hashable: a step of their own
        return step(**options)
    made = _made.__dict__.setdefault("steps", {})
    if key not in made:
        made[key] = step(**options)
    return made[key]
