"""Environment set-up for a chapter: seeding, device choice, the one-line summary."""

from __future__ import annotations

import os
import random
import re
import sys
import warnings

import numpy as np
import torch

#: Set by the grader in every kernel it starts, so a notebook can tell it is being graded.
GRADING_ENV_VAR = "COURSE_GRADING"

#: The oldest torch the course has been run with: pyproject.toml's lower bound (tests/test_env.py
#: checks that they agree). Tested: torch 2.13 on the CPU (CI), torch 2.11 with CUDA 13 on a GPU.
MIN_TORCH = "2.11"


def torch_is_older(version: str, minimum: str = MIN_TORCH) -> bool:
    """Return True when the torch ``version`` ("2.10.1+cu128", "2.13.0") is older than ``minimum``.

    Only major and minor count; a version string that does not start with them is not called old.
    """

    def major_minor(text: str) -> tuple[int, int] | None:
        match = re.match(r"(\d+)\.(\d+)", str(text))
        return (int(match[1]), int(match[2])) if match else None

    have, want = major_minor(version), major_minor(minimum)
    return have is not None and want is not None and have < want


def in_colab() -> bool:
    """Return True when running inside Google Colab."""
    return "google.colab" in sys.modules


def is_grading() -> bool:
    """Return True when the notebook is being executed by the course grader."""
    return os.environ.get(GRADING_ENV_VAR, "") not in ("", "0")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    try:
        return bool(backend is not None and backend.is_available())
    except Exception:  # a broken MPS install must not stop the chapter
        return False


def pick_device(preferred: str | torch.device = "auto") -> torch.device:
    """Choose the device to run on, never crashing.

    Args:
        preferred: ``"auto"`` picks CUDA, then Apple's MPS, then the CPU. Any other
            value (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ``"meta"``) is used when
            it is available; otherwise a message says so and the CPU is used instead.

    Returns:
        The chosen ``torch.device``.
    """
    if str(preferred) == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(preferred)
    except (RuntimeError, TypeError) as exc:
        print(f"'{preferred}' is not a device name torch knows ({exc}); using the CPU instead.")
        return torch.device("cpu")
    available = {
        "cpu": True,
        "meta": True,
        "cuda": torch.cuda.is_available(),
        "mps": _mps_available(),
    }.get(device.type, False)
    if device.type == "cuda" and available and device.index is not None:
        available = device.index < torch.cuda.device_count()
    if not available:
        print(f"Device '{device}' is not available on this machine; using the CPU instead.")
        return torch.device("cpu")
    return device


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's random number generators (all devices)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def setup(seed: int = 0, device: str | torch.device = "auto", *, quiet: bool = False) -> torch.device:
    """Prepare a chapter: seed every RNG, choose the device, print one line about both.

    Warns (and goes on) when torch is older than :data:`MIN_TORCH`.

    Args:
        seed: seed for ``random``, NumPy and torch.
        device: see :func:`pick_device`.
        quiet: skip the printed line.

    Returns:
        The device the chapter should use.
    """
    if torch_is_older(torch.__version__):
        warnings.warn(
            f"torch {torch.__version__} is older than {MIN_TORCH}, the oldest version this course is"
            " tested with (2.13 on the CPU, 2.11 with CUDA 13 on a GPU): some cells may fail or show"
            " other dtypes and messages. The setup cell never installs torch; upgrade it yourself"
            " if you can (pip install -U torch).",
            stacklevel=2,
        )
    seed_everything(seed)
    chosen = pick_device(device)
    if not quiet:
        where = "Colab" if in_colab() else "local"
        grading = ", grading run" if is_grading() else ""
        print(f"torch {torch.__version__} | device: {chosen} | seed: {seed} | {where}{grading}")
    return chosen
