"""`make lab` is the learner's JupyterLab (no nbgrader tools, no news toast, works as root);
`make lab-instructor` keeps nbgrader's tools. Each server is started headless, asked, stopped."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent.parent
NBGRADER_LAB = "@jupyter/nbgrader"
NEWS = "@jupyterlab/apputils-extension:announcements"

if shutil.which("make") is None:
    pytest.skip("make is not installed", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:  # not listening yet
        return 0, ""


@contextmanager
def make_lab(target: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Run ``make <target>`` on loopback with a token and a free port; yields (base URL, token)."""
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    for var, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")]:
        env[var] = str(tmp_path / target / sub)  # nothing of this machine's own Jupyter settings
    env.pop("JUPYTER_CONFIG_PATH", None)
    args = (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --ServerApp.port_retries=0 "
            f"--IdentityProvider.token={token}")
    log_path = tmp_path / f"{target}.log"
    with log_path.open("w") as log:
        # -o: never rebuild the virtualenv from here, whatever the timestamps say
        proc = subprocess.Popen(["make", "-s", f"VENV={VENV}", "-o", f"{VENV}/.installed", target, f"LAB_ARGS={args}"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while get(f"{base}/api/status?token={token}")[0] != 200:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"make {target} did not start JupyterLab:\n" + log_path.read_text()[-3000:])
                time.sleep(0.3)
            yield base, token
        finally:
            if proc.poll() is None:
                try:
                    req = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
                    urllib.request.urlopen(req, timeout=5).close()
                    proc.wait(timeout=30)
                except (OSError, subprocess.TimeoutExpired):
                    os.killpg(proc.pid, signal.SIGKILL)  # the group this test started, nothing else
                    proc.wait()


def page_config(base: str, token: str) -> dict:
    status, page = get(f"{base}/lab?token={token}")
    assert status == 200
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
    assert found, "no page config in /lab"
    return json.loads(found[1])


def test_make_lab_is_the_learners_lab_without_nbgrader_tools_or_news(tmp_path):
    with make_lab("lab", tmp_path) as (base, token):
        config = page_config(base, token)
        disabled = config.get("disabledExtensions", {})
        disabled = set(disabled) if isinstance(disabled, list) else {k for k, v in disabled.items() if v}
        assert {NBGRADER_LAB, NEWS} <= disabled, disabled
        assert get(f"{base}/formgrader?token={token}")[0] == 404, "formgrader is an instructor's tool"
        assert get(f"{base}/assignments?token={token}")[0] == 404
        status, listing = get(f"{base}/api/contents?token={token}")
        names = {item["name"] for item in json.loads(listing)["content"]}
        assert status == 200 and "01_tensors" in names, "it serves the released chapters"


def test_make_lab_instructor_keeps_nbgrader_tools(tmp_path):
    with make_lab("lab-instructor", tmp_path) as (base, token):
        disabled = page_config(base, token).get("disabledExtensions", {})
        assert NBGRADER_LAB not in (disabled if isinstance(disabled, list) else [k for k, v in disabled.items() if v])
        assert get(f"{base}/formgrader?token={token}")[0] == 200


def test_make_lab_adds_allow_root_only_for_root():
    dry = subprocess.run(["make", "-n", f"VENV={VENV}", "-o", f"{VENV}/.installed", "lab"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert ("--allow-root" in dry) == (os.geteuid() == 0), dry
    assert "jupyter/learner" in dry
