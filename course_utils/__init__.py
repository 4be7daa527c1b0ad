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
    "float_bits",
    "graph_nodes",
    "in_colab",
    "index_arrows",
    "is_grading",
    "pick_device",
    "raises",
    "record_timeline",
    "reveal",
    "setup",
    "show_bits",
    "show_broadcast",
    "show_broadcast_grad",
    "show_gather",
    "show_grid",
    "show_mask",
    "show_scatter",
    "show_strides",
    "show_timeline",
    "submit",
]

__version__ = "0.1.0"


_LAZY = {
    "show_grid": "course_utils.plots",
    "show_strides": "course_utils.pictures",
    "show_broadcast": "course_utils.pictures",
    "show_mask": "course_utils.pictures",
    "float_bits": "course_utils.bits",
    "show_bits": "course_utils.bits",
    "index_arrows": "course_utils.arrows",
    "show_gather": "course_utils.arrows",
    "show_scatter": "course_utils.arrows",
    "show_broadcast_grad": "course_utils.broadcast_grad",
    "record_timeline": "course_utils.timeline",
    "show_timeline": "course_utils.timeline",
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
