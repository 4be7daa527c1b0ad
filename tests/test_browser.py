"""The learner's path, in a real browser: JupyterLab as `make lab` starts it, Run All Cells,
the setup line printed, and the first exercise's test cell failing with a readable message.

Needs /usr/bin/chromium (Debian's `chromium`; `make browser-deps` installs it) and the Python
package playwright (the dev extra), which drives that Chromium: never `playwright install`.
Deselected by default; `make ci` runs it (`pytest -m browser`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from grader.prepare import release

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CHROMIUM = Path("/usr/bin/chromium")
CHAPTER_01 = ROOT / "notebooks" / "01_tensors" / "tensors.ipynb"
MINI = ROOT / "tests" / "fixtures" / "course" / "solutions"
SCREENSHOTS = ROOT / "ci-reports" / "browser"
LEAD_COPY = Path("/tmp/browser_screenshot.png")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
RUN_TIMEOUT_S = 240  # kernel start + every cell up to the first exercise's test, at full size

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is not installed: run `make browser-deps` (apt-get install chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed: pip install -e '.[dev]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab_root(tmp_path) -> tuple[Path, str]:
    """A private copy of a released chapter (the lab autosaves; the repository stays untouched).

    Returns the folder JupyterLab serves (as `make lab` serves notebooks/) and the notebook's
    path inside it. Chapter 01 when it is released, else the mini course, released here.
    """
    served = tmp_path / "notebooks"
    if CHAPTER_01.exists():
        shutil.copytree(CHAPTER_01.parent, served / CHAPTER_01.parent.name)
        return served, f"{CHAPTER_01.parent.name}/{CHAPTER_01.name}"
    (path,) = release.main(["00_mini"], solutions_dir=MINI, notebooks_dir=served)
    return served, f"{path.parent.name}/{path.name}"


@pytest.fixture
def lab(lab_root, tmp_path):
    """JupyterLab on 127.0.0.1, a free port and a token; yields (base URL, token, notebook)."""
    served, notebook = lab_root
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    for var, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")]:
        env[var] = str(tmp_path / "jupyter" / sub)
    env["JUPYTER_CONFIG_PATH"] = str(ROOT / "jupyter" / "learner")  # as `make lab`: the learner's Lab
    quiet = tmp_path / "jupyter" / "settings" / "@jupyterlab" / "apputils-extension"
    quiet.mkdir(parents=True)  # no news or update toasts over the notebook (and no network)
    (quiet / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(
        [str(BIN / "jupyter"), "lab", str(served), "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         *(["--allow-root"] if os.geteuid() == 0 else [])],  # CI containers often run as root
        cwd=served.parent, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
            time.sleep(0.3)
        yield base, token, notebook
    finally:
        if proc.poll() is None:
            try:  # the server shuts its kernels down too
                req = urllib.request.Request(f"{base}/api/shutdown?token={token}", method="POST")
                urllib.request.urlopen(req, timeout=5).close()
                proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)  # our own server's process group only
                proc.wait()
        log.close()


def wait_for_kernel(base: str, token: str, notebook: str, timeout: float = 90) -> None:
    """Until the notebook's session has a kernel that has started and is idle."""
    deadline, sessions = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{base}/api/sessions?token={token}", timeout=5) as r:
            sessions = json.load(r)
        if any(s.get("path", "").endswith(notebook) and (s.get("kernel") or {}).get("execution_state") == "idle"
               for s in sessions):
            return
        time.sleep(0.3)
    pytest.fail(f"the notebook's kernel did not start within {timeout:.0f} s; sessions: {sessions}")


def cell_text(page, marker: str, part: str) -> str:
    """textContent of the input or outputs of the first cell whose input contains ``marker``."""
    return page.evaluate(
        """([marker, part]) => {
            for (const cell of document.querySelectorAll('.jp-Notebook .jp-CodeCell')) {
                const input = cell.querySelector('.jp-InputArea-editor');
                if (input && input.textContent.includes(marker)) {
                    const node = part === 'input' ? input : cell.querySelector('.jp-OutputArea');
                    return node ? node.textContent : '';
                }
            }
            return null;
        }""",
        [marker, part],
    )


# (first line of the input, end of the output) of the first code cell that raised, or null
FIRST_ERROR = r"""() => {
    for (const cell of document.querySelectorAll('.jp-Notebook .jp-CodeCell')) {
        const out = cell.querySelector('.jp-OutputArea')?.textContent || '';
        if (out.includes('Traceback (most recent call last)') || /\b(SyntaxError|IndentationError)\b/.test(out)) {
            return [cell.querySelector('.cm-line')?.textContent || '', out.slice(-800)];
        }
    }
    return null;
}"""
# the input prompts, "[12]:" for a cell that ran, "[*]:" for one running or queued
EXECUTED = r"""() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
    .map(p => p.textContent.trim()).filter(t => /\d|\*/.test(t)).join(' ')"""


def test_run_all_cells_shows_the_setup_line_and_the_first_exercise_failing(lab, tmp_path):
    import torch

    from course_utils import pick_device

    base, token, notebook = lab
    # e.g. "torch 2.13.0+cpu | device: cpu | seed: 0 | local" (the wheel's version, "auto"'s device)
    expected_line = f"torch {torch.__version__} | device: {pick_device('auto')} | seed: 0 | local"
    shots = SCREENSHOTS if os.access(ROOT, os.W_OK) else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"{Path(notebook).stem}-run-all.png"
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000},
        )
        page = context.pages[0] if context.pages else context.new_page()
        try:
            page.goto(f"{base}/lab/tree/{notebook}?token={token}", wait_until="domcontentloaded", timeout=60_000)
            page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=60_000)
            # The toolbar says "idle" before the kernel exists, and Run All then runs nothing:
            # wait until the server has this notebook's kernel up, as a learner waits for it.
            wait_for_kernel(base, token, notebook)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
            # Run -> Run All Cells, from the menu bar, as a learner does
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

            try:
                page.wait_for_function(f"() => ({EXECUTED})() !== ''", timeout=60_000)
            except sync_api.TimeoutError:
                pytest.fail("Run All Cells started nothing within 60 s (no cell queued or run)")
            # Run All stops at the first cell that raises: wait for it, then say which it was.
            try:
                page.wait_for_function(f"() => ({FIRST_ERROR})() !== null", timeout=RUN_TIMEOUT_S * 1000)
            except sync_api.TimeoutError:
                pytest.fail(f"no cell raised within {RUN_TIMEOUT_S} s of Run All Cells; executed cells:"
                            f" {page.evaluate(EXECUTED)} (is the kernel running?)")
            first_error = page.evaluate(FIRST_ERROR)
            setup = page.locator(".jp-Notebook .jp-CodeCell", has=page.locator(".jp-InputArea-editor", has_text="cu.setup(")).first
            setup.evaluate("el => el.scrollIntoView({block: 'center'})")
            page.wait_for_timeout(500)
            page.screenshot(path=str(shot.with_name(shot.name.replace("run-all", "setup"))))
            setup_out = cell_text(page, "cu.setup(seed=SEED, device=DEVICE)", "output")
            test_in = cell_text(page, "[tests: ", "input")
            test_out = cell_text(page, "[tests: ", "output")
            cell = page.locator(".jp-Notebook .jp-CodeCell", has=page.locator(".jp-InputArea-editor", has_text="[tests: ")).first
            cell.evaluate("el => el.scrollIntoView({block: 'center'})")  # the test cell and its whole output
            page.wait_for_timeout(500)  # let the scroll settle before the picture
        finally:
            page.screenshot(path=str(shot))
            context.close()
    shutil.copyfile(shot, LEAD_COPY)

    assert "[tests: " in first_error[0] and test_in.startswith(first_error[0]), (
        f"Run All stopped at a cell that is not the first exercise's test: {first_error[0]!r}\n{first_error[1]}")
    assert setup_out is not None, "no setup cell (the one calling cu.setup) in the notebook"
    assert setup_out.strip().startswith(expected_line), f"setup cell printed {setup_out!r}"
    # The first exercise's visible test calls the unsolved stub: the learner sees why it failed,
    # pointing at the line they have to replace.
    assert "locked: run this cell to check your answer" in test_in
    assert "NotImplementedError" in test_out, f"the first test cell shows {test_out[-500:]!r}"
    assert "YOUR CODE HERE" in test_out, "the traceback should show the learner where to write the answer"
