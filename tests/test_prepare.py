"""grader.prepare: reading a submission is nbformat's reading, from JSON parsed once."""

import copy
import json

import nbformat
import pytest
from nbformat.v3 import new_code_cell as v3_code_cell
from nbformat.v3 import new_notebook as v3_notebook
from nbformat.v3 import new_worksheet
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader import project
from grader.prepare import read_submission


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
