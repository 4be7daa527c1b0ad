"""grader.pipeline: the order of the steps is data, and this test pins it."""

from grader import pipeline


def names(steps):
    return [s.__name__ for s in steps]


def test_release_order():
    assert names(pipeline.RELEASE) == [
        "LockCells",
        "ClearSolutions",
        "MarkExerciseCells",  # before the checksums, so grading computes the same ones
        "ClearOutput",
        "CheckCellMetadata",
        "ComputeChecksums",
        "SaveCells",  # stores hidden tests: must precede ClearHiddenTests
        "ClearHiddenTests",
        "ClearMarkScheme",
        "ComputeChecksums",
        "CheckCellMetadata",
        "StripMetadata",
        "AddColabBadge",
    ]


def test_sanitize_order():
    assert names(pipeline.SANITIZE) == [
        "ClearOutput",
        "RecognizeCells",  # metadata back before duplicates are resolved and cells restored
        "ForgetUnknownCells",  # a pasted or learner-made graded cell is a plain cell (never scored)
        "DeduplicateCells",  # nbgrader's DeduplicateIds, minus the empty dict it leaves
        "OverwriteKernelspec",
        "OverwriteCells",
        "OrderTestCells",  # after restoring, so restored test cells are placed too
        "CheckCellMetadata",
    ]
