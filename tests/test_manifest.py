"""ci/manifest.toml: every chapter has a timeout, every skip a reason, and the runner obeys it."""

from __future__ import annotations

import re
import time

import notebook_manifest as nm
import pytest
import run_notebooks as runner

from grader import project
from grader.prepare.release import dumps, read

CH = "00_mini"


def manifest(text: str) -> nm.Manifest:
    return nm.parse(nm.tomllib.loads(text), "test.toml")


# --- the real manifest ---------------------------------------------------------------------


def test_the_manifest_loads_and_names_only_chapters_of_solutions():
    m = nm.load()
    assert m.path.endswith("ci/manifest.toml")
    assert set(m.chapters) <= set(project.chapters()), sorted(set(m.chapters) - set(project.chapters()))


def test_the_defaults_give_a_chapter_without_an_entry_a_timeout():
    """A new chapter needs no manifest entry: [defaults] gives it a timeout (CONTRIBUTING says when to add one)."""
    raw = nm.tomllib.loads(nm.MANIFEST.read_text())
    assert 30 <= raw["defaults"]["timeout"] <= 1800
    assert nm.load().settings("99_new_chapter").timeout == raw["defaults"]["timeout"]


@pytest.mark.parametrize("chapter", project.chapters())
def test_every_chapter_has_a_sane_timeout(chapter):
    assert 30 <= nm.load().settings(chapter).timeout <= 1800


# --- parsing ---------------------------------------------------------------------------------


def test_settings_fill_in_defaults_for_chapters_the_file_does_not_name():
    m = manifest("[defaults]\ntimeout = 120\n[chapters.01_tensors]\nneeds_gpu = true\n")
    assert m.settings("01_tensors") == nm.NotebookSettings("01_tensors", timeout=120, needs_gpu=True)
    assert m.settings("99_other") == nm.NotebookSettings("99_other", timeout=120, needs_gpu=False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[chapters.01_tensors.skip]]\non = ["cpu"]\n', "chapters.01_tensors.skip[0]: a skip without a reason"),
        ('[[chapters.01_tensors.skip]]\non = ["cpu"]\nreason = "  "\n', "a skip without a reason"),
        ('[[chapters.01_tensors.skip]]\non = ["cpu"]\ncell = "c1"\n', "a skip without a reason"),
        ('[[chapters.01_tensors.skip]]\nreason = "slow"\n', "a skip must say on which runners"),
        ('[[chapters.01_tensors.skip]]\non = ["gpu"]\nreason = "x"\n', "`on` names ['gpu']"),
        ('[[chapters.01_tensors.skip]]\non = []\nreason = "x"\n', "`on` must be a non-empty list"),
        ('[[chapters.01_tensors.skip]]\non = ["cpu"]\nreason = "x"\nmode = ["grade"]\n', "`mode` names ['grade']"),
        ('[[chapters.01_tensors.skip]]\non = ["cpu"]\nreasons = "x"\n', "unknown key(s) ['reasons']"),
        ("[chapters.01_tensors]\ntimout = 60\n", "chapters.01_tensors: unknown key(s) ['timout']"),
        ("[chapters.01_tensors]\ntimeout = 0\n", "timeout = 0 is not a positive number"),
        ('[chapters.01_tensors]\ntimeout = "60"\n', "is not a positive number"),
        ('[chapters.01_tensors]\nneeds_gpu = "yes"\n', "needs_gpu = 'yes' is not true or false"),
        ("[default]\ntimeout = 60\n", "unknown table(s) ['default']"),
        ('[[defaults.skip]]\non = ["cpu"]\nreason = "x"\n', "skips belong to a chapter"),
    ],
)
def test_a_malformed_manifest_is_an_error_that_says_where(text, message):
    with pytest.raises(nm.ManifestError) as err:
        manifest(text)
    assert message in str(err.value)


def test_a_file_that_is_not_toml_is_an_error(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text("[chapters.01\n")
    with pytest.raises(nm.ManifestError, match="not valid TOML"):
        nm.load(path)


def test_skips_apply_to_their_runners_and_modes_only():
    m = manifest(
        '[[chapters.07_devices.skip]]\non = ["cpu"]\nmode = ["release"]\nreason = "too slow on a CPU"\n'
        '[[chapters.07_devices.skip]]\non = ["cpu", "mps"]\ncell = "c9"\nreason = "needs pinned memory"\n'
    )
    s = m.settings("07_devices")
    assert s.skip_reason("cpu", "release") == "too slow on a CPU"
    assert s.skip_reason("cpu", "solution") is None and s.skip_reason("cuda", "release") is None
    assert s.skipped_cells("cpu", "solution") == {"c9": "needs pinned memory"}
    assert s.skipped_cells("cuda", "solution") == {}


def test_a_notebook_that_needs_a_gpu_is_skipped_with_that_reason_without_one():
    s = manifest("[chapters.07_devices]\nneeds_gpu = true\n").settings("07_devices")
    assert "needs a GPU" in s.skip_reason("cpu", "solution")
    assert s.skip_reason("cuda", "solution") is None and s.skip_reason("mps", "release") is None


def test_the_runner_kind_is_the_device_type():
    assert nm.runner_of("cuda:1") == "cuda" and nm.runner_of("cpu") == "cpu"
    assert nm.runner_of("auto") in nm.RUNNERS


# --- the runner obeys it (mini course) ---------------------------------------------------------


def run(solutions, text, modes=("solution", "release"), **kw):
    return runner.run([CH], list(modes), fast=True, solutions_dir=solutions, manifest=manifest(text), **kw)


@pytest.mark.slow
def test_a_skipped_notebook_is_not_executed_and_the_report_says_why(mini_solutions, tmp_path):
    text = f'[[chapters.{CH}.skip]]\non = ["cpu"]\nmode = ["release"]\nreason = "shown on the GPU runner only"\n'
    solution, release = run(mini_solutions, text, jobs=2, report_dir=tmp_path)
    assert (solution.mode, solution.ok, solution.skipped) == ("solution", True, "")
    assert solution.code_cells_run > 0
    assert (release.mode, release.ok, release.skipped, release.code_cells_run) == (
        "release", True, "shown on the GPU runner only", 0)
    md = (tmp_path / "summary.md").read_text()
    assert f"| {CH} | release | 0.0 | 0 | skipped: shown on the GPU runner only |" in md


@pytest.mark.slow
def test_a_gpu_notebook_on_a_cpu_runner_is_skipped_not_failed(mini_solutions):
    (result,) = run(mini_solutions, f"[chapters.{CH}]\nneeds_gpu = true\n", modes=("solution",), device="cpu")
    assert result.ok and "needs a GPU" in result.skipped and result.code_cells_run == 0


@pytest.mark.slow
def test_a_skipped_cell_does_not_run_and_its_test_is_not_judged(mini_solutions):
    path = mini_solutions / CH / "mini.ipynb"
    nb = read(path)
    nb.cells[4].source = "assert 1 == 2, 'this demo needs CUDA'"
    path.write_text(dumps(nb))
    text = (
        f'[[chapters.{CH}.skip]]\non = ["cpu"]\ncell = "mini-04"\nreason = "the demo needs CUDA"\n'
        f'[[chapters.{CH}.skip]]\non = ["cpu"]\ncell = "mini-07"\nreason = "test needs CUDA"\nmode = ["release"]\n'
    )
    solution, release = run(mini_solutions, text)
    assert solution.ok, solution.failures
    assert solution.skipped_cells == ["cell mini-04: the demo needs CUDA"]
    assert release.ok, release.failures
    assert release.skipped_cells == [
        "cell mini-04: the demo needs CUDA",
        "cell mini-07-visible: test needs CUDA",
        "cell mini-07-hidden: test needs CUDA",
    ]
    # on the CUDA runner the same manifest skips nothing, and the broken demo fails
    plan = runner.plan([CH], ["solution"], device="cuda", solutions_dir=mini_solutions, manifest=manifest(text))
    assert plan[0].skip_cells == ()


@pytest.mark.slow
def test_a_skip_naming_a_cell_that_does_not_exist_is_a_failure(mini_solutions):
    text = f'[[chapters.{CH}.skip]]\non = ["cpu"]\ncell = "renamed-cell"\nreason = "x"\n'
    (result,) = run(mini_solutions, text, modes=("solution",))
    assert not result.ok
    assert "skips cell 'renamed-cell', but the notebook has no cell with that id" in result.failures[0]


@pytest.mark.slow
def test_a_notebook_past_its_wall_clock_timeout_is_stopped_and_fails(mini_solutions):
    path = mini_solutions / CH / "mini.ipynb"
    nb = read(path)
    nb.cells[4].source = "import time\ntime.sleep(120)"
    path.write_text(dumps(nb))
    start = time.perf_counter()
    (result,) = run(mini_solutions, f"[chapters.{CH}]\ntimeout = 15\n", modes=("solution",))
    took = time.perf_counter() - start
    assert not result.ok and result.timeout == 15
    assert re.search(r"ran past its timeout \(1\d s > 15 s, wall clock for the whole notebook\)", result.failures[0]), result.failures
    assert took < 60, f"the notebook was not stopped at its timeout ({took:.0f} s)"


@pytest.mark.slow
def test_a_notebook_within_its_timeout_passes_and_the_timeout_is_reported(mini_solutions, tmp_path):
    (result,) = run(mini_solutions, f"[chapters.{CH}]\ntimeout = 300\n", modes=("solution",), report_dir=tmp_path)
    assert result.ok and result.timeout == 300
    assert f"| {CH} | solution |" in (tmp_path / "summary.md").read_text()
    assert '"timeout": 300' in (tmp_path / f"{CH}.solution.json").read_text()
