"""The gradebook on a real PostgreSQL server (``--db-url postgresql://...``) gets the grades SQLite gets.

A throwaway server is started on 127.0.0.1 (a free port, a temporary data folder) from
Debian's ``postgresql`` package, installed with apt-get when it is missing and we are root.
The test is skipped, saying why, only where no server can be had.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from grader import grade, samples
from grader.record import export

pytestmark = pytest.mark.slow

CH = "00_mini"


def _server_bindir() -> Path | None:
    """Where initdb and pg_ctl are: Debian keeps them in /usr/lib/postgresql/<version>/bin."""
    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if os.access(os.path.join(bindir, "pg_ctl"), os.X_OK):
            return Path(bindir)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def _install() -> str:
    """Install Debian's PostgreSQL server; returns what went wrong ("" on success)."""
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine"
    if os.geteuid() != 0:
        return "apt-get needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]):
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(cmd)} failed: {exc}"
        if done.returncode != 0:
            return f"{' '.join(cmd)} failed: {done.stderr.strip()[-300:]}"
    return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    pytest.importorskip("psycopg", reason="the PostgreSQL driver is missing: pip install 'psycopg[binary]'")
    bindir = _server_bindir()
    if bindir is None:
        problem = _install()
        bindir = _server_bindir()
        if bindir is None:
            pytest.skip(f"no PostgreSQL server here and it could not be installed: {problem or 'pg_ctl not found'}")
    as_postgres: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="course-pg-"))
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            import pwd

            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root)
            pytest.skip("running as root, and there is no 'postgres' user to run the server as")
        os.chown(root, user.pw_uid, user.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", _free_port()

    def run(*cmd: str) -> None:
        done = subprocess.run([*as_postgres, *cmd], capture_output=True, text=True, timeout=120, cwd=root)
        assert done.returncode == 0, f"{cmd[0]} failed: {done.stdout}{done.stderr}"

    run(str(bindir / "initdb"), "-D", str(data), "-U", "grader", "-A", "trust", "-E", "UTF8", "--no-sync")
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "-t", "60", "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    try:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=port, user="grader", dbname="postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE gradebook")
        yield f"postgresql://grader@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60, cwd=root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pg-batch")
    solutions = tmp / "solutions"
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", solutions)
    subs = tmp / "subs"
    samples.write_samples(subs, solutions_dir=solutions)  # alice 10, bob 4, carol 0, dave 0
    (subs / "erin" / CH).mkdir(parents=True)
    (subs / "erin" / CH / "mini.ipynb").write_text("")  # unreadable: a status line and a zero
    return {"tmp": tmp, "subs": subs, "solutions": solutions}


def _grades(reports):
    return {r.student: (r.status, r.score, r.max_score, [(t["grade_id"], t["status"]) for t in r.tests]) for r in reports}


def test_postgres_gradebook_gets_the_same_grades_as_sqlite(postgres_url, batch):
    on_pg = grade.main(batch["subs"], batch["tmp"] / "pg", db_url=postgres_url, jobs=2, solutions_dir=batch["solutions"])
    on_sqlite = grade.main(batch["subs"], batch["tmp"] / "sqlite", jobs=2, solutions_dir=batch["solutions"])
    assert _grades(on_pg) == _grades(on_sqlite)
    assert {r.student: r.score for r in on_pg} == {"alice": 10, "bob": 4, "carol": 0, "dave": 0, "erin": 0}
    assert not (batch["tmp"] / "pg" / "gradebook.db").exists(), "nothing went to a local SQLite file"

    import psycopg

    with psycopg.connect(postgres_url) as conn:
        rows, total = conn.execute("SELECT count(*), sum(auto_score) FROM grade").fetchone()
    assert (rows, total) == (5 * 2, 14)  # 5 students x 2 tests; 10 + 4 points


def test_a_rerun_on_postgres_is_cached_and_exports_the_same_csv(postgres_url, batch):
    again = grade.main(batch["subs"], batch["tmp"] / "pg", db_url=postgres_url, jobs=2, solutions_dir=batch["solutions"])
    assert all(r.cached for r in again if r.status == "graded")
    path = export.write_grades_csv(postgres_url, batch["tmp"] / "pg.csv")
    rows = {row["student_id"]: row[CH] for row in csv.DictReader(path.open())}
    assert rows == {"alice": "10", "bob": "4", "carol": "0", "dave": "0", "erin": "0"}


def test_a_password_in_the_url_is_never_stored_and_export_finds_the_gradebook_again(postgres_url, batch, tmp_path):
    """`course grade` with the URL in $COURSE_DB_URL or a --db-url-file: workspace.json keeps the URL without
    its password and where the password came from; `course export` then needs nothing more than
    --workdir (the file), or $COURSE_DB_URL again, and says so in one line when it is missing."""
    import sys

    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE cli_gradebook")
    server = postgres_url.rsplit("/", 1)[0].replace("grader@", "grader:s3cret@")  # the server trusts; a password all the same
    url = f"{server}/cli_gradebook"
    env = {k: v for k, v in os.environ.items() if k != "COURSE_DB_URL"}

    def course(*args: object, extra: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(Path(sys.executable).parent / "course"), *map(str, args)], capture_output=True,
                              text=True, timeout=600, env=env | (extra or {}))

    work = tmp_path / "env-work"
    done = course("grade", batch["subs"], "--workdir", work, "--solutions", batch["solutions"], "--jobs", "2",
                  extra={"COURSE_DB_URL": url})
    assert done.returncode == 0, done.stderr[-3000:]
    stored = (work / "workspace.json").read_text()
    assert "s3cret" not in stored
    assert json.loads(stored)["gradebook"] == {"url": url.replace(":s3cret", ""), "password_from": {"env": "COURSE_DB_URL"}}
    lost = course("export", "--workdir", work)
    assert lost.returncode == 2 and "Traceback" not in lost.stderr
    assert lost.stderr.strip().splitlines() == [lost.stderr.strip()] and "$COURSE_DB_URL" in lost.stderr
    assert "s3cret" not in lost.stderr
    again = course("export", "--workdir", work, extra={"COURSE_DB_URL": url})
    assert again.returncode == 0, again.stderr
    assert {r["student_id"]: r[CH] for r in csv.DictReader((work / "course-grades.csv").open())}["alice"] == "10"

    url_file = tmp_path / "gradebook-url.txt"
    url_file.write_text(url + "\n")
    work = tmp_path / "file-work"
    done = course("grade", batch["subs"], "--workdir", work, "--solutions", batch["solutions"], "--jobs", "2",
                  "--db-url-file", url_file)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "s3cret" not in (work / "workspace.json").read_text()
    exported = course("export", "--workdir", work)  # the password comes back from the file
    assert exported.returncode == 0, exported.stderr
    assert course("report", "--workdir", work).returncode == 0
