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
