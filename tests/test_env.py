"""course_utils.env: seeding, device choice that never crashes, a light import."""

import subprocess
import sys

import torch

from course_utils import pick_device, setup


def test_setup_seeds_torch_reproducibly(capsys):
    setup(seed=3)
    a = torch.randn(4)
    setup(seed=3)
    assert torch.equal(a, torch.randn(4))
    assert "torch " in capsys.readouterr().out


def test_setup_prints_version_device_and_where(capsys):
    device = setup(seed=0, device="cpu")
    line = capsys.readouterr().out.strip()
    assert device == torch.device("cpu")
    assert line.startswith(f"torch {torch.__version__} | device: cpu | seed: 0 | ")
    assert "local" in line or "Colab" in line


def test_auto_picks_an_available_device():
    device = pick_device("auto")
    assert device.type in {"cuda", "mps", "cpu"}
    if not torch.cuda.is_available():
        assert device.type != "cuda"


def test_an_unavailable_or_unknown_device_falls_back_to_cpu(capsys):
    assert pick_device("not-a-device") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert pick_device("cuda") == torch.device("cpu")
        assert "not available" in capsys.readouterr().out


def test_meta_device_is_always_available():
    assert pick_device("meta") == torch.device("meta")


def test_importing_course_utils_does_not_import_matplotlib():
    code = "import sys, course_utils; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_min_torch_is_pyprojects_lower_bound():
    import re
    from pathlib import Path

    from course_utils import env

    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    bounds = re.findall(r'"torch>=([\d.]+)"', pyproject)
    assert bounds == [env.MIN_TORCH], bounds


def test_torch_is_older_compares_major_and_minor_only():
    from course_utils.env import torch_is_older

    for version in ("2.2.0", "2.10.1+cu128", "1.13.1", "2.10.0a0+git1234"):
        assert torch_is_older(version, "2.11"), version
    for version in ("2.11.0+cu130", "2.11.0", "2.13.0", "2.12.0a0+git1234", "3.0.0", "not a version"):
        assert not torch_is_older(version, "2.11"), version


def test_setup_warns_on_a_torch_older_than_the_lower_bound_and_goes_on(monkeypatch, capsys):
    import warnings

    import pytest

    from course_utils import env

    monkeypatch.setattr(torch, "__version__", "2.10.1+cu128")
    with pytest.warns(UserWarning, match=r"torch 2\.10\.1\+cu128 is older than 2\.11.*never installs torch"):
        device = setup(seed=0, device="cpu")
    assert device == torch.device("cpu")  # it goes on
    monkeypatch.setattr(torch, "__version__", f"{env.MIN_TORCH}.0+cu130")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a tested version: no warning at all
        setup(seed=0, device="cpu", quiet=True)
