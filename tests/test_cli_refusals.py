"""`course grade` checks everything before any server or sandbox starts.

Each refusal -- an option, a chapter, the submissions, the gradebook, the lock, a workspace it
cannot write, an option changed against the recorded results -- is one `error:` line and a
non-zero exit, with no fork server started (``forkpool.prestart`` and ``forkpool._new_server``
are watched); a rerun with nothing new to grade starts none either. How long each takes next to
`import torch`: benchmarks/refusals.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from grader.cli.app import cli
from grader.engines.fork import pool as forkpool

MINI = Path(__file__).resolve().parent / "fixtures" / "course" / "solutions"
BIN = Path(sys.executable).parent


def course(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines()
             if line.strip() and not line.startswith(("warning:", "grading with the options"))]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture
def servers(monkeypatch) -> list:
    """Every fork server started (or asked to start) while the test runs; none really starts."""
    started: list = []

    def refuse(*args, **kwargs):
        started.append(args)
        raise AssertionError("a fork server was started")

    monkeypatch.setattr(forkpool, "prestart", lambda options, count: started.append((options, count)))
    monkeypatch.setattr(forkpool, "_new_server", refuse)
    return started


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return path


REFUSALS = {
    "timeout 0": (lambda t, s: [s, "--timeout", "0"], "--timeout 0: a cell needs at least 1 second"),
    "memory too small": (lambda t, s: [s, "--memory-mb", "512"], "--memory-mb 512 is too small"),
    "jobs 0": (lambda t, s: [s, "--jobs", "0"], "--jobs 0"),
    "unknown chapter, folder": (lambda t, s: [s, "--chapter", "99_nope"], "--chapter '99_nope' is not a chapter"),
    "unknown chapter, zip": (lambda t, s: [_zip(t / "c.zip", {"doejane_1_2_mini.ipynb": "{}"}), "--chapter", "9"],
                             "--chapter '9' is not a chapter"),
    "empty folder": (lambda t, s: [(t / "none").mkdir() or t / "none"], "no submission to grade"),
    "folder without chapters": (lambda t, s: [_student_without_chapter(t)], "1 student folder(s), none with a"),
    "not a zip": (lambda t, s: [_text(t / "grades.csv")], "is a file but not a zip"),
    "zip without notebooks": (lambda t, s: [_zip(t / "n.zip", {"readme.txt": "hi"})], "no notebook in this zip"),
    "zip of no chapter": (lambda t, s: [_zip(t / "u.zip", {"doejane_1_2_other.ipynb": "{}"})],
                          "cannot tell which chapter u.zip is for"),
    "no sandbox unconfirmed": (lambda t, s: [s, "--no-sandbox"], "add --unsafe-no-sandbox to confirm"),
    "malformed gradebook URL": (lambda t, s: [s, "--db-url", "not a url"], "'not a url' is not a database URL"),
}


def _text(path: Path) -> Path:
    path.write_text("student,score\n")
    return path


def _student_without_chapter(tmp: Path) -> Path:
    (tmp / "class" / "kim").mkdir(parents=True)
    (tmp / "class" / "kim" / "notes.txt").write_text("hello")
    return tmp / "class"


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refusal_is_one_line_before_any_server_starts_and_leaves_no_workspace(case, subs, tmp_path, servers):
    make, says = REFUSALS[case]
    result = course("grade", *make(tmp_path, subs), "--workdir", tmp_path / "w", "--solutions", MINI)
    assert result.exit_code == 2, result.output
    assert says in error_line(result)
    assert servers == []
    assert not (tmp_path / "w").exists()


def test_an_unwritable_workdir_is_refused_before_any_server_starts(subs, tmp_path, servers):
    (tmp_path / "a-file").write_text("")
    result = course("grade", subs, "--workdir", tmp_path / "a-file" / "w", "--solutions", MINI)
    assert result.exit_code == 2
    assert "cannot write to the workspace" in error_line(result)
    assert servers == []


def test_a_busy_workspace_is_refused_before_any_server_starts(subs, tmp_path, servers):
    work = tmp_path / "w"
    work.mkdir()
    fd = os.open(work / "workspace.lock", os.O_RDWR | os.O_CREAT)  # another batch's lock (flock: per open file)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"pid 4242, since 2025-01-01 09:00:00\n")
        result = course("grade", subs, "--workdir", work, "--solutions", MINI)
    finally:
        os.close(fd)
    assert result.exit_code == 75
    assert "pid 4242" in error_line(result)
    assert servers == []


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A workspace that graded alice's untouched chapter once, for real."""
    tmp = tmp_path_factory.mktemp("graded")
    path = tmp / "subs" / "alice" / "00_mini" / "mini.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.read(str(MINI / "00_mini" / "mini.ipynb"), as_version=4), str(path))
    try:
        result = course("grade", tmp / "subs", "--workdir", tmp / "w", "--solutions", MINI, "--jobs", "1")
    finally:
        forkpool.shutdown()
    assert result.exit_code == 0, result.output
    return tmp


def test_a_changed_timeout_is_refused_before_any_server_starts(graded, servers):
    result = course("grade", graded / "subs", "--workdir", graded / "w", "--timeout", "30")
    assert result.exit_code == 2
    line = error_line(result)
    assert "graded with other options (--timeout 60 -> 30)" in line and "--force" in line
    assert servers == []
    assert json.loads((graded / "w" / "workspace.json").read_text())["grading"]["cell_timeout"] == 60


def test_a_rerun_with_nothing_new_starts_no_server(graded, servers):
    result = course("grade", graded / "subs", "--workdir", graded / "w")
    assert result.exit_code == 0, result.output
    assert "graded (cached)" in result.stdout
    assert servers == []
    assert "isolation:" not in result.stderr  # nothing runs, so no sandbox is announced


def test_a_changed_submission_starts_the_servers_first(graded, servers, tmp_path, monkeypatch):
    """The counterpart: with a notebook changed since, there is work, and the servers start before the batch."""
    from grader import grade

    subs, work = tmp_path / "subs", tmp_path / "w"
    shutil.copytree(graded / "subs", subs)
    shutil.copytree(graded / "w", work)
    nb = nbformat.read(str(subs / "alice" / "00_mini" / "mini.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("one more note"))
    nbformat.write(nb, str(subs / "alice" / "00_mini" / "mini.ipynb"))
    batches = []
    monkeypatch.setattr(grade, "main", lambda *a, **k: batches.append(servers[:]) or [])
    result = course("grade", subs, "--workdir", work)
    assert result.exit_code == 0, result.output
    assert [count for _, count in servers] == [1] and batches == [servers]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the read-only file system")
@pytest.mark.parametrize("command", ["export", "report"])
def test_a_read_only_sqlite_workspace_is_a_permission_problem_not_a_database_servers(graded, command):
    cmd = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(graded / "w"), str(graded / "w"), "--",
           str(BIN / "course"), command, "--workdir", str(graded / "w")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if "bwrap:" in done.stderr:
        pytest.skip(f"bubblewrap cannot run here: {done.stderr.strip()}")
    assert done.returncode == 2, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert "cannot write to the workspace (Read-only file system" in line, line
    assert "host, port" not in line and "server" not in line


def test_device_cuda_without_cuda_is_refused_in_one_line(subs, tmp_path, servers, monkeypatch):
    from grader.engines.isolation import sandbox

    monkeypatch.setattr(sandbox, "gpu_devices", lambda device: ())
    result = course("grade", subs, "--device", "cuda", "--workdir", tmp_path / "w", "--solutions", MINI)
    assert result.exit_code == 2, result.output
    assert "--device cuda: this machine has no CUDA device" in error_line(result)
    assert servers == [] and not (tmp_path / "w").exists()


def test_a_command_without_workdir_says_which_workspace_it_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in ("export", "feedback", "report"):
        result = course(command)
        assert f"reading the workspace {tmp_path / 'course-work'} (no --workdir given)" in result.stderr, command
        assert result.exit_code == 2  # and it was never graded: one error line says so
