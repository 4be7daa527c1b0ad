"""Grading works wherever the interpreter and packages live: a venv under /tmp, which every
sandboxed grading process gets a private, empty copy of, grades the sample class as the
project's own venv does, on both engines (chapter 08 imports tqdm.auto, stack_data and pygments'
formatters lazily: a venv hidden by the private /tmp failed every student there)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CH = "08_training_loop"


@pytest.fixture(scope="module")
def tmp_venv():
    """A copy of this venv under /tmp (hard links where the filesystem allows, else a copy)."""
    root = Path(tempfile.mkdtemp(prefix="course-tmp-venv-", dir="/tmp"))
    venv = root / "venv"
    linked = subprocess.run(["cp", "-al", sys.prefix, str(venv)], capture_output=True)
    if linked.returncode:
        shutil.rmtree(venv, ignore_errors=True)
        shutil.copytree(sys.prefix, venv, symlinks=True)
    yield venv
    shutil.rmtree(root, ignore_errors=True)


def _table(venv: Path, subs: Path, work: Path, engine: str) -> dict[str, str]:
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "grader.cli.app", "grade", str(subs), "--workdir", str(work),
                           "--jobs", "2", "--engine", engine], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = dict(re.findall(rf"^(\w+)\s+{CH}\s+(\d+/\d+)", done.stdout, flags=re.MULTILINE))
    assert "the solution fails its own test" not in done.stderr, done.stderr[-2000:]
    return rows


def test_a_venv_under_tmp_grades_the_sample_class_as_the_projects_venv(tmp_venv, tmp_path):
    python = str(tmp_venv / "bin" / "python")
    prefix = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True).stdout.strip()
    assert prefix.startswith("/tmp/"), prefix
    subs = tmp_path / "subs"
    subprocess.run([python, "-m", "grader.cli.app", "samples", str(subs), CH], check=True, capture_output=True)
    fork = _table(tmp_venv, subs, tmp_path / "w-fork", "fork")
    kernel = _table(tmp_venv, subs, tmp_path / "w-kernel", "kernel")
    assert fork == kernel, (fork, kernel)
    assert fork["alice"] == "100/100" and fork["carol"] == "0/100", fork
    assert 0 < int(fork["bob"].split("/")[0]) < 100, fork
