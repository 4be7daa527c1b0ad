"""Committed notebooks are clean; a notebook with an output fails, naming the file."""

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from grader import hygiene


def test_every_committed_notebook_is_clean():
    found = [p for path in hygiene.committed_notebooks() for p in hygiene.problems(path)]
    assert found == [], "run `make format`:\n" + "\n".join(found)


def test_an_output_an_execution_count_or_stray_metadata_is_reported_and_cleaned(tmp_path):
    cell = new_code_cell("1 + 1", execution_count=3, outputs=[new_output("execute_result", {"text/plain": "2"}, execution_count=3)])
    cell.metadata["colab"] = {"base_uri": "https://localhost:8080/"}
    cell.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[cell], metadata={"colab": {"provenance": []}, "kernelspec": {"name": "python3", "display_name": "P", "language": "python"}})
    path = tmp_path / "bad.ipynb"
    nbformat.write(nb, str(path))
    found = hygiene.problems(path)
    assert any(str(path) in p and "has outputs" in p for p in found)
    assert any("execution count" in p for p in found)
    assert any("['colab']" in p for p in found)
    assert hygiene.clean(path) is True
    assert hygiene.problems(path) == []
    kept = nbformat.read(str(path), as_version=4)
    assert kept.cells[0].metadata == {"tags": ["parameters"]} and "kernelspec" in kept.metadata
    assert hygiene.clean(path) is False
