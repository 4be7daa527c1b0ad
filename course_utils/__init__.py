"""Learner-facing helpers imported by every chapter notebook (no solutions in here)."""

from course_utils.checks import (
    AnswerError,
    check_shape,
    check_tensor,
    check_value,
    raises,
)
from course_utils.env import in_colab, is_grading, pick_device, setup

__all__ = [
    "AnswerError",
    "check_shape",
    "check_tensor",
    "check_value",
    "in_colab",
    "is_grading",
    "pick_device",
    "raises",
    "setup",
    "show_grid",
]

__version__ = "0.1.0"


def __getattr__(name: str):
    # Plot helpers import matplotlib, which costs ~0.3 s: load them only when used.
    if name == "show_grid":
        from course_utils.plots import show_grid

        return show_grid
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
