"""Learner-facing helpers imported by every chapter notebook (no solutions in here)."""

from course_utils.checks import (
    AnswerError,
    check_shape,
    check_tensor,
    check_value,
    raises,
)
from course_utils.env import in_colab, is_grading, pick_device, setup
from course_utils.predict import reveal

__all__ = [
    "AnswerError",
    "check_shape",
    "check_tensor",
    "check_value",
    "draw_graph",
    "graph_nodes",
    "in_colab",
    "is_grading",
    "pick_device",
    "raises",
    "reveal",
    "setup",
    "show_broadcast",
    "show_grid",
    "show_mask",
    "show_strides",
    "submit",
]

__version__ = "0.1.0"


_LAZY = {
    "show_grid": "course_utils.plots",
    "show_strides": "course_utils.pictures",
    "show_broadcast": "course_utils.pictures",
    "show_mask": "course_utils.pictures",
    "draw_graph": "course_utils.graph",
    "graph_nodes": "course_utils.graph",
    "submit": "course_utils.handin",
}


def __getattr__(name: str):
    # Picture helpers import matplotlib, which costs ~0.3 s, and submit() the grader's cell predicates:
    # load them only when used.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
