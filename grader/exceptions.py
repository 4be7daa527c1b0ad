"""The grader's own exceptions: each says where the problem is and how to fix it."""

from __future__ import annotations


class CourseError(Exception):
    """Base class: a problem the instructor can fix; the CLI prints it without a traceback."""

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
        text = f"{where}: {message}" if where else message
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class ChapterNotFound(CourseError):
    """A chapter named on the command line has no source notebook in solutions/."""


class ReleaseError(CourseError):
    """The release is stale against solutions/, or leaks a solution or a hidden test."""


class SubmissionError(CourseError):
    """A submission cannot be graded (unreadable file, wrong chapter, ...): costs that submission only."""


class NotebookRunError(CourseError):
    """The CI notebook runner found notebooks that do not behave as promised."""
