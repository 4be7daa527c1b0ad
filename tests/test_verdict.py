"""Observations (course_utils.observe), the test-cell rewrite (grader.instrument) and the verdict
(grader.verdict): values survive the trip as data, malformed data is refused, and the grader's
comparison says what the learner's own checks would say."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from nbformat.v4 import new_code_cell, new_output

from course_utils import checks, observe
from grader import instrument, observations, verdict

VALUES = [
    None, True, 0, -(10**30), 1.5, float("inf"), "text", (1, [2, 3]), {"a": 1, 2: (3,)},
    torch.float16, torch.Size([2, 3]), torch.device("cpu"),
    torch.arange(6).reshape(2, 3), torch.tensor(2.5), torch.zeros(0, 3), torch.ones(2, dtype=torch.bfloat16),
    torch.tensor([True, False]), torch.tensor([1 + 2j]), torch.arange(12).reshape(3, 4).T,
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


def test_a_learners_error_message_never_reaches_the_reason():
    refs = [_record("begin", None), _record("value", 2, name="n(5)"), _record("end", None)]
    status, why = verdict.judge(_cell(refs[0], error=("ValueError", "SECRET hidden source")), refs, {})
    assert "SECRET" not in why and "ValueError" in why and "n(5)" in why


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
    src = "label = 'f(ones(3))'\nok = f(1)\nassert ok, f'{label} returned {ok!r} and {note}'\n"
    test = instrument.rewrite("test_ex1", src)
    ref = _record("assert", True, line=1)
    got = _record("assert", False, line=1, values=("f(ones(3))", False, "SECRET source of a hidden test"))
    assert verdict.compare(got, ref, test.asserts) == "f(ones(3)) returned False and …"


def test_a_cached_reference_depends_on_all_the_code_that_records_it(tmp_path):
    """The engines, the preloaded modules and course_utils' datasets change what a solution run
    records: a change to any of them must not reuse an old reference."""
    from pathlib import Path

    import course_utils
    import grader
    from grader import reference

    files = {p.resolve() for p in reference._CODE}
    for needed in (Path(grader.__file__).parent / "engines" / "fork.py", Path(grader.__file__).parent / "integrity.py",
                   Path(course_utils.__file__).parent / "data.py", Path(course_utils.__file__).parent / "checks.py"):
        assert needed.resolve() in files
