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
