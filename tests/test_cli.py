"""The `course` command on an instructor's mistakes: one line on stderr, a non-zero exit, nothing written.

None of these grades a notebook: each mistake is refused before any submission runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from grader.cli.app import cli

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
BIN = Path(sys.executable).parent


def course(*args) -> object:
    """``course ARGS`` through click's runner (the real command: its group, options and error handling)."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def error_line(result) -> str:
    """The one line an error prints on stderr (the isolation and warning lines aside), with no traceback."""
    lines = [line for line in result.stderr.splitlines()
             if line.strip() and not line.startswith(("isolation:", "warning:", "grading:"))]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("option, says", [
    (["--timeout", "0"], "--timeout 0: a cell needs at least 1 second"),
    (["--timeout", "-1"], "--timeout -1"),
    (["--memory-mb", "1"], "--memory-mb 1 is too small to import torch"),
    (["--memory-mb", "1024"], "give at least 1536"),
    (["--jobs", "0"], "--jobs 0: at least one submission"),
    (["--jobs", "-3"], "--jobs -3"),
])
def test_an_option_out_of_range_is_refused_before_anything_is_written(subs, tmp_path, option, says):
    """`--timeout 0` used to time out every test and overwrite recorded grades; `--jobs 0` was silently remapped."""
    result = course("grade", subs, "--workdir", tmp_path / "w", "--solutions", MINI, *option)
    assert result.exit_code == 2
    assert says in error_line(result)
    assert not (tmp_path / "w").exists()


def test_the_memory_floor_is_stated_in_the_help():
    result = course("grade", "-h")
    assert result.exit_code == 0
    assert "At least 1536" in " ".join(result.stdout.split()) and "1296 MiB" in result.stdout


@pytest.mark.parametrize("url, says", [
    ("not a url", "'not a url' is not a database URL"),
    ("postgresq://grader@db/grades", "unknown database kind 'postgresq'"),
    ("postgresql://grader:s3cret@localhost:1/x", "cannot open the gradebook postgresql://grader:***@localhost:1/x"),
])
def test_a_malformed_or_unreachable_gradebook_is_one_line_without_its_password(subs, tmp_path, url, says):
    result = course("grade", subs, "--workdir", tmp_path / "w", "--solutions", MINI, "--db-url", url)
    assert result.exit_code == 2
    assert says in error_line(result)
    assert "s3cret" not in result.output
    assert not (tmp_path / "w").exists()


def test_verbose_shows_the_traceback_of_an_error(subs, tmp_path):
    result = course("-v", "grade", subs, "--workdir", tmp_path / "w", "--solutions", MINI, "--db-url", "not a url")
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: 'not a url' is not a database URL")


def test_a_batch_without_a_terminal_still_says_how_far_it_is(subs, tmp_path):
    """No progress bar in a log (CI, make demo > file): plain lines instead, first and last included."""
    result = course("grade", subs, "--workdir", tmp_path / "w", "--solutions", MINI, "--jobs", "1")
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("grading:")]
    assert lines[0].startswith("grading: 1 submission(s), each chapter's solution run first"), result.stderr
    assert lines[-1] == "grading: 1/1 done (graded 1)", result.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_works_before_or_after_the_command(subs, tmp_path, where):
    args = ["grade", subs, "--workdir", tmp_path / "w", "--solutions", MINI, "--db-url", "not a url"]
    result = course(*(["-vv", *args] if where == "before" else [*args, "-vv"]))
    assert result.exit_code == 2 and "Traceback" in result.stderr


@pytest.mark.parametrize("command", ["export", "feedback", "report"])
def test_a_missing_or_never_graded_workspace_is_refused_and_left_untouched(tmp_path, command):
    """`export` used to write a header-only grades file (and an empty gradebook) and exit 0."""
    missing = course(command, "--workdir", tmp_path / "typo")
    assert missing.exit_code == 2
    assert "no grading workspace here" in error_line(missing)
    assert not (tmp_path / "typo").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    never = course(command, "--workdir", empty)
    assert never.exit_code == 2
    assert "never graded" in error_line(never)
    assert list(empty.iterdir()) == []


def test_export_refuses_a_gradebook_that_does_not_exist_or_holds_no_grades(tmp_path):
    from nbgrader.api import Gradebook

    work = tmp_path / "w"
    work.mkdir()
    (work / "workspace.json").write_text(json.dumps({"format": 1, "gradebook": {"url": None}}))
    missing = course("export", "--workdir", work)
    assert missing.exit_code == 2
    assert "no gradebook at" in error_line(missing)
    assert not (work / "gradebook.db").exists(), "reading a gradebook never creates one"
    Gradebook(f"sqlite:///{work / 'gradebook.db'}").close()  # the tables, no student
    empty = course("export", "--workdir", work)
    assert empty.exit_code == 2
    assert "holds no graded student" in error_line(empty)
    assert not list(work.glob("*.csv"))


def test_an_empty_submissions_folder_is_refused_and_leaves_no_workspace(tmp_path):
    """It used to print an empty table and exit 0."""
    (tmp_path / "subs").mkdir()
    result = course("grade", tmp_path / "subs", "--workdir", tmp_path / "w", "--solutions", MINI)
    assert result.exit_code == 2
    assert "no submission to grade (nothing laid out as <student>/<chapter>/<notebook>.ipynb)" in error_line(result)
    assert not (tmp_path / "w").exists()
    (tmp_path / "subs" / "kim").mkdir()
    (tmp_path / "subs" / "kim" / "notes.txt").write_text("hello")
    result = course("grade", tmp_path / "subs", "--workdir", tmp_path / "w", "--solutions", MINI)
    assert result.exit_code == 2
    assert "1 student folder(s), none with a notebook in a chapter folder" in error_line(result)
    assert not (tmp_path / "w").exists()


def test_an_unwritable_workdir_is_one_line(subs, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = course("grade", subs, "--workdir", blocker / "w", "--solutions", MINI)
    assert result.exit_code == 2
    assert "cannot write to the workspace" in error_line(result)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the read-only file system")
def test_a_read_only_workdir_is_one_line(subs, tmp_path):
    """A really read-only file system (root ignores file modes): bubblewrap binds the folder read-only."""
    ro = tmp_path / "ro"
    (ro / "w").mkdir(parents=True)
    cmd = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(ro), str(ro), "--",
           str(BIN / "course"), "grade", str(subs), "--workdir", str(ro / "w"), "--solutions", str(MINI)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if "bwrap:" in done.stderr:
        pytest.skip(f"bubblewrap cannot run here: {done.stderr.strip()}")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert lines == [lines[-1]] and "Read-only file system" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("delimiter, cell", [("### END SOLUTION", "ex1_double"),
                                             ("### END HIDDEN TESTS", "test_ex2_row_sums")])
def test_a_chapter_with_an_unclosed_region_names_the_chapter_and_the_cell(subs, tmp_path, mini_solutions,
                                                                           delimiter, cell):
    """nbgrader raised a bare RuntimeError 50 lines deep, naming neither."""
    path = mini_solutions / "00_mini" / "mini.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    target = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell)
    target.source = target.source.replace(delimiter, "")
    nbformat.write(nb, str(path))
    result = course("grade", subs, "--workdir", tmp_path / "w", "--solutions", mini_solutions)
    assert result.exit_code == 2
    line = error_line(result)
    assert f"chapter 00_mini, cell {cell}" in line and f"has no '{delimiter}'" in line
    assert not (tmp_path / "w").exists()


def test_servers_for_an_lms_zip_are_prestarted_with_the_preload_of_the_chapter_its_names_tell(tmp_path, monkeypatch):
    """A Canvas download of chapter 08 without --chapter: the warm servers start with what chapter 08
    preloads, as grading will need (before, they started without it and were replaced)."""
    import zipfile

    from grader import project
    from grader.cli import app as climod
    from grader.engines.fork import pool as forkpool
    from grader.intake.workspace import Workspace

    started = []
    monkeypatch.setattr(forkpool, "prestart", lambda options, wanted: started.append((options, wanted)))
    zp = tmp_path / "canvas.zip"
    with zipfile.ZipFile(zp, "w") as z:
        z.writestr("doejane_1_2_training_loop.ipynb", "{}")
        z.writestr("smithbob_3_4_training_loop-1.ipynb", "{}")
    ws = Workspace(tmp_path / "work")
    climod._start_servers(ws, zp, None, 2, device="cpu", isolate=False)
    (options, wanted), = started
    assert wanted == 2
    assert options.preload == project.preload({"08_training_loop"}) and "torch._dynamo" in options.preload
    climod._start_servers(ws, zp, None, 2, device="cpu", isolate=False, chapter="01_tensors")  # --chapter wins
    assert started[1][0].preload == project.preload({"01_tensors"})


def test_course_grade_leaves_what_start_up_made_out_of_the_collectors_scans(subs, tmp_path, monkeypatch):
    """Once the batch starts, torch's, nbgrader's and the releases' objects are frozen (never scanned
    again by the garbage collector): on the fork path a collection scanned them all, a few ms a submission."""
    import gc

    from grader import grade

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))

    def batch(*args, on_start=None, **kwargs):
        on_start(0)
        frozen.append("graded")
        return []

    monkeypatch.setattr(grade, "main", batch)
    course("grade", subs, "--workdir", tmp_path / "w", "--solutions", MINI, "--jobs", "1")
    assert frozen == [True, "graded"]
