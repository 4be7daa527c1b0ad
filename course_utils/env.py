"""Environment set-up for a chapter: seeding, device choice, the one-line summary."""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch

#: Set by the grader in every kernel it starts, so a notebook can tell it is being graded.
GRADING_ENV_VAR = "COURSE_GRADING"


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

    Args:
        seed: seed for ``random``, NumPy and torch.
        device: see :func:`pick_device`.
        quiet: skip the printed line.

    Returns:
        The device the chapter should use.
    """
    seed_everything(seed)
    chosen = pick_device(device)
    if not quiet:
        where = "Colab" if in_colab() else "local"
        grading = ", grading run" if is_grading() else ""
        print(f"torch {torch.__version__} | device: {chosen} | seed: {seed} | {where}{grading}")
    return chosen
