"""What a course_utils picture drew, read back by the gid each part was drawn with."""

from __future__ import annotations


def texts(fig, role: str) -> list[str]:
    """The texts of every cell drawn with ``role``, in drawing order."""
    return [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == role]


def patches(fig, role: str) -> list:
    """The patches drawn with ``role``, in drawing order."""
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == role]
