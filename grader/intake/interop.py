"""nbgrader's own tools on a course workspace: what they may do there, and where ours write.

The workspace keeps nbgrader's folder names so that ``nbgrader formgrader`` opens it for manual
grading. Two of nbgrader's commands would do harm there, so:

- ``nbgrader generate_feedback`` (and formgrader's "generate feedback" button) would render the
  autograded notebooks, which hold the hidden tests: the workspace's ``nbgrader_config.py``,
  written by every ``course`` command, makes it stop with a sentence instead (a hook that runs
  before anything is written, and a refusing preprocessor should the hook be switched off).
- ``nbgrader export`` writes ``grades.csv``: ours are ``course-grades.csv`` and ``results.csv``,
  and our pages live in ``course-feedback/``, never in nbgrader's ``feedback/``.
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_NAME = "nbgrader_config.py"
FEEDBACK_DIR = "course-feedback"
GRADES_CSV = "course-grades.csv"
RESULTS_CSV = "results.csv"

MESSAGE = (
    "nbgrader's generate_feedback is switched off in this course workspace: the autograded "
    "notebooks hold the hidden tests, and its pages would show them. Run `course feedback "
    "--workdir <this folder>` instead (pages in course-feedback/, with manual grades and comments)."
)

CONFIG = f'''\
# Written by `course` (grader/intake/interop.py) and rewritten by every `course` command: edits are lost.
# nbgrader reads this file when it runs in (or on) this workspace.
#
# `nbgrader generate_feedback` would render the autograded notebooks, hidden tests included;
# here it stops before writing anything. `course feedback` writes safe pages to course-feedback/.
from nbconvert.preprocessors import Preprocessor

MESSAGE = {MESSAGE!r}


def refuse_feedback(**kwargs):
    raise SystemExit("error: " + MESSAGE)


class RefuseFeedback(Preprocessor):
    """Second guard, should the hook be switched off on a command line."""

    def __call__(self, nb, resources):  # whether nbconvert enabled it or not
        raise RuntimeError(MESSAGE)


c = get_config()  # noqa: F821 (nbgrader provides it)
c.GenerateFeedback.pre_convert_hook = refuse_feedback
c.GenerateFeedback.preprocessors = [RefuseFeedback]
'''


def write_nbgrader_config(workdir: Path) -> Path | None:
    """Write the workspace's ``nbgrader_config.py`` (when it differs); None when there is no workspace."""
    if not workdir.is_dir():
        return None
    path = workdir / CONFIG_NAME
    try:
        if path.read_text(encoding="utf-8") == CONFIG:
            return path
    except OSError:
        pass
    tmp = path.with_suffix(".tmp")
    tmp.write_text(CONFIG, encoding="utf-8")
    os.replace(tmp, path)
    return path
