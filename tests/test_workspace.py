"""The workspace remembers its gradebook and options (never a password), refuses a re-grade by a
changed option without --force, and lets one `course grade` in at a time."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import samples
from grader.exceptions import GradebookError
from grader.intake.workspace import DB_URL_ENV, LOCK, GradebookUrl, Workspace, db_url_of, mask

ROOT = Path(__file__).resolve().parent.parent
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
BIN = Path(sys.executable).parent
CH = "00_mini"


def course(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed ``course`` command."""
    full = {k: v for k, v in os.environ.items() if k != DB_URL_ENV} | (env or {})
    return subprocess.run([str(BIN / "course"), *map(str, args)], capture_output=True, text=True, timeout=600, env=full)


def errors(done: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in done.stderr, done.stderr
    return [line for line in done.stderr.splitlines() if line.startswith("error: ")]


# --- no grading: what workspace.json keeps of a URL -----------------------------------------

def test_a_password_is_never_remembered_only_where_it_came_from(tmp_path):
    url = "postgresql://grader:s3cret@db.example/grades"
    from_env = GradebookUrl(url, "$COURSE_DB_URL").remembered()
    from_file = GradebookUrl(url, "--db-url-file", tmp_path / "url.txt").remembered()
    from_argv = GradebookUrl(url, "--db-url").remembered()
    assert "s3cret" not in json.dumps([from_env, from_file, from_argv])
    assert from_env == {"url": "postgresql://grader@db.example/grades", "password_from": {"env": DB_URL_ENV}}
    assert from_file["password_from"] == {"file": str((tmp_path / "url.txt").resolve())}
    assert GradebookUrl("postgresql://grader@db/grades", "--db-url").remembered() == {"url": "postgresql://grader@db/grades"}
    assert GradebookUrl("sqlite:////x/gradebook.db", "default").remembered() == {"url": None}
    assert mask(url) == "postgresql://grader:***@db.example/grades"


def test_a_remembered_password_comes_back_from_its_file_or_the_error_says_what_to_pass(tmp_path):
    ws = Workspace(tmp_path / "w")
    ws.root.mkdir()
    url_file = tmp_path / "url.txt"
    url_file.write_text("postgresql://grader:s3cret@db/grades\n")
    ws.remember(gradebook=GradebookUrl(url_file.read_text().strip(), "--db-url-file", url_file).remembered())
    assert db_url_of(ws, None).url == "postgresql://grader:s3cret@db/grades"
    url_file.unlink()
    with pytest.raises(GradebookError, match="needs its password") as lost:
        db_url_of(ws, None)
    assert f"--db-url-file {url_file}" in lost.value.one_line() and "s3cret" not in lost.value.one_line()
    ws.remember(gradebook=GradebookUrl("postgresql://grader:s3cret@db/grades", "$COURSE_DB_URL").remembered())
    with pytest.raises(GradebookError, match=r"\$COURSE_DB_URL"):
        db_url_of(ws, None)


# --- one graded class ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The mini class graded by `course grade` into a gradebook outside the workspace."""
    tmp = tmp_path_factory.mktemp("workspace")
    shutil.copytree(MINI, tmp / "solutions")
    samples.write_samples(tmp / "subs", solutions_dir=tmp / "solutions")  # alice 10, bob 4, carol 0, dave 0
    (tmp / "elsewhere").mkdir()
    url = f"sqlite:///{tmp / 'elsewhere' / 'gradebook.db'}"
    done = course("grade", tmp / "subs", "--workdir", tmp / "work", "--solutions", tmp / "solutions", "--jobs", "2",
                  "--db-url", url)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"tmp": tmp, "subs": tmp / "subs", "work": tmp / "work", "url": url}


def _alice(graded) -> dict:
    return json.loads((graded["work"] / "results" / "alice" / f"{CH}.json").read_text())


@pytest.mark.slow
def test_the_workspace_remembers_its_gradebook_and_options(graded):
    remembered = json.loads((graded["work"] / "workspace.json").read_text())
    assert remembered["gradebook"] == {"url": graded["url"]}
    assert remembered["grading"]["cell_timeout"] == 60 and remembered["grading"]["engine"] == "fork"
    assert remembered["solutions"] == str(graded["tmp"] / "solutions")


@pytest.mark.slow
def test_export_feedback_and_report_use_the_remembered_gradebook(graded):
    """Without the remembered URL, export read an empty gradebook it created in the workspace."""
    work = graded["work"]
    exported = course("export", "--workdir", work)
    assert exported.returncode == 0, exported.stderr
    with (work / "course-grades.csv").open() as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert {s: rows[s][CH] for s in rows} == {"alice": "10", "bob": "4", "carol": "0", "dave": "0"}
    assert not (work / "gradebook.db").exists()
    assert course("report", "--workdir", work).returncode == 0
    pages = course("feedback", "--workdir", work)  # the solutions folder is remembered too
    assert pages.returncode == 0, pages.stderr
    assert "wrote 4 feedback page(s)" in pages.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the read-only file system")
def test_export_into_a_read_only_workspace_is_one_line(graded):
    work = graded["work"]
    done = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(work), str(work), "--",
                           str(BIN / "course"), "export", "--workdir", str(work)], capture_output=True, text=True,
                          timeout=300)
    if "bwrap:" in done.stderr:
        pytest.skip(f"bubblewrap cannot run here: {done.stderr.strip()}")
    assert done.returncode == 2
    (line,) = errors(done)
    assert "cannot write to the workspace (Read-only file system" in line


@pytest.mark.slow
def test_a_changed_option_that_would_regrade_recorded_results_needs_force(graded):
    """`--timeout 0` used to overwrite alice's 10 with 0 without --force; a changed option now says so."""
    args = ["grade", graded["subs"], "--workdir", graded["work"]]
    before = _alice(graded)
    refused = course(*args, "--timeout", "30")
    assert refused.returncode == 2
    (line,) = errors(refused)
    assert "4 recorded result(s) were graded with other options (--timeout 60 -> 30)" in line and "--force" in line
    assert _alice(graded) == before
    same = course(*args)  # options left out: the remembered ones, nothing graded again
    assert same.returncode == 0 and same.stdout.count("(cached)") == 4, same.stdout
    forced = course(*args, "--timeout", "30", "--force")
    assert forced.returncode == 0 and "(cached)" not in forced.stdout
    assert _alice(graded)["score"] == 10 and _alice(graded)["fingerprint"] != before["fingerprint"]
    again = course(*args)
    assert again.returncode == 0 and again.stdout.count("(cached)") == 4
    assert "--timeout 30 (workspace.json)" in again.stderr


@pytest.mark.slow
def test_grading_recorded_results_into_another_gradebook_needs_force(graded, tmp_path):
    done = course("grade", graded["subs"], "--workdir", graded["work"], "--db-url", f"sqlite:///{tmp_path / 'other.db'}")
    assert done.returncode == 2
    (line,) = errors(done)
    assert f"was graded into the gradebook {graded['url']}; grading into sqlite:///{tmp_path / 'other.db'}" in line
    assert "--force" in line and not (tmp_path / "other.db").exists()


@pytest.mark.slow
def test_a_second_grade_is_refused_while_the_workspace_is_held(graded):
    lock = graded["work"] / "workspace.lock"
    with lock.open("r+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.seek(0)
        held.truncate()
        held.write("pid 4242, since 2026-01-01 09:00:00\n")
        held.flush()
        done = course("grade", graded["subs"], "--workdir", graded["work"])
    assert done.returncode == 75
    (line,) = errors(done)
    assert "another `course grade` is grading into this workspace (pid 4242, since 2026-01-01 09:00:00)" in line


@pytest.mark.slow
def test_two_grades_started_at_once_on_a_fresh_workspace_one_grades_one_is_refused(graded, tmp_path):
    """Both used to run; one in three died with "table assignment already exists"."""
    cmd = [str(BIN / "course"), "grade", str(graded["subs"]), "--workdir", str(tmp_path / "fresh"),
           "--solutions", str(graded["tmp"] / "solutions"), "--jobs", "1"]
    env = {k: v for k, v in os.environ.items() if k != DB_URL_ENV}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 75], [o[1][-2000:] for o in outs]
    assert not any("already exists" in err or "Traceback" in err for _, err in outs)
    refused = next(err for p, (_, err) in zip(procs, outs, strict=True) if p.returncode == 75)
    assert "another `course grade` is grading into this workspace" in refused
    exported = course("export", "--workdir", tmp_path / "fresh")
    assert exported.returncode == 0, exported.stderr
    assert len((tmp_path / "fresh" / "course-grades.csv").read_text().splitlines()) == 1 + 4


def test_a_refused_grade_leaves_the_new_workspace_of_the_batch_holding_it(graded, tmp_path, monkeypatch):
    """Another batch creates the workspace and takes its lock between our look at the folder and
    our try for the lock: refused, we leave its folder (nothing in it but the lock yet) alone. The
    refused batch used to remove it under the other one, which then failed."""
    import contextlib

    from grader import grade
    from grader.exceptions import WorkspaceBusy

    fresh = tmp_path / "fresh"

    @contextlib.contextmanager
    def taken_meanwhile(self):
        fresh.mkdir()
        (fresh / LOCK).touch()
        raise WorkspaceBusy("another `course grade` is grading into this workspace")
        yield

    monkeypatch.setattr(Workspace, "lock", taken_meanwhile)
    with pytest.raises(WorkspaceBusy):
        grade.main(graded["subs"], fresh, solutions_dir=graded["tmp"] / "solutions")
    assert (fresh / LOCK).is_file(), "the other batch's workspace was removed"
