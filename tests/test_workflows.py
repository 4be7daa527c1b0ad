"""CI configuration: workflows valid against GitHub's schema, both runners call `make ci`,
the Makefile's ci target runs every check, lint covers notebooks, pre-commit hooks are sound."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import notebook_manifest as nm
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return found


def validate(*paths: Path) -> subprocess.CompletedProcess:
    """check-jsonschema with its vendored GitHub-workflow schema (no network)."""
    cmd = [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, paths)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def jobs() -> dict[str, dict]:
    return {name: job for path in WORKFLOWS for name, job in load(path)["jobs"].items()}


def runs(job: dict) -> list[str]:
    return [step["run"] for step in job.get("steps", []) if "run" in step]


def make_ci_call(job: dict) -> dict[str, str]:
    """The variables of the job's single `make ci` call."""
    calls = [shlex.split(line) for r in runs(job) for line in r.splitlines() if re.match(r"\s*make ci\b", line)]
    assert len(calls) == 1, f"expected one `make ci` step, found {calls}"
    return dict(arg.split("=", 1) for arg in calls[0][2:] if "=" in arg)


# --- workflow files ------------------------------------------------------------------------


def test_there_are_workflows():
    assert WORKFLOWS, "no .github/workflows/*.yml"


def test_every_workflow_is_valid_against_githubs_schema():
    result = validate(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_an_invalid_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("on: [push]\njobs:\n  cpu:\n    runs-on: ubuntu-latest\n    stepz:\n      - run: make ci\n")
    result = validate(bad)
    assert result.returncode != 0 and "stepz" in result.stdout


def test_cpu_job_runs_make_ci_on_a_github_hosted_linux_runner_with_a_cpu_torch():
    cpu = [job for job in jobs().values() if job["runs-on"] == "ubuntu-latest"]
    assert len(cpu) == 1, "one CPU job on ubuntu-latest"
    args = make_ci_call(cpu[0])
    assert args["DEVICE"] == "cpu"
    assert re.fullmatch(r"torch==\S+ --index-url https://download\.pytorch\.org/whl/cpu", args["TORCH_SPEC"]), args


def test_gpu_job_runs_make_ci_with_cuda_on_the_self_hosted_gpu_runner():
    gpu = [job for job in jobs().values() if job["runs-on"] == ["self-hosted", "gpu"]]
    assert len(gpu) == 1, "one GPU job with runs-on: [self-hosted, gpu]"
    args = make_ci_call(gpu[0])
    assert args["DEVICE"] == "cuda"
    assert re.fullmatch(r"torch==\S+ --index-url https://download\.pytorch\.org/whl/cu\d+", args["TORCH_SPEC"]), args
    condition = gpu[0].get("if", "")
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition, (
        "pull requests from forks must not run on the self-hosted runner")


def test_torch_pin_lives_in_the_makefile_only():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_VERSION \?= \d+\.\d+\.\d+$", makefile, re.MULTILINE)
    for job in jobs().values():
        assert make_ci_call(job)["TORCH_SPEC"].startswith("torch==$(TORCH_VERSION) ")


@pytest.mark.parametrize("runner", ["ubuntu-latest", "self-hosted"])
def test_every_job_uploads_the_timing_report_even_when_it_failed(runner):
    (job,) = [j for j in jobs().values() if runner in (j["runs-on"] if isinstance(j["runs-on"], list) else [j["runs-on"]])]
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(uploads) == 1
    assert uploads[0]["with"]["path"].rstrip("/") == "ci-reports"
    assert uploads[0].get("if") == "always()"


# --- the Makefile's ci target ----------------------------------------------------------------


def recipe(target: str) -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        body.append(line.strip())
    return body


def test_make_ci_runs_lint_release_check_tests_browser_and_every_notebook():
    steps = recipe("ci")
    assert steps[:3] == ["$(MAKE) lint", "$(BIN)/course check-release", "$(MAKE) test"]
    assert "$(MAKE) browser-deps" in steps
    browser = next(s for s in steps if "-m browser" in s)
    assert steps.index("$(MAKE) browser-deps") < steps.index(browser)
    assert steps[-1] == "$(PY) ci/run_notebooks.py --device $(DEVICE) --jobs $(JOBS)"


def test_plain_pytest_deselects_browser_and_gpu_tests():
    addopts = nm.tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-m 'not browser and not gpu'" in addopts


def test_browser_deps_installs_chromium_with_apt_only_when_missing():
    body = " ".join(recipe("browser-deps"))
    assert "[ -x /usr/bin/chromium ]" in body and "command -v apt-get" in body
    assert "apt-get install -y -q chromium" in body and "playwright install" not in body


def test_make_help_lists_every_target_it_documents():
    out = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = {line.split()[0] for line in re.sub(r"\x1b\[[0-9;]*m", "", out).splitlines() if line.strip()}
    documented = set(re.findall(r"^([a-zA-Z_-]+):.*## ", (ROOT / "Makefile").read_text(), re.MULTILINE))
    assert {"ci", "test", "lint", "browser-deps"} <= documented == listed


# --- lint covers the notebooks; pre-commit ------------------------------------------------------


def test_make_lint_checks_every_solution_notebook():
    (lint,) = [s for s in recipe("lint") if "ruff check" in s]
    paths = lint.split("ruff check", 1)[1].split()
    listed = subprocess.run([tool("ruff"), "check", "--show-files", *paths], cwd=ROOT,
                            capture_output=True, text=True).stdout
    notebooks = sorted(str(p) for p in (ROOT / "solutions").glob("*/*.ipynb"))
    missing = [nb for nb in notebooks if nb not in listed]
    assert notebooks and not missing, f"ruff does not check {missing}"


def test_ruff_reports_a_mistake_inside_a_notebook(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    path = tmp_path / "bad.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("import os\nx = 1")]), str(path))
    result = subprocess.run([tool("ruff"), "check", "--config", str(ROOT / "pyproject.toml"), str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "F401" in result.stdout and "cell 1" in result.stdout


def test_pre_commit_config_is_valid_and_runs_ruff_and_the_notebook_check():
    config = ROOT / ".pre-commit-config.yaml"
    result = subprocess.run([tool("pre-commit"), "validate-config", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    hooks = {h["id"]: h for repo in yaml.safe_load(config.read_text())["repos"] for h in repo["hooks"]}
    assert hooks["ruff"]["entry"].startswith(".venv/bin/ruff check")
    assert "jupyter" in hooks["ruff"]["types_or"]
    assert hooks["clean-notebooks"]["entry"] == ".venv/bin/course clean-notebooks --check"
    assert re.match(hooks["clean-notebooks"]["files"], "solutions/01_tensors/tensors.ipynb")


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version and not re.search(r"[<>~!,;@ ]", version), f"not an exact pin: {line}"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_every_dependency_is_pinned_for_ci_and_torch_is_left_to_the_makefile():
    """A fresh clone installs what the tests saw (constraints.txt), not whatever was released since."""
    from packaging.requirements import Requirement

    project = nm.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["grader"], *project["optional-dependencies"]["dev"]]
    pins = _pins()
    assert "torch" not in pins and "pytorch-foundations" not in pins
    for text in wanted:
        req = Requirement(text)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name == "torch" or (req.marker and not req.marker.evaluate({"python_version": "3.11"})):
            continue
        assert name in pins, f"{req.name} is not pinned in constraints.txt (make lock)"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} is outside {req.specifier}"


def test_the_venv_is_built_with_the_pins_unless_told_otherwise():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^CONSTRAINTS \?= constraints\.txt$", make, re.MULTILINE)
    recipe = make[make.index("$(STAMP): pyproject.toml"):].split("\n\n")[0]
    assert "$(CONSTRAINTS)" in recipe.splitlines()[0]  # a new pin rebuilds the venv
    assert '$(if $(CONSTRAINTS),-c $(CONSTRAINTS),) -e ".[grader,dev]"' in recipe
