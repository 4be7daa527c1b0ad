"""grader.cells: the predicates, markers and hidden-test splitting everything else relies on."""

from nbformat.v4 import new_code_cell

from grader import cells


def cell(meta=None, source="", tags=None):
    c = new_code_cell(source)
    if meta is not None:
        c.metadata["nbgrader"] = meta
    if tags:
        c.metadata["tags"] = tags
    return c


def test_predicates():
    answer = cell({"solution": True, "grade": False, "grade_id": "ex1"})
    test = cell({"solution": False, "grade": True, "locked": True, "points": 3, "grade_id": "t1"})
    plain = cell()
    assert cells.is_solution(answer) and not cells.is_graded(answer)
    assert cells.is_test(test) and cells.is_locked(test) and cells.points(test) == 3.0
    assert not any(f(plain) for f in (cells.is_solution, cells.is_graded, cells.is_test, cells.is_locked))
    assert cells.points(answer) == 0.0 and cells.grade_id(plain) is None


def test_broken_metadata_reads_as_none():
    assert cells.nbgrader_meta(cell("not a dict")) == {}


def test_marker_round_trip_and_is_found_below_blank_lines():
    line = cells.marker_line("tests", "test_ex1_double")
    assert cells.marker(cell(source=line + "\ncheck()")) == ("tests", "test_ex1_double")
    assert cells.marker(cell(source="\n" + cells.marker_line("answer", "ex1") + "\nx = 1")) == ("answer", "ex1")
    assert cells.marker(cell(source="x = 1  # [answer: ex1]")) is None


def test_split_hidden():
    src = "visible()\n### BEGIN HIDDEN TESTS\nhidden()\n### END HIDDEN TESTS\nafter()"
    visible, hidden = cells.split_hidden(src)
    assert "hidden()" not in visible and "visible()" in visible and "after()" in visible
    assert hidden.strip() == "hidden()"
    assert cells.split_hidden("only()") == ("only()", "")


def test_tags():
    c = cell(tags=["parameters"])
    assert cells.has_tag(c, "parameters")
    cells.add_tag(c, "x")
    cells.add_tag(c, "x")
    assert c.metadata["tags"] == ["parameters", "x"]
