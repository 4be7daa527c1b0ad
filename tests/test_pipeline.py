"""grader.prepare.pipeline: the order of the steps is data, and this test pins it."""

from grader.prepare import pipeline


def names(steps):
    return [s.__name__ for s in steps]


def test_release_order():
    assert names(pipeline.RELEASE) == [
        "LockCells",
        "ClearSolutionsOrWriteStubs",  # nbgrader's stub, or a debugging exercise's buggy code
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
        "WriteColabInstall",  # the setup cell's Colab block, from pyproject's [tool.course]
        "RecordGradedCells",  # last: the checksums cu.submit() checks against are the release's
    ]


def test_sanitize_order():
    assert names(pipeline.SANITIZE) == [
        "ClearOutput",
        "RecognizeCells",  # metadata back before duplicates are resolved and cells restored
        "ForgetUnknownCells",  # a pasted or learner-made graded cell is a plain cell (never scored)
        "DeduplicateCells",  # nbgrader's DeduplicateIds, minus the empty dict it leaves
        "RestoreKernelspec",  # nbgrader's OverwriteKernelspec, from the cells read once per batch
        "RestoreCells",  # nbgrader's OverwriteCells (add_missing_cells), from the same
        "OrderTestCells",  # after restoring, so restored test cells are placed too
        "CheckCellMetadata",
    ]


def test_restoring_from_the_batch_snapshot_equals_nbgraders_steps_on_the_gradebook(tmp_path, monkeypatch):
    """RestoreCells/RestoreKernelspec (no database read per submission) change a tampered
    submission exactly as nbgrader's OverwriteCells/OverwriteKernelspec do on the gradebook."""
    import copy

    from nbgrader.preprocessors import OverwriteCells, OverwriteKernelspec

    from grader import cells, project
    from grader.prepare.preprocessors import RestoreCells, RestoreKernelspec
    from grader.prepare.release import build_release
    from grader.record import gradebook

    chapter = "01_tensors"
    source = project.source_notebook(chapter)
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    gradebook.register_chapter(db_url, chapter, source)
    nb = build_release(chapter, source)
    tests = [i for i, c in enumerate(nb.cells) if cells.is_test(c)]
    nb.cells[tests[0]].source = "pass  # the learner emptied the test"
    nb.cells[tests[1]].metadata.nbgrader["points"] = 1000
    nb.cells[tests[3]].cell_type = "markdown"
    nb.cells[tests[3]].pop("outputs")
    nb.cells[tests[3]].pop("execution_count")
    del nb.cells[tests[2]]
    nb.metadata["kernelspec"] = {"name": "evil", "display_name": "evil", "language": "python"}

    def run(steps, snapshot):
        resources = {"nbgrader": {"notebook": source.stem, "assignment": chapter, "db_url": db_url},
                     "course": {"gradebook": snapshot}}
        config = {step: {"add_missing_cells": True} for step in steps if issubclass(step, OverwriteCells)}
        return pipeline.run(steps, copy.deepcopy(nb), resources, config=config)[0]

    snapshot = gradebook.chapter_cells(db_url, chapter, source.stem)
    theirs = run((OverwriteKernelspec, OverwriteCells), None)

    def no_database(*args, **kwargs):
        raise AssertionError("a submission's preparation opened the gradebook")

    import nbgrader.preprocessors.overwritecells as ow
    import nbgrader.preprocessors.overwritekernelspec as ok

    monkeypatch.setattr(ow, "Gradebook", no_database)
    monkeypatch.setattr(ok, "Gradebook", no_database)
    ours = run((RestoreKernelspec, RestoreCells), snapshot)
    assert ours == theirs
    assert ours != nb and ours.metadata["kernelspec"]["name"] != "evil"
    assert len(ours.cells) == len(nb.cells) + 1  # the deleted test cell is back


def test_nbgrader_metadata_is_validated_as_nbgrader_does_and_valid_metadata_once():
    """The compiled validator raises nbgrader's errors for invalid metadata, every time, and
    remembers only metadata it found valid."""
    import jsonschema
    import pytest
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

    from grader.prepare.preprocessors import _CompiledSchemas

    schema = MetadataValidatorV3().schema
    good = {"grade": True, "grade_id": "t1", "locked": True, "points": 2, "schema_version": 3, "solution": False,
            "task": False}
    bad = dict(good, points="two")
    compiled = _CompiledSchemas()
    compiled.validate(good, schema)
    compiled.validate(dict(reversed(list(good.items()))), schema)  # the same metadata, keys in another order
    assert len(compiled._valid) == 1
    for _ in range(2):
        with pytest.raises(jsonschema.ValidationError) as ours:
            compiled.validate(bad, schema)
        with pytest.raises(jsonschema.ValidationError) as theirs:
            jsonschema.validate(bad, schema)
        assert ours.value.message == theirs.value.message
    with pytest.raises(jsonschema.ValidationError):
        compiled.validate(dict(good, points=True), schema)  # true is not the number 1 to a JSON schema
    assert len(compiled._valid) == 1


def test_test_cells_moved_above_their_answers_are_put_back_each_after_the_last_copy():
    from nbformat.v4 import new_code_cell, new_notebook

    from grader.prepare.preprocessors import OrderTestCells

    def cell(gid):
        c = new_code_cell(gid)
        c.metadata["nbgrader"] = {"grade_id": gid, "grade": gid.startswith("t"), "solution": gid.startswith("a"),
                                  "locked": gid.startswith("t"), "schema_version": 3}
        return c

    order = ["t1", "t2", "a1", "x", "a2", "a1", "t3", "a3"]
    nb = new_notebook(cells=[cell(g) if g != "x" else new_code_cell("x") for g in order])
    pairs = {"t1": "a1", "t2": "a2", "t3": "a3", "t4": "a4"}
    nb, _ = OrderTestCells().preprocess(nb, {"course": {"pairs": pairs}})
    assert [c.source for c in nb.cells] == ["a1", "x", "a2", "t2", "a1", "t1", "a3", "t3"]
