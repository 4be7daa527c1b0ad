"""A chapter's time by count (ci/core_time.py): words, code lines the learner reads, exercises."""

from __future__ import annotations

import core_time
import nbformat


def test_the_count_reads_what_a_learner_reads_and_splits_core_from_optional():
    answer = nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n",
                                       metadata={"nbgrader": {"solution": True, "grade_id": "ex1"}})
    test = nbformat.v4.new_code_cell("assert f(1) == 1\n\n### BEGIN HIDDEN TESTS\nassert f(2) == 2\n### END HIDDEN TESTS\n",
                                     metadata={"nbgrader": {"grade": True, "grade_id": "t1", "points": 1}})
    deep = nbformat.v4.new_markdown_cell("one two three", metadata={"tags": ["optional"]})
    cells = [nbformat.v4.new_markdown_cell("Four words here, then\n```python\nx = 1\n```"), answer, test, deep]
    core, optional = core_time.count(cells)
    assert (core.words, core.lines, core.exercises) == (4, 2, 1)  # `def f(x):` and the visible assert
    assert (optional.words, optional.lines, optional.exercises) == (3, 0, 0)
    assert core.minutes == 4 / 200 + 2 / 15 + 7


def test_a_stated_time_is_the_count_rounded_to_five_minutes():
    assert [core_time.rounded(m) for m in (0.4, 7.4, 7.6, 91.0, 92.6)] == [5, 5, 10, 90, 95]
    header = nbformat.v4.new_markdown_cell("# 09\n\n**Time**: about 5 minutes on the core path, plus about 5 min "
                                           "for the optional deep dives.  \nMore text.")
    answer = nbformat.v4.new_code_cell("x = 1\n", metadata={"nbgrader": {"solution": True, "grade_id": "ex1"}})
    core, optional = core_time.count([header, answer])
    assert core_time.time_line(core, optional).startswith("**Time**: about 5 minutes on the core path")
    core.exercises = 2  # 14 minutes and a bit: stated as 15
    assert core_time.time_line(core, optional).startswith("**Time**: about 15 minutes")


def test_every_chapter_and_the_readme_state_the_counted_time():
    """A chapter states what the count says (`python ci/core_time.py --write` rewrites it), the README too."""
    from grader import project

    paths = [project.source_notebook(c) for c in project.chapters()]
    assert core_time.stated_times(paths, write=False) == []
