"""grader.prepare.submission: reading a submission is nbformat's reading, from JSON parsed once."""

import copy
import json

import nbformat
import pytest
from nbformat.v3 import new_code_cell as v3_code_cell
from nbformat.v3 import new_notebook as v3_notebook
from nbformat.v3 import new_worksheet
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader import project
from grader.prepare.submission import read_submission


def _notebooks():
    source = project.source_notebook("01_tensors")
    release = json.loads((project.NOTEBOOKS / "01_tensors" / source.name).read_text(encoding="utf-8"))
    old = copy.deepcopy(release)
    old["nbformat_minor"] = 0  # Colab's older notebooks: nbformat 4.0, ids only in metadata
    for cell in old["cells"]:
        cell["metadata"]["id"] = cell.pop("id", "x")
    twins = nbformat.v4.upgrade(new_notebook(cells=[new_code_cell("x = 1"), new_markdown_cell("# hi")]))
    twins.cells[1].id = twins.cells[0].id  # duplicate ids, which nbformat's validation repairs
    v3 = v3_notebook(worksheets=[new_worksheet(cells=[v3_code_cell(input="print(1)", prompt_number=1)])])
    split = new_notebook(cells=[new_code_cell("a = 1\nb = 2\n")])
    split_json = json.loads(nbformat.writes(split))
    split_json["cells"][0]["source"] = ["a = 1\n", "b = 2\n"]  # sources as lists of lines, as editors save them
    return {"release": release, "nbformat 4.0": old, "duplicate ids": json.loads(json.dumps(twins)),
            "nbformat 3": json.loads(nbformat.v3.writes_json(v3)), "split lines": split_json}


@pytest.mark.parametrize("kind", list(_notebooks()))
def test_a_notebook_reads_as_nbformat_reads_it(tmp_path, kind):
    text = json.dumps(_notebooks()[kind])
    path = tmp_path / "x.ipynb"
    path.write_text(text, encoding="utf-8")
    ours, theirs = read_submission(path), nbformat.reads(text, as_version=4)
    for nb in (ours, theirs):  # ids nbformat makes up (an upgrade, a repaired duplicate) are random: unique is what counts
        ids = [cell.pop("id") for cell in nb.cells if "id" in cell]
        assert len(set(ids)) == len(ids)
    assert ours == theirs


@pytest.mark.parametrize("content, says", [
    (b"", "the file is empty"),
    (b"\xff\xfe{", "not UTF-8"),
    (b"{\"cells\": [", "not valid JSON (line 1"),
    (b"[1, 2]", "JSON but not a Jupyter notebook"),
    (b"{\"cells\": " + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply to be a notebook"),
    (b"{\"cells\": [], \"nbformat\": 9}", "could not be read (NBFormatError: Unsupported nbformat version 9)"),
])
def test_a_broken_file_gets_one_sentence(tmp_path, content, says):
    path = tmp_path / "x.ipynb"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=".*".join(map(__import__("re").escape, says.split("(", 1)))):
        read_submission(path)


def _invalid_cell(nb: dict) -> dict:
    nb["cells"][3]["execution_count"] = "seven"  # not an integer: the schema says no
    return nb


def _invalid_top(nb: dict) -> dict:
    nb["metadata"]["kernelspec"] = "python3"  # an object in the schema
    return nb


@pytest.mark.parametrize("spoil", [_invalid_cell, _invalid_top])
def test_an_invalid_notebook_logs_nbformats_error_even_after_valid_ones(tmp_path, caplog, spoil):
    """Cells found valid are remembered within a batch; an invalid notebook read after valid ones
    (the same cells, one spoiled) still logs the error nbformat.reads logs, and reads the same."""
    release = _notebooks()["release"]
    good, bad = tmp_path / "good.ipynb", tmp_path / "bad.ipynb"
    good.write_text(json.dumps(release), encoding="utf-8")
    text = json.dumps(spoil(copy.deepcopy(release)))
    bad.write_text(text, encoding="utf-8")
    with caplog.at_level("ERROR"):
        read_submission(good)
        read_submission(good)
        assert not caplog.records
        ours = read_submission(bad)
        logged = [r.getMessage() for r in caplog.records]
        caplog.clear()
        theirs = nbformat.reads(text, as_version=4)
        assert logged == [r.getMessage() for r in caplog.records] and len(logged) == 1
    assert ours == theirs


def _shapes():
    """Notebooks as injection meets them: the release, a parameters cell elsewhere, none at all,
    an injected cell already there (a notebook papermill ran), an older minor version."""
    release = nbformat.reads(json.dumps(_notebooks()["release"]), as_version=4)
    moved = copy.deepcopy(release)
    moved.cells.append(moved.cells.pop(next(i for i, c in enumerate(moved.cells) if "parameters" in c.metadata.get("tags", []))))
    none = copy.deepcopy(release)
    for cell in none.cells:
        cell.metadata["tags"] = [t for t in cell.metadata.get("tags", []) if t != "parameters"]
    ran = copy.deepcopy(release)
    ran.cells.insert(5, new_code_cell("DEVICE = 'cuda'", metadata={"tags": ["injected-parameters"]}))
    old = copy.deepcopy(none)
    old.nbformat_minor = 4
    return {"release": release, "moved": moved, "no parameters cell": none, "already injected": ran, "nbformat 4.4": old}


@pytest.mark.parametrize("kind", list(_shapes()))
def test_parameters_are_injected_as_papermill_injects_them(kind):
    from papermill.parameterize import parameterize_notebook

    from grader.prepare.parameters import inject_parameters

    params = {"DEVICE": "cpu", "SEED": 0, "FAST": True}
    ours, theirs = _shapes()[kind], _shapes()[kind]
    for nb in (ours, theirs):
        nb.metadata.setdefault("papermill", {}).setdefault("parameters", {})
        for cell in nb.cells:
            cell.metadata.setdefault("tags", [])
    inject_parameters(ours, params)
    theirs = parameterize_notebook(theirs, params, kernel_name="python3", language="python")
    for nb in (ours, theirs):  # ids made up on injection or upgrade are random: unique is what counts
        assert len({c.id for c in nb.cells}) == len(nb.cells)
        for cell in nb.cells:
            cell.id = "-"
    assert ours == theirs
    assert sum("injected-parameters" in c.metadata.tags for c in ours.cells) == 1


def test_a_prepared_notebook_is_notebooknodes_all_through(tmp_path):
    """Steps that add cells (a deleted test cell restored) or metadata (a cell that lost its
    nbgrader metadata or its tags) must not leave plain dicts: the engines read attributes."""
    from nbformat import NotebookNode

    from grader.prepare.submission import prepare
    from grader.record import gradebook
    from grader.verdict import instrument

    chapter, source = "01_tensors", project.source_notebook("01_tensors")
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    release = gradebook.register_chapter(db_url, chapter, source)
    nb = nbformat.reads(nbformat.writes(release), as_version=4)
    tests = [i for i, c in enumerate(nb.cells) if "nbgrader" in c.metadata and c.metadata.nbgrader.get("grade")
             and not c.metadata.nbgrader.get("solution")]
    deleted = nb.cells.pop(tests[-1]).metadata.nbgrader.grade_id  # restored by nbgrader's step
    answer = next(c for c in nb.cells if "nbgrader" in c.metadata and c.metadata.nbgrader.get("solution"))
    del answer.metadata["nbgrader"]  # recognised by its marker
    plain = next(c for c in nb.cells if c.cell_type == "code" and "nbgrader" not in c.metadata)
    plain.metadata = {"tags": ["parameters"]} if "parameters" in plain.metadata.get("tags", []) else {}
    del nb.metadata["kernelspec"]
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    out = prepare(read_submission(path), chapter, source.stem, db_url, release, "cpu",
                  instrument.chapter_tests(nbformat.read(str(source), as_version=4)),
                  gradebook.chapter_cells(db_url, chapter, source.stem))

    def plain_dicts(obj, where="nb"):
        if isinstance(obj, dict):
            found = [] if isinstance(obj, NotebookNode) else [where]
            return found + [w for k, v in obj.items() for w in plain_dicts(v, f"{where}.{k}")]
        if isinstance(obj, list):
            return [w for i, v in enumerate(obj) for w in plain_dicts(v, f"{where}[{i}]")]
        return []

    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in out.cells].count(deleted) == 1
    assert len([c for c in out.cells if "injected-parameters" in c.metadata.tags]) == 1
    assert plain_dicts(out) == []


def test_a_test_cell_met_again_is_restored_as_nbgraders_step_restores_it_without_its_checksums_again(tmp_path):
    """Every submission carries the release's test cells: nbgrader's OverwriteCells computes their
    checksums twice each and restores their hidden part. A cell met again in the batch comes out as
    nbgrader's own step (reading the gradebook) makes it, with the same warnings, and costs no checksum."""
    import logging

    from nbgrader import utils

    from grader.prepare import pipeline, preprocessors
    from grader.prepare.preprocessors import RestoreCells
    from grader.record import gradebook

    chapter, source = "01_tensors", project.source_notebook("01_tensors")
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    release = gradebook.register_chapter(db_url, chapter, source)
    snapshot = gradebook.chapter_cells(db_url, chapter, source.stem)
    nb = nbformat.reads(nbformat.writes(release), as_version=4)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.metadata.nbgrader.get("locked"))
    test.source += "\nassert True  # a learner's edit of a locked cell"

    def restore(snapshot):
        resources = {"nbgrader": {"notebook": source.stem, "assignment": chapter, "db_url": db_url},
                     "course": {"gradebook": snapshot} if snapshot is not None else {}}
        warned: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: warned.append(record.getMessage())
        logger = RestoreCells().log
        logger.addHandler(handler)
        level = logger.level
        logger.setLevel(logging.WARNING)  # whatever an earlier `course` run in this process set it to
        try:
            out = pipeline.run([RestoreCells], copy.deepcopy(nb), resources)[0]
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
        return out, sorted(warned)

    theirs = restore(None)  # nbgrader's own step, reading the gradebook
    preprocessors._RESTORED.clear()
    first = restore(snapshot)
    real, computed = utils.compute_checksum, []
    utils.compute_checksum = lambda cell: computed.append(cell) or real(cell)
    try:
        again = restore(snapshot)
    finally:
        utils.compute_checksum = real
    assert first == theirs == again
    assert any("checksum" in w for w in theirs[1])
    assert computed == []
