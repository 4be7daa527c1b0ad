"""Observations (course_utils.observe), the test-cell rewrite (grader.verdict.instrument) and the verdict
(grader.verdict.judge): values survive the trip as data, malformed data is refused, and the grader's
comparison says what the learner's own checks would say."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_utils import checks, observe
from grader import cells
from grader.verdict import expectations, instrument, observations
from grader.verdict import judge as verdict

VALUES = [
    None, True, 0, -(10**30), 1.5, float("inf"), "text", (1, [2, 3]), {"a": 1, 2: (3,)},
    torch.float16, torch.Size([2, 3]), torch.device("cpu"),
    torch.arange(6).reshape(2, 3), torch.tensor(2.5), torch.zeros(0, 3), torch.ones(2, dtype=torch.bfloat16),
    torch.tensor([True, False]), torch.tensor([1 + 2j]), torch.arange(12).reshape(3, 4).T,
    torch.arange(9.0).as_strided((1, 1), (3, 3)), torch.arange(9.0)[::4][:1],  # one element, a stride of 3 or 4
    torch.tensor([1 + 2j, 3j])[::2],
    np.arange(4.0), np.int32(7),
]


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(VALUES)])
def test_a_value_survives_encoding_and_decoding(value):
    back = observations.decode(observe.encode(value))
    if isinstance(value, torch.Tensor):
        assert type(back) is torch.Tensor and back.dtype == value.dtype and back.shape == value.shape
        assert torch.equal(back, value)
    elif isinstance(value, np.ndarray):
        assert np.array_equal(back, value) and back.dtype == value.dtype
    else:
        assert back == value and type(back) is type(value)


def test_nan_and_meta_tensors_keep_their_kind():
    assert math.isnan(observations.decode(observe.encode(float("nan"))))
    meta = observations.decode(observe.encode(torch.empty(2, 3, device="meta")))
    assert meta.device.type == "meta" and meta.shape == (2, 3)


@pytest.mark.parametrize(
    "bad",
    [
        {"t": "tensor", "dtype": "float32", "shape": [2], "device": "cpu", "data": "AAAA"},  # 3 bytes for 8
        {"t": "tensor", "dtype": "__import__", "shape": [1], "device": "cpu", "data": ""},
        {"t": "tensor", "dtype": "float32", "shape": [-1], "device": "cpu", "data": ""},
        {"t": "int", "v": "1e9"},
        {"t": "bool", "v": 1},
        {"t": "ndarray", "dtype": "|O", "shape": [1], "data": "AAAAAAAAAAA="},
        {"t": "pickle", "v": "gASV"},
        "not even an object",
    ],
)
def test_malformed_observations_are_refused(bad):
    with pytest.raises(observations.Malformed):
        observations.decode(bad)


def test_subclasses_and_objects_are_never_tensors():
    class Mine(torch.Tensor):
        pass

    obs = observe.encode(torch.ones(2).as_subclass(Mine))
    assert obs["t"] == "object" and "subclass" in obs["type"]


def _record(kind, actual, line=1, **params):
    return {"v": 1, "kind": kind, "line": line, "actual": observe.encode(actual),
            "params": {k: observe.encode(v) for k, v in params.items()}}


def test_the_comparison_uses_the_references_tolerances_and_names():
    ref = {**_record("tensor", torch.ones(3), name="f(x)", rtol=0.0, atol=0.5, check_device=True)}
    assert verdict.compare(_record("tensor", torch.full((3,), 1.4)), ref, {}) is None
    why = verdict.compare(_record("tensor", torch.full((3,), 2.0)), ref, {})
    assert "f(x)" in why and "3 of 3 values differ" in why
    why = verdict.compare(_record("tensor", torch.ones(3, dtype=torch.float64)), ref, {})
    assert "has dtype torch.float64 but expected torch.float32" in why


def test_an_expected_value_given_by_the_reference_wins_over_its_own_answer():
    ref = {**_record("value", 2.0, name="n"), "expected": observe.encode(3.0)}
    assert verdict.compare(_record("value", 3.0), ref, {}) is None
    assert "is 2.0 but expected 3.0" in verdict.compare(_record("value", 2.0), ref, {})


def test_a_check_at_another_site_does_not_count():
    ref = _record("value", 1, line=5, name="n")
    assert "did not run as they should" in verdict.compare(_record("value", 1, line=6), ref, {})


def test_raises_is_judged_on_type_and_message():
    ref = _record("raises", ValueError("x"), types=["builtins.ValueError"], match="too big")
    assert verdict.compare(_record("raises", ValueError("too big")), ref, {}) is None
    assert "raised TypeError" in verdict.compare(_record("raises", TypeError("too big")), ref, {})
    assert "does not match" in verdict.compare(_record("raises", ValueError("no")), ref, {})
    assert "ran without error" in verdict.compare(_record("raises", observe.NO_EXCEPTION), ref, {})


def test_asserts_become_observations_with_their_message():
    src = "x = 1\nassert x == 1, 'x must be one'\n### BEGIN HIDDEN TESTS\nassert x > 0, f'x is {x}'\n### END HIDDEN TESTS\n"
    test = instrument.rewrite("test_ex1", src)
    assert "assert " not in test.code.replace("assert_", "")
    assert [m.parts for m in test.asserts.values()] == [("x must be one",), ("x is ", None)]
    assert "_course_obs.phase('hidden')" in test.code and test.code.rstrip().endswith("_course_obs.end()")
    ref = _record("assert", True, line=1)
    assert verdict.compare(_record("assert", False, line=1), ref, test.asserts) == "x must be one"


def test_the_hidden_part_leaves_nothing_in_the_notebooks_namespace(monkeypatch):
    """A learner's helper named like one of the hidden part's (`_describe`) is still the learner's
    after the test cell ran: the hidden part runs in a function of its own, and code after it sees
    the cell's visible names as before."""
    src = ("x = helper(1)\n### BEGIN HIDDEN TESTS\ndef _describe(v):\n    return 'hidden'\n"
           "for _i in range(2):\n    seen.append((_describe(_i), helper(_i), x))\n### END HIDDEN TESTS\n"
           "after = (x, _describe(0))\n")
    code = instrument.rewrite("test_ex1", src).code
    monkeypatch.setattr(observe, "emit", lambda *a, **k: None)
    namespace = {"helper": lambda v: v + 10, "_describe": lambda v: "the learner's", "seen": []}
    try:
        exec(compile(code, "<test cell>", "exec"), namespace)
    finally:
        observe._state["test"] = None
    assert namespace["seen"] == [("hidden", 10, 11), ("hidden", 11, 11)]
    assert namespace["after"] == (11, "the learner's") and "_i" not in namespace
    assert instrument.HIDDEN_SCOPE not in namespace


def test_checks_observe_and_never_raise_while_a_test_cell_runs(monkeypatch):
    sent = []
    monkeypatch.setattr(observe, "emit", lambda kind, actual, **k: sent.append((kind, actual, k)))
    observe._state["test"] = "test_ex1"
    try:
        checks.check_tensor(torch.zeros(2), torch.ones(2), name="wrong")
        checks.check_value(1, name="hidden: no expected value")
        with checks.raises(ValueError):
            pass
    finally:
        observe._state["test"] = None
    assert [s[0] for s in sent] == ["tensor", "value", "raises"]
    assert sent[0][2]["has_expected"] and not sent[1][2]["has_expected"]


def _cell(*records, error=None):
    cell = new_code_cell("", metadata={"nbgrader": {"grade": True, "grade_id": "t", "points": 1, "solution": False}})
    cell.execution_count = 1
    cell.outputs = [new_output("display_data", data={observe.MIME: r}) for r in records]
    if error:
        cell.outputs.append(new_output("error", ename=error[0], evalue=error[1], traceback=[]))
    return cell


def test_a_cell_passes_only_with_every_observation_and_its_end():
    refs = [_record("begin", None), _record("value", 2, name="n"), _record("end", None)]
    assert verdict.judge(_cell(*refs), refs, {}) == (verdict.PASSED, "")
    status, why = verdict.judge(_cell(*refs[:2]), refs, {})
    assert status == verdict.FAILED and "stopped before its end" in why
    status, why = verdict.judge(_cell(*refs, refs[1]), refs, {})
    assert status == verdict.FAILED and "more observations" in why
    status, why = verdict.judge(_cell(*refs, error=("RuntimeError", "late")), refs, {})
    assert status == verdict.FAILED


def test_an_error_message_reaches_the_reason_only_as_a_librarys_own_words():
    """A builtin class says nothing of who wrote the message: only a template of Python's or
    torch's is quoted, and only its words with numbers and names in their slots."""
    refs = [_record("begin", None), _record("value", 2, name="n(5)"), _record("end", None)]
    torch_words = "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"
    for message in ("SECRET hidden source, score 20/20", "SECRET " + torch_words):
        status, why = verdict.judge(_cell(refs[0], error=("RuntimeError", message)), refs, {})
        assert status == verdict.FAILED and "SECRET" not in why and "score" not in why
        assert why.startswith("RuntimeError was raised while checking n(5)")
    status, why = verdict.judge(_cell(refs[0], error=("RuntimeError", torch_words + ": SECRET score 20/20")), refs, {})
    assert f"with the message '{torch_words}' while checking n(5)" in why and "SECRET" not in why
    status, why = verdict.judge(_cell(refs[0], error=("Leaked_7", "SECRET")), refs, {})
    assert "SECRET" not in why and "Leaked" not in why and "class defined in the notebook" in why


def test_an_error_on_a_hidden_input_names_the_input_its_type_and_how_to_see_it():
    refs = [_record("begin", None), _record("phase", "hidden"), _record("value", 8, name="f(10**6)"), _record("end", None)]
    error = ("TypeError", "unsupported operand type(s) for +: 'int' and 'str'")
    status, why = verdict.judge(_cell(*refs[:2], error=error), refs, {})
    assert why.startswith("TypeError was raised with the message \"unsupported operand type(s) for +: 'int' and"
                          " 'str'\" while checking f(10**6)")
    assert "hidden" in why and "run the test cell" not in why


def test_an_error_after_the_last_check_names_the_check_before_it_in_its_part():
    refs = [_record("begin", None), _record("value", 2, name="g(2)"), _record("phase", "hidden"),
            _record("value", 8, name="f(10**6)"), _record("end", None)]
    status, why = verdict.judge(_cell(*refs[:4], error=("ValueError", "late")), refs, {})
    assert why.startswith("ValueError was raised after checking f(10**6)") and "hidden part" in why
    visible = [_record("begin", None), _record("value", 2, name="g(2)"), _record("end", None)]
    status, why = verdict.judge(_cell(*visible[:2], error=("ValueError", "late")), visible, {})
    assert why.startswith("ValueError was raised after checking g(2)") and "run the test cell" in why


def test_an_untouched_exercise_reads_not_answered_yet_wherever_it_stops_the_test():
    refs = [_record("begin", None), _record("value", 2, name="minmax_rows(S)"), _record("end", None)]
    for error in (("NotImplementedError", cells.STUB_MESSAGE), ("NotImplementedError", "")):
        assert verdict.judge(_cell(refs[0], error=error), refs, {}) == (verdict.FAILED, verdict.UNANSWERED)
    assert verdict.UNANSWERED.startswith("not answered yet") and "while checking" not in verdict.UNANSWERED
    status, why = verdict.judge(_cell(refs[0], error=("NotImplementedError", "my own words")), refs, {})
    assert not why.startswith("not answered")


def test_a_value_from_a_run_gone_another_way_after_an_error_is_not_told_as_the_answer():
    """hypothesis tries other inputs after an error: the first value that differs then comes from
    one of them (its check's name says so), and the error, not that value, is the reason."""
    refs = [_record("begin", None), _record("phase", "hidden"), _record("value", 3, name="f(1)"),
            _record("value", 8, name="f(1782)"), _record("value", 2, name="f(5)"), _record("end", None)]
    got = [*refs[:3], _record("value", 1, name="f(1, shrunk)")]
    status, why = verdict.judge(_cell(*got, error=("TypeError", "too many")), refs, {})
    assert why.startswith("TypeError was raised") and "while checking f(1782)" in why and "is 1" not in why
    wrong = [*refs[:3], _record("value", 9, name="f(1782)")]  # the same check, a wrong value: told as such
    assert "is 9" in verdict.judge(_cell(*wrong, error=("TypeError", "late")), refs, {})[1]


@pytest.mark.parametrize(("source", "says"), [
    ("# [answer: ex1] keep this line\ndef f(x):\n    return (x\n", "syntax error at line 3 (SyntaxError)"),
    ("def f(x):\nreturn x\n", "syntax error at line 2 (IndentationError)"),
])
def test_a_syntax_error_in_the_answer_cell_is_told_with_its_line_from_the_graders_own_parse(source, says):
    nb = new_notebook(cells=[
        new_code_cell(source, metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "ex1"}}),
        new_code_cell("", metadata={"nbgrader": {"grade": True, "grade_id": "t", "points": 1, "solution": False}}),
    ])
    assert says in verdict.syntax_error(nb, 1) and "SyntaxError" in verdict.syntax_error(nb, 1) + "SyntaxError"
    nb.cells[0].source = "%time y = 1\ndef f(x):\n    return x\n"  # a magic is no syntax error
    assert verdict.syntax_error(nb, 1) is None


def test_a_tests_own_answer_error_gives_its_own_wording():
    src = "y = f(1)\nif y == 0:\n    raise cu.AnswerError('f(1) gave 0: did you forget to return?')\ncheck_value(y, 2)\n"
    test = instrument.rewrite("test_ex1", src)
    assert "_course_obs.fail(1" in test.code and test.asserts[1].parts == ("f(1) gave 0: did you forget to return?",)
    refs = [_record("begin", None), _record("value", 2, line=5, name="f(1)"), _record("end", None)]
    got = _cell(refs[0], _record("fail", None, line=1), error=("AnswerError", "anything the process says"))
    assert verdict.judge(got, refs, test.asserts) == (verdict.FAILED, "f(1) gave 0: did you forget to return?")


def test_numpy_arrays_are_compared_by_dtype_shape_and_values():
    ref = {**_record("value", np.arange(3.0), name="a")}
    assert verdict.compare(_record("value", np.arange(3.0)), ref, {}) is None
    assert "dtype int64" in verdict.compare(_record("value", np.arange(3)), ref, {})
    assert "1 of 3 values differ" in verdict.compare(_record("value", np.array([0.0, 1.0, 5.0])), ref, {})


def test_an_error_before_the_hidden_part_names_no_hidden_check():
    refs = [_record("begin", None), _record("phase", "hidden"), _record("value", 2, name="hidden f(7)"), _record("end", None)]
    status, why = verdict.judge(_cell(refs[0], error=("TypeError", "x")), refs, {})
    assert status == verdict.FAILED and "hidden f(7)" not in why


def test_values_in_a_tests_message_are_written_in_only_as_plain_data_or_visible_text():
    """Plain data is written in as the test formats it; a string the visible test does not hold
    only when it is a name or a library's error message; anything else is not written in."""
    src = "label = 'f(ones(3))'\nok = f(1)\nassert ok, f'{label} returned {ok!r} and {note}'\n"
    test = instrument.rewrite("test_ex1", src)
    ref = _record("assert", True, line=1)
    for note, shown in [("SECRET source of a hidden test", "…"), ("numpy.bool", "'numpy.bool'"),
                        ("shape '[0, -1]' is invalid for input of size 0; SECRET", "\"shape '[0, -1]' is invalid for input of size 0\""),
                        (checks.AnswerError("x"), "…")]:
        got = _record("assert", False, line=1, values=("f(ones(3))", False, note))
        assert verdict.compare(got, ref, test.asserts) == f"f(ones(3)) returned False and {shown}"


@pytest.mark.parametrize(("src", "values", "says"), [
    ("assert ok, f'minima are {lows} and maxima {highs}'", ([0.0, 0.5], [1.0, 1.0]), "minima are [0.0, 0.5] and maxima [1.0, 1.0]"),
    ("assert ok, f'dtype {a.dtype}, but expected {b.dtype}'", (np.dtype("float64"), np.dtype("float32")), "dtype float64, but expected float32"),
    ("assert ok, f'returned {got!r} of type {kind}'", (np.bool_(True), "numpy.bool"), "returned np.True_ of type 'numpy.bool'"),
    ("assert ok, f'returned {got!r} of type {kind}'", (np.bool_(True), "numpy"), "returned np.True_ of type 'numpy'"),
    ("assert ok, f'returned {got!r} but expected {want!r}'", (torch.device("mps"), torch.device("cuda")),
     "returned device(type='mps') but expected device(type='cuda')"),
    ("assert ok, f'e.g. torch.device({str(got)!r})'", ("mps",), "e.g. torch.device('mps')"),
    ("assert ok, f'loss {loss:.3f}'", (0.123456,), "loss 0.123"),
    ("assert ok, f'shape {x.shape}'", (torch.Size([2, 3]),), "shape torch.Size([2, 3])"),
])
def test_plain_data_is_written_in_as_python_formats_it(src, values, says):
    test = instrument.rewrite("test_ex1", src + "\n")
    why = verdict.compare(_record("assert", False, line=1, values=values), _record("assert", True, line=1), test.asserts)
    assert why == says


def test_a_cached_reference_depends_on_all_the_code_that_records_it(tmp_path):
    """The engines, the preloaded modules and course_utils' datasets change what a solution run
    records: a change to any of them must not reuse an old reference."""
    from pathlib import Path

    import course_utils
    import grader
    from grader.verdict import reference

    files = {p.resolve() for p in reference._CODE}
    for needed in (Path(grader.__file__).parent / "engines" / "fork" / "engine.py", Path(grader.__file__).parent / "prepare" / "integrity.py",
                   Path(course_utils.__file__).parent / "data.py", Path(course_utils.__file__).parent / "checks.py"):
        assert needed.resolve() in files


# -- the reference decoded once, and the verdict for the solution's very data -----------------

def _value_ref(kind, value, line=1, **params):
    return _record(kind, value, line, **params)


def _full_comparison(got, ref, asserts, monkeypatch):
    """What compare says with no shortcut: the learner's value decoded and compared."""
    with monkeypatch.context() as m:
        m.setattr(expectations.Known, "matches", lambda self, data: False)
        return _outcome(verdict.compare, got, copy.deepcopy(ref), asserts)


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # judge turns these into reasons: they must be the same too
        return f"raised {type(exc).__name__}: {exc}"


NAN = float("nan")
ANSWERS = [
    NAN, float("inf"), 0.0, -0.0, 1.0, 1, True, None, "nan", (1.0, NAN), [1, 2], {"a": NAN},
    torch.tensor([1.0, NAN, -0.0]), torch.tensor([0.0, 0.0, 0.0]), torch.tensor([1.0, 2.0]),
    torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1.0, 2.0], dtype=torch.float64),
    torch.tensor([complex(NAN, 1.0)]), torch.empty(2, device="meta"), np.array([1.0, NAN]), np.float64(NAN),
    ValueError("too big"), observe.NO_EXCEPTION,
]


@pytest.mark.parametrize("kind", ["tensor", "value", "shape", "raises"])
def test_the_shortcut_never_changes_a_verdict(kind, monkeypatch):
    """For every answer against every reference, compare says what the full comparison says,
    whether the answer is the solution's very data (the shortcut) or not."""
    params = {"tensor": {"name": "f(x)"}, "value": {"name": "g(x)"}, "shape": {"name": "h", "shape": (2,)},
              "raises": {"types": ["builtins.ValueError"], "match": "big"}}[kind]
    for expected in ANSWERS:
        ref = _value_ref(kind, expected, **params)
        for answer in ANSWERS:
            got = _value_ref(kind, answer)
            assert _outcome(verdict.compare, got, ref, {}) == _full_comparison(got, ref, {}, monkeypatch)
        same = _value_ref(kind, expected)
        assert expectations.Known(ref["actual"], None).matches(same["actual"])


def test_the_solutions_very_data_can_still_fail():
    """A NaN where a plain number is expected never equals itself (check_value), even when the
    learner sent the solution's very bytes; in a tensor, NaN equals NaN (check_tensor)."""
    ref = _value_ref("value", NAN, name="mean(x)")
    for _ in range(2):  # the second time the verdict worked out for that data is used
        assert verdict.compare(_value_ref("value", NAN), ref, {}) == "mean(x) is nan but expected nan (rel_tol=1e-06)."
    ref = _value_ref("tensor", torch.tensor([1.0, NAN]), name="m")
    for _ in range(2):
        assert verdict.compare(_value_ref("tensor", torch.tensor([1.0, NAN])), ref, {}) is None


def test_the_same_data_means_the_same_kinds_of_numbers():
    """``==`` says True == 1 == 1.0 and -0.0 == 0.0: the shortcut does not."""
    data = {"t": "tensor", "dtype": "float32", "shape": [2, 3], "device": "cpu", "data": "AAAA", "x": [1.0, True, None]}
    known = expectations.Known(data, None)
    assert known.matches(copy.deepcopy(data))
    for path, other in [(("shape", 0), 2.0), (("shape", 1), True), (("x", 0), 1), (("x", 1), 1)]:
        changed = copy.deepcopy(data)
        changed[path[0]][path[1]] = other
        assert not known.matches(changed), (path, other)
    assert not expectations.Known({"t": "float", "v": 0.0}, None).matches({"t": "float", "v": -0.0})
    assert not expectations.Known({"t": "float", "v": float("nan")}, None).matches({"t": "float", "v": float("nan")})
    assert not known.matches({**data, "extra": 1}) and not known.matches([data])


def test_an_answer_equal_to_the_solutions_but_for_its_kinds_is_refused_as_before():
    """A hostile process may send the reference's data with a boolean as 1, a shape as floats:
    that fails as malformed, as it always did."""
    refs = [_record("begin", None), _value_ref("value", True, line=2, name="ok"), _record("end", None, line=3)]
    hostile = copy.deepcopy(refs)
    hostile[1]["actual"]["v"] = 1
    assert verdict.judge(_cell(*hostile), refs, {}) == (verdict.FAILED, "the test sent a malformed observation (bad bool)")
    refs[1] = _value_ref("tensor", torch.zeros(2, 3), line=2, name="z")
    hostile = copy.deepcopy(refs)
    hostile[1]["actual"]["shape"] = [2.0, 3.0]
    assert verdict.judge(_cell(*hostile), refs, {}) == (verdict.FAILED, "the test sent a malformed observation (bad shape)")
    refs[1] = _value_ref("value", 1.5, line=2, name="r")
    hostile = copy.deepcopy(refs)
    hostile[1]["actual"]["v"] = True
    assert verdict.judge(_cell(*hostile), refs, {}) == (verdict.FAILED, "the test sent a malformed observation (bad float)")


def test_the_solutions_bytes_under_another_dtype_shape_or_device_are_wrong():
    ref = _value_ref("tensor", torch.tensor([1.0, 2.0]), name="y")
    data = ref["actual"]
    for change, why in [({"dtype": "int32"}, "y has dtype torch.int32 but expected torch.float32"),
                        ({"shape": [2, 1]}, "y has shape (2, 1) but expected (2,)"),
                        ({"device": "meta"}, "y is on device 'meta' but expected 'cpu'")]:
        assert verdict.compare({**ref, "actual": {**data, **change}}, ref, {}).startswith(why)
    assert verdict.compare({**ref, "actual": {**data}}, ref, {}) is None


def test_minus_zero_passes_where_the_comparison_lets_it():
    assert verdict.compare(_value_ref("tensor", torch.tensor([-0.0])), _value_ref("tensor", torch.tensor([0.0])), {}) is None
    assert verdict.compare(_value_ref("value", -0.0), _value_ref("value", 0.0, name="v"), {}) is None


def test_the_reason_names_the_references_check_never_the_learners():
    ref = _value_ref("value", NAN, name="mean(x)")
    got = {**_value_ref("value", NAN), "params": {"name": observe.encode("SECRET")}}
    for _ in range(2):
        why = verdict.compare(got, ref, {})
        assert "mean(x)" in why and "SECRET" not in why


def test_a_reference_is_never_taken_for_another(monkeypatch):
    """References come and go (batches, tests): what was worked out for one is never used for
    another, even one made at the address of one gone, or after the memo starts again."""
    for cap in (expectations.MAX_REMEMBERED, 3):
        monkeypatch.setattr(expectations, "MAX_REMEMBERED", cap)
        addresses = set()
        for i in range(60):
            ref = {}  # the first dict made: it takes the place of the last one let go
            ref.update(_value_ref("value", NAN, name=f"check {i}"))
            addresses.add(id(ref))
            assert f"check {i} " in verdict.compare(_value_ref("value", NAN), ref, {})
            del ref
    assert len(addresses) < 60  # with the memo starting again, addresses were used again


def test_the_size_cap_is_exact_for_observations_equal_to_the_references(monkeypatch):
    """Observations equal (``==``) to the reference's are sized from it, but near the cap their
    own size decides, numbers spelled another way (1.0 for 1) included."""
    refs = [_record("begin", None), _value_ref("tensor", torch.ones(3), line=2, name="o"), _record("end", None, line=3)]
    exact = sum(len(str(r)) for r in refs)
    monkeypatch.setattr(verdict, "MAX_CELL_BYTES", exact)
    assert verdict.judge(_cell(*copy.deepcopy(refs)), refs, {}) == (verdict.PASSED, "")
    monkeypatch.setattr(verdict, "MAX_CELL_BYTES", exact - 1)
    assert verdict.judge(_cell(*copy.deepcopy(refs)), refs, {})[1] == "the test sent more observations than the grader accepts"
    spelled = copy.deepcopy(refs)
    spelled[1]["line"] = 2.0  # == 2, two characters longer
    monkeypatch.setattr(verdict, "MAX_CELL_BYTES", exact + 1)
    assert verdict.judge(_cell(*spelled), refs, {})[1] == "the test sent more observations than the grader accepts"
    monkeypatch.setattr(verdict, "MAX_CELL_BYTES", exact + 2)
    assert verdict.judge(_cell(*spelled), refs, {}) == (verdict.PASSED, "")


def test_a_device_name_seen_before_does_not_let_another_through():
    tensor = observe.encode(torch.ones(1))
    observations.decode(tensor)
    for device in ("CPU", "cpu ", "cpu:1000", 7):
        with pytest.raises(observations.Malformed):
            observations.decode({**tensor, "device": device})


# -- the verdict's edges: yes/no, learner text, hidden values --------------------------------------

def test_a_test_that_observes_no_value_is_never_passed_on_its_yes_no_alone():
    refs = [_record("begin", None), _record("assert", True, line=1), _record("end", None)]
    status, why = verdict.judge(_cell(*refs), refs, {})
    assert status == verdict.FAILED and "checks no value" in why


def test_a_forged_yes_is_judged_as_if_it_held_only_when_asked():
    refs = [_record("begin", None), _record("assert", True, line=1), _record("value", 2, name="n"), _record("end", None)]
    lied = [refs[0], _record("assert", False, line=1), refs[2], refs[3]]
    assert verdict.judge(_cell(*lied), refs, {})[0] == verdict.FAILED
    assert verdict.judge(_cell(*lied), refs, {}, forge_yes_no=True) == (verdict.PASSED, "")
    wrong = [refs[0], refs[1], _record("value", 3, name="n"), refs[3]]
    assert verdict.judge(_cell(*wrong), refs, {}, forge_yes_no=True)[0] == verdict.FAILED


@pytest.mark.parametrize("ename", ["CellTimeoutError", "X" * 80, "Timeout_the_hidden_test_says_42", "AnswerErrorX"])
def test_an_exception_class_the_notebook_named_is_not_named_in_the_reason(ename):
    refs = [_record("begin", None), _record("value", 2, name="n"), _record("end", None)]
    status, why = verdict.judge(_cell(refs[0], error=(ename, "the hidden test reads: secret")), refs, {})
    assert status == verdict.FAILED and ename not in why and "secret" not in why
    assert "class defined in the notebook" in why


def test_an_out_of_memory_message_from_the_learner_is_not_a_memory_status():
    refs = [_record("begin", None), _record("value", 2, name="n"), _record("end", None)]
    assert verdict.judge(_cell(refs[0], error=("ValueError", "out of memory")), refs, {})[0] == verdict.FAILED
    real = "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory"
    assert verdict.judge(_cell(refs[0], error=("RuntimeError", real)), refs, {})[0] == verdict.MEMORY


def test_a_raised_class_the_notebook_defined_is_not_named():
    ref = _record("raises", None, types=["builtins.ValueError"])
    ref["actual"] = {"t": "no exception"}
    got = dict(ref, actual={"t": "exception", "type": "__main__.Leaked_hidden_input_is_7", "mro": ["__main__.Leaked_hidden_input_is_7"],
                            "message": "m"})
    why = verdict.compare(got, ref, {})
    assert "Leaked" not in why and "class defined in the notebook" in why


def test_long_numbers_in_a_tests_message_are_capped():
    test = instrument.rewrite("test_ex1", "n = f()\nassert n == 3, f'f() gave {n}'\n")
    got = _record("assert", False, line=1, values=(10**300,))
    why = verdict.compare(got, _record("assert", True, line=1), test.asserts)
    assert len(why) < 80 and why.endswith("…")


HIDDEN = [
    ("value", 4, 0, "is 0"),
    ("value", 4.5, 1.5, "is 1.5"),
    ("value", (101, 202, 303), (101, 202), "is [101, 202], 2 items, but expected 3"),
    ("value", (7, 8), (7, 9), "f(hidden x)[1] is 9"),
    ("value", [13.25], [1], "f(hidden x)[0] is 1"),
    ("value", (3, 4), [3, 4], "should be a tuple, but it is a list"),
    ("value", 41.0, "text", "should be a float"),
    ("tensor", torch.tensor([1.0, 17.5, 3.0]), torch.tensor([1.0, 2.0, 3.0]), "1 of 3 values differ"),
    ("value", torch.tensor([5, 6]), torch.tensor([5, 9]), "1 of 2 values differ"),
]


@pytest.mark.parametrize(("kind", "expected", "actual", "says"), HIDDEN)
def test_on_a_hidden_input_the_reason_never_shows_the_solutions_value(kind, expected, actual, says):
    ref = _record(kind, expected, name="f(hidden x)")
    got = _record(kind, actual, name="f(hidden x)")
    why = verdict.compare(got, ref, {}, hidden=True)
    assert why is not None and says in why and "f(hidden x)" in why
    shown = {str(v) for v in (expected.tolist() if isinstance(expected, torch.Tensor) else
                               expected if isinstance(expected, tuple | list) else [expected])}
    assert not [v for v in shown if v not in str(actual) and v in why], why
    assert verdict.compare(got, ref, {}) is not None


def test_a_hidden_input_in_a_whole_cell_is_judged_without_its_expected_value():
    refs = [_record("begin", None), _record("value", 3, name="f(1)"), _record("phase", "hidden"),
            _record("value", 1234567, name="f(hidden)"), _record("end", None)]
    got = [*refs[:3], _record("value", 5, name="f(hidden)"), refs[4]]
    status, why = verdict.judge(_cell(*got), refs, {})
    assert status == verdict.FAILED and "1234567" not in why and "is 5" in why
    got = [refs[0], _record("value", 4, name="f(1)"), *refs[2:]]
    assert "expected 3" in verdict.judge(_cell(*got), refs, {})[1]


def test_a_learners_long_value_is_cut_in_a_visible_reason_too():
    ref = _record("value", 22, name="steps_per_epoch(1348, 64)")
    why = verdict.compare(_record("value", 10**300, name="steps_per_epoch(1348, 64)"), ref, {})
    assert why is not None and len(why) < 140 and "expected 22" in why
    why = verdict.compare(_record("value", "x" * 5000), _record("value", "y"), {})
    assert why is not None and len(why) < 160


@pytest.mark.parametrize("kind", ["tensor", "value"])
def test_a_test_cell_judged_again_gets_the_verdict_a_fresh_judgement_gives(kind):
    """A test cell's verdict is remembered by the exact data of its observations: each answer, judged
    after every other one (None after NaN, 1 after 1.0 and True, -0.0 after 0.0) and again, gets
    what judging it afresh gives."""
    for expected in ANSWERS:
        refs = [_record("begin", None), _value_ref(kind, expected, name="f(x)"), _record("end", None)]
        for _ in range(2):
            for answer in ANSWERS:
                cell = _cell(refs[0], _value_ref(kind, answer), refs[2])
                fresh = verdict._judge(observations.observations(cell), observations.first_error(cell), refs, {},
                                       forge_yes_no=False)
                assert verdict.judge(cell, refs, {}) == fresh


def test_a_remembered_verdict_is_keyed_by_data_written_exactly_or_not_remembered():
    """Values that ``==`` or a lax JSON writer confuse get keys of their own, or none (judged every time)."""
    from grader.verdict.verdicts import Verdicts

    keys = [Verdicts.key([{"v": value}], None) for value in (1, 1.0, True, 0.0, -0.0, None, "null", [1], (2,))]
    assert None not in keys and len(set(keys)) == len(keys)
    for unwritable in (float("nan"), float("inf"), 2**70, {1: "a"}):
        assert Verdicts.key([{"v": unwritable}], None) is None
    error = {"ename": "ValueError", "evalue": "x"}
    assert Verdicts.key([], error) == Verdicts.key([], {**error, "traceback": ["anything"]}) != Verdicts.key([], None)
