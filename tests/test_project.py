"""Chapters are the folders of solutions/: a new one needs only its folder; stray copies are ignored."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import notebook_manifest as nm
import pytest

from grader import project
from grader.prepare import release

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def stray_copies(folder: Path, stem: str) -> list[str]:
    """Put beside a chapter's notebook what Jupyter leaves there; returns the stray file names."""
    source = folder / f"{stem}.ipynb"
    shutil.copyfile(source, folder / f"{stem}-Copy1.ipynb")
    shutil.copyfile(source, folder / "Untitled.ipynb")
    (folder / ".ipynb_checkpoints").mkdir()
    shutil.copyfile(source, folder / ".ipynb_checkpoints" / f"{stem}-checkpoint.ipynb")
    return [f"{stem}-Copy1.ipynb", "Untitled.ipynb"]


def test_chapters_are_the_numbered_folders_of_solutions():
    on_disk = sorted(p.parent.name for p in project.SOLUTIONS.glob("*/*.ipynb") if project.CHAPTER_RE.match(p.parent.name))
    assert project.chapters() == sorted(set(on_disk)) and len(on_disk) >= 1


def test_a_new_chapter_needs_only_its_folder(tmp_path):
    solutions = tmp_path / "solutions"
    shutil.copytree(project.SOLUTIONS / "01_tensors", solutions / "01_tensors")
    shutil.copytree(ROOT / "tests" / "fixtures" / "course" / "solutions" / "00_mini", solutions / "09_extra")
    (solutions / "09_extra" / "mini.ipynb").rename(solutions / "09_extra" / "extra.ipynb")
    assert project.chapters(solutions) == ["01_tensors", "09_extra"]
    assert project.source_notebook("09_extra", solutions).name == "extra.ipynb"
    settings = nm.load().settings("09_extra")  # no manifest entry: the documented [defaults]
    assert (settings.timeout, settings.needs_gpu) == (nm.load().defaults.timeout, False)
    written = release.main(["09"], solutions_dir=solutions, notebooks_dir=tmp_path / "notebooks")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["notebooks/09_extra/extra.ipynb"]


def test_release_and_check_release_ignore_stray_copies_and_name_them(tmp_path, caplog):
    solutions, notebooks = tmp_path / "solutions", tmp_path / "notebooks"
    shutil.copytree(project.SOLUTIONS / "01_tensors", solutions / "01_tensors")
    strays = stray_copies(solutions / "01_tensors", "tensors")
    with caplog.at_level(logging.WARNING, logger="grader"):
        written = release.main(solutions_dir=solutions, notebooks_dir=notebooks)
    assert [p.name for p in written] == ["tensors.ipynb"]
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert all(name in warned for name in strays), warned
    shutil.copyfile(written[0], notebooks / "01_tensors" / "tensors-Copy2.ipynb")  # a learner's copy in the release
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="grader"):
        assert release.check(solutions_dir=solutions, notebooks_dir=notebooks) == []
    assert "tensors-Copy2.ipynb" in caplog.text


def test_several_notebooks_and_none_named_after_the_chapter_is_a_clear_error(tmp_path):
    folder = tmp_path / "solutions" / "03_things"
    folder.mkdir(parents=True)
    for name in ("a.ipynb", "b.ipynb"):
        (folder / name).write_text("{}")
    with pytest.raises(project.ChapterNotFound, match=r"(?s)a\.ipynb, b\.ipynb.*things\.ipynb"):
        project.source_notebook("03_things", tmp_path / "solutions")


@pytest.mark.slow
def test_grade_with_a_stray_copy_in_a_chapter_folder_grades_and_warns(tmp_path, mini_solutions):
    strays = stray_copies(mini_solutions / "00_mini", "mini")
    subs = tmp_path / "subs" / "alice" / "00_mini"
    subs.mkdir(parents=True)
    release.main(["00_mini"], solutions_dir=mini_solutions, notebooks_dir=tmp_path / "rel")
    shutil.copyfile(tmp_path / "rel" / "00_mini" / "mini.ipynb", subs / "mini.ipynb")
    proc = subprocess.run(
        [str(BIN / "course"), "grade", str(tmp_path / "subs"), "--workdir", str(tmp_path / "work"), "--jobs", "1",
         "--solutions", str(mini_solutions)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "alice" in proc.stdout and "00_mini" in proc.stdout
    assert all(name in proc.stderr for name in strays), proc.stderr[-2000:]


def test_a_chapters_grading_toml_names_what_a_fork_server_preloads(tmp_path, caplog):
    """``preload`` of the chapters' grading.toml, once each and sorted; a chapter without one adds
    nothing; a name that is not a module, or a file that is not TOML, is left out with a warning."""
    for chapter, text in {"01_a": 'preload = ["torch._dynamo", "graphviz"]\n', "02_b": 'preload = ["graphviz"]\n',
                          "04_d": 'preload = ["ok.module", "rm -rf /", 3]\n', "05_e": "preload = [\n"}.items():
        (tmp_path / chapter).mkdir()
        (tmp_path / chapter / "grading.toml").write_text(text)
    (tmp_path / "03_c").mkdir()
    assert project.preload({"01_a", "02_b", "03_c"}, tmp_path) == ["graphviz", "torch._dynamo"]
    assert project.preload(set(), tmp_path) == project.preload({"03_c"}, tmp_path) == []
    with caplog.at_level(logging.WARNING):
        assert project.preload({"04_d", "05_e"}, tmp_path) == ["ok.module"]
    assert "'rm -rf /' is not a module name" in caplog.text and "05_e" in caplog.text


def test_the_course_preloads_only_for_the_chapters_that_import_slowly():
    assert project.preload(["01_tensors", "03_numpy_bridge", "04_reshape_indexing"]) == []
    assert "torch._dynamo" in project.preload(["02_dtypes"])  # its puzzle's hidden test rounds on the meta device
    assert "torch.profiler" in project.preload(["05_broadcasting"])  # its optional profiler section
    assert "torch._dynamo" in project.preload(["08_training_loop"])
