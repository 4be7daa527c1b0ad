"""The grader's own exceptions: each says where the problem is and how to fix it."""

from __future__ import annotations


class CourseError(Exception):
    """Base class: a problem the instructor can fix; the CLI prints it as one line, without a traceback."""

    #: the ``course`` command's exit status when this error ends it
    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
        text = f"{where}: {message}" if where else message
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)

    def one_line(self) -> str:
        """Where, what and the fix, on one line (what the ``course`` command prints)."""
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text}; {self.hint}" if self.hint else text


class ChapterNotFound(CourseError):
    """A chapter named on the command line has no source notebook in solutions/."""


class ReleaseError(CourseError):
    """The release is stale against solutions/, or leaks a solution or a hidden test."""


class SourceError(CourseError):
    """A chapter's source notebook cannot be released: a solution or hidden-test region is not closed."""


class SubmissionError(CourseError):
    """A submission cannot be graded (unreadable file, wrong chapter, ...): costs that submission only."""


class NothingToGrade(CourseError):
    """The submissions given hold no submission at all."""


class OptionError(CourseError):
    """A grading option is out of range, or would re-grade recorded results without ``--force``."""


class LmsFileError(CourseError):
    """An LMS's own file (a Canvas gradebook, a Moodle grading worksheet) the grader cannot fill: not
    CSV as its LMS writes it, or the column to fill is not there, or not one."""


class GradebookError(CourseError):
    """The gradebook's URL is malformed, its database unreachable, or its password unknown."""


class WorkspaceError(CourseError):
    """The workspace is missing, was never graded, or cannot be written."""


class WorkspaceBusy(WorkspaceError):
    """Another ``course grade`` holds the workspace's lock."""

    exit_code = 75  # EX_TEMPFAIL: try again later


class Interrupted(CourseError):
    """The instructor pressed Ctrl-C: what was recorded stays, a rerun resumes."""

    exit_code = 130  # 128 + SIGINT, as a shell reports it


class NotebookRunError(CourseError):
    """The CI notebook runner found notebooks that do not behave as promised."""
