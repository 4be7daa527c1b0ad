"""One submission never stops the batch or the pages: whatever a learner's notebook makes the
grader meet (an undecodable observation, an output of the wrong type, a name that is a formula)
costs that submission a status, and everyone else is graded and gets a page."""

from __future__ import annotations

import base64
import csv
import json
import logging

import nbformat
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course_utils.observe import MIME, encode
from grader import project, samples
from grader.escaping import FORMULA_START
from grader.intake.submissions import Submission
from grader.intake.workspace import Workspace
from grader.pages import feedback
from grader.pages import markup as pages
from grader.record import export
from grader.verdict import outcome as record
from grader.verdict.observations import Malformed, decode

CH = "01_tensors"

# ---------------------------------------------------------------- decoding: Malformed or a value

KINDS = ["tensor", "none", "bool", "int", "float", "complex", "str", "list", "tuple", "dict", "dtype", "size",
         "device", "ndarray", "npscalar", "exception", "no exception", "object", "too large", "other"]
FIELDS = ["t", "v", "items", "dtype", "shape", "device", "data", "re", "im", "mro", "type", "message", "repr", "why"]
DTYPES = ["float32", "bool", "int64", "complex32", "qint8", "bits8", "int4", "uint3", "float4_e2m1fn_x2", "float",
          "|V12", "<i4", "(2,)<i4", "i4,f8", "|O", "U0", "<U3", "|S0", "<M8[ns]", "|b1", "nn.Module", "__class__",
          "[('a','<i4'),('b','<f8')]", ""]
DEVICES = ["cpu", "meta", "cuda", "cuda:7", "mps", "xla", "lazy", "fpga", "cpu:\u0661", "CPU", "cuda:-1", "c" * 20]
NUMBERS = st.one_of(st.integers(), st.integers(min_value=-2**80, max_value=2**80), st.sampled_from([2**62, 2**40 - 1, -1]),
                    st.floats(allow_nan=True, allow_infinity=True))
LONG = st.sampled_from([30, 1000, 5000]).flatmap(lambda n: st.sampled_from(["9" * n, "x" * n]))
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=30), st.sampled_from(DTYPES + DEVICES + KINDS),
                   st.sampled_from(["nan", "-inf", "\u00b2", "AAAA", "AA=", "!!", "-0"]), LONG)
JSON = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=5)), inner, max_size=5)),
    max_leaves=30)


def _b64(n: int) -> str:
    return base64.b64encode(bytes(range(256)) * (n // 256) + bytes(range(n % 256))).decode()


SCHEMAISH = st.recursive(
    st.fixed_dictionaries({"t": st.sampled_from(KINDS)}, optional={
        "v": LEAVES, "dtype": st.sampled_from(DTYPES), "device": st.sampled_from(DEVICES),
        "shape": st.one_of(st.lists(NUMBERS, max_size=18), JSON),
        "data": st.one_of(st.integers(0, 64).map(_b64), st.sampled_from(["", "!!", "AAA", "AA==\n"]), JSON),
        "re": LEAVES, "im": LEAVES, "mro": JSON, "type": JSON, "message": LEAVES, "repr": JSON, "why": JSON,
        "items": st.lists(st.one_of(st.sampled_from(["1", "\u00b2", "-1"]), LONG, JSON), max_size=4),
    }),
    lambda inner: st.one_of(
        st.fixed_dictionaries({"t": st.sampled_from(["list", "tuple"]), "items": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries({"t": st.just("dict"), "items": st.lists(st.lists(inner, min_size=2, max_size=2),
                                                                        max_size=3)})),
    max_leaves=12)


def decodes_or_is_malformed(payload: object) -> None:
    try:
        decode(payload)
    except Malformed:
        pass


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(JSON, SCHEMAISH))
def test_decoding_any_payload_gives_a_value_or_malformed(payload):
    decodes_or_is_malformed(payload)


def nested(depth: int) -> dict:
    obs: dict = {"t": "none"}
    for _ in range(depth):
        obs = {"t": "list", "items": [obs]}
    return obs


SCALAR = {"t": "tensor", "dtype": "int64", "shape": [], "device": "cpu", "data": _b64(8)}
HOSTILE = {
    "structured npscalar": encode(np.zeros(1, dtype=[("a", "<i4"), ("b", "<f8")])[0]),
    "structured ndarray": encode(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")])),
    "sub-array dtype": {"t": "ndarray", "dtype": "(2,)<i4", "shape": [1], "data": _b64(8)},
    "meta tensor overflowing": {"t": "tensor", "dtype": "float32", "shape": [2**62, 2**62], "device": "meta"},
    "meta tensor at the dimension cap": {"t": "tensor", "dtype": "float32", "shape": [2**40 - 1] * 3, "device": "meta"},
    "negative shape": {"t": "tensor", "dtype": "float32", "shape": [-1], "device": "cpu", "data": ""},
    "quantized dtype": {"t": "tensor", "dtype": "qint8", "shape": [1], "device": "cpu", "data": _b64(1)},
    "sub-byte dtype": {"t": "tensor", "dtype": "uint3", "shape": [1], "device": "cpu", "data": _b64(1)},
    "bits dtype": {"t": "tensor", "dtype": "bits8", "shape": [2], "device": "cpu", "data": _b64(2)},
    "boolean bytes other than 0 and 1": {"t": "tensor", "dtype": "bool", "shape": [2], "device": "cpu", "data": _b64(4)[:4]},
    "zero itemsize array": {"t": "ndarray", "dtype": "<U0", "shape": [3], "data": ""},
    "bad base64": {"t": "tensor", "dtype": "float32", "shape": [1], "device": "cpu", "data": "!!!!"},
    "data length mismatch": {"t": "tensor", "dtype": "float32", "shape": [2], "device": "cpu", "data": _b64(4)},
    "unicode digit in a size": {"t": "size", "items": ["\u00b2"]},
    "a size past 64 bits": {"t": "size", "items": ["9" * 30]},
    "unicode digit in a device": {"t": "device", "v": "cuda:\u0661"},
    "a dtype looked up as an attribute": {"t": "dtype", "v": "__class__"},
    "an object's type as a list": {"t": "object", "type": [[[]]], "repr": {}},
    "an exception's type as a dict": {"t": "exception", "type": {}, "mro": [], "message": ""},
    "an unhashable key": {"t": "dict", "items": [[{"t": "list", "items": []}, {"t": "none"}]]},
    "a tensor as a key, twice": {"t": "dict", "items": [[SCALAR, {"t": "none"}], [SCALAR, {"t": "none"}]]},
    "deep nesting": nested(50),
    "very deep nesting": nested(5000),
    "not a dict": [1, 2, 3],
}


@pytest.mark.parametrize("payload", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_payload_gives_a_value_or_malformed(payload):
    decodes_or_is_malformed(payload)


@pytest.mark.parametrize("name", ["structured npscalar", "structured ndarray", "meta tensor overflowing",
                                  "quantized dtype", "bad base64", "data length mismatch", "unicode digit in a size"])
def test_the_payloads_seen_stopping_a_batch_are_malformed(name):
    with pytest.raises(Malformed):
        decode(HOSTILE[name])


def test_a_meta_tensor_within_the_caps_still_decodes():
    t = decode({"t": "tensor", "dtype": "float32", "shape": [2**30, 2**20], "device": "meta"})
    assert t.shape == (2**30, 2**20) and t.is_meta


# ---------------------------------------------------------------- scoring: a status, never the batch


class LearnersOwn(Exception):
    """Stands for a class whose name the grader must not repeat."""


@pytest.mark.parametrize("exc, named", [(ValueError("learner text"), "ValueError"),
                                        (LearnersOwn("learner text"), "an unexpected error")])
def test_a_submission_that_trips_the_scoring_gets_an_error_status(tmp_path, monkeypatch, caplog, exc, named):
    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(record, "score", broken)
    sub = Submission("alice", CH, tmp_path / "a.ipynb")
    nb = samples.make_submission(CH, {})
    with caplog.at_level(logging.ERROR, logger="grader.verdict.outcome"):
        report = record.scored(Workspace(tmp_path), sub, (nb, {}), project.source_notebook(CH), ({}, {}, []))
    assert report.status == "error" and report.score == 0
    assert f"({named}" in report.message and "learner text" not in report.message
    assert "\n" not in report.message and report.tests and all(t["status"] == "not run" for t in report.tests)
    assert any(r.exc_info for r in caplog.records), "the traceback is logged"


# ---------------------------------------------------------------- pages: outputs validated in one place


def test_outputs_of_the_wrong_type_are_coerced_or_dropped():
    cell = {"cell_type": "code", "source": ["a", 1], "metadata": [], "execution_count": "1", "outputs": [
        {"output_type": "display_data", "data": {"text/plain": ["a", "b"]}, "metadata": {}},
        {"output_type": "display_data", "data": {"text/plain": {"x": 1}, "image/png": ["AA", 2]}},
        {"output_type": "execute_result", "data": {"text/plain": [1, 2], MIME: {"t": "none"}}},
        {"output_type": "stream", "name": "verdict", "text": ["ok ", "go"]},
        {"output_type": "stream", "name": "stdout", "text": 5},
        {"output_type": "error", "ename": ["x"], "evalue": 3, "traceback": {"a": 1}},
        {"output_type": "update_display_data"}, "text", None,
    ]}
    (clean,) = pages.valid_cells({"cells": [cell, {"cell_type": 3}, "x"]})
    assert clean["source"] == "" and clean["metadata"] == {} and clean["execution_count"] is None
    assert clean["outputs"] == [
        {"output_type": "display_data", "data": {"text/plain": "ab"}, "metadata": {}},
        {"output_type": "display_data", "data": {}, "metadata": {}},
        {"output_type": "execute_result", "data": {MIME: {"t": "none"}}, "metadata": {}},
        {"output_type": "stream", "name": "stdout", "text": "ok go"},
        {"output_type": "error", "ename": "", "evalue": "", "traceback": []},
    ]
    assert pages.page("t", "", clean and [clean], "x.css")


def test_a_page_that_cannot_be_built_is_reported_and_the_others_are_written(tmp_path, monkeypatch, caplog):
    work = tmp_path / "work"
    for student in ("alice", "bob", "carol"):
        path = work / "results" / student / f"{CH}.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"student": student, "chapter": CH, "status": "graded", "score": 0, "max_score": 0,
                                    "message": "", "tests": []}))
    built = pages.page

    def page(title, *args):
        if "bob" in title:
            raise TypeError("learner text")
        return built(title, *args)

    monkeypatch.setattr(pages, "page", page)
    with caplog.at_level(logging.WARNING, logger="grader.pages.feedback"):
        written = feedback.main(work, jobs=1)
    assert sorted(p.parts[-3] for p in written) == ["alice", "carol"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and f"bob/{CH}" in warned[0] and "learner text" not in warned[0]


# ---------------------------------------------------------------- a class on both engines

ENGINES = ("fork", "kernel")
ALL = dict.fromkeys(samples.answer_ids(CH), samples.SOLUTION)
SOLVED = {gid: samples.solution_code(c) for c in nbformat.read(str(project.source_notebook(CH)), as_version=4).cells
          if (gid := c.get("metadata", {}).get("nbgrader", {}).get("grade_id")) in ALL}
FIRST = "ex1_checkerboard"
STRUCTURED = ("import numpy as np\n"
              "def checkerboard(n, m, device='cpu'):\n"
              "    return np.zeros(1, dtype=[('a', '<i4'), ('b', '<f8')])[0]\n")
#: every tensor the checks observe is sent as a payload nothing decodes (at the check's own site)
FORGED = ("import course_utils.observe as _observe\n"
          "_encode = _observe.encode\n"
          "def _forged(value, depth=0):\n"
          "    if type(value).__name__ == 'Tensor':\n"
          "        return {'t': 'tensor', 'dtype': 'float32', 'shape': [2**62, 2**62], 'device': 'meta'}\n"
          "    return _encode(value, depth)\n"
          "_observe.encode = _forged\n")
WRONG_OUTPUTS = ("from IPython.display import publish_display_data\n"
                 "publish_display_data({'text/plain': [1, 2]})\n"
                 "publish_display_data({'text/plain': {'a': 1}, 'image/png': ['AA', 3]})\n")
#: folder name -> answers (a folder name cannot hold "/", so the link has none)
CLASS = {
    "honest": ALL,
    "structured": {**ALL, FIRST: STRUCTURED},
    "forged": {**ALL, FIRST: FORGED + SOLVED[FIRST]},
    "wrong_outputs": {**ALL, FIRST: WRONG_OUTPUTS + SOLVED[FIRST]},
    '=HYPERLINK("http:evil.example","y")': ALL,
    "@SUM(1+1)": ALL,
}


@pytest.fixture(scope="module")
def batches(tmp_path_factory, grade_batch):
    """The class graded once per engine, then its pages and exports: engine -> (reports by folder, workspace)."""
    subs = tmp_path_factory.mktemp("edges")
    name = project.source_notebook(CH).name
    for folder, answers in CLASS.items():
        path = subs / folder / CH / name
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(samples.make_submission(CH, answers)))
    out = {}
    for engine in ENGINES:
        work = tmp_path_factory.mktemp(f"edges-{engine}")
        reports = grade_batch(subs, work, jobs=4, engine=engine, cell_timeout=20)
        db = Workspace(work).default_db_url()
        out[engine] = ({r.name or r.student: r for r in reports}, work, feedback.main(work), [
            export.write_grades_csv(db, work / "course-grades.csv", workdir=work),
            export.write_results_csv(work, db, work / "results.csv")])
    return out


@pytest.fixture(params=ENGINES)
def graded(request, batches):
    return batches[request.param]


@pytest.mark.slow
def test_every_student_has_a_result_and_the_honest_ones_full_marks(graded):
    reports, *_ = graded
    assert sorted(reports) == sorted(CLASS)
    for folder, answers in CLASS.items():
        report = reports[folder]
        assert report.status in ("graded", "error") and len(report.tests) == len(ALL), (folder, report)
        if answers is ALL:
            assert report.status == "graded" and report.score == report.max_score == 100, (folder, report)


@pytest.mark.slow
def test_an_undecodable_observation_fails_its_test_and_nothing_else(graded):
    reports, *_ = graded
    for folder in ("structured", "forged"):
        tests = {t["grade_id"]: t for t in reports[folder].tests}
        assert tests[f"test_{FIRST}"]["status"] == "failed", (folder, tests[f"test_{FIRST}"])
        assert "malformed observation" in tests[f"test_{FIRST}"]["reason"], (folder, tests[f"test_{FIRST}"])
    failed = [t for t in reports["structured"].tests if t["status"] != "passed"]
    assert [t["grade_id"] for t in failed] == [f"test_{FIRST}"]
    assert reports["structured"].score == 100 - failed[0]["max_points"]


@pytest.mark.slow
def test_every_feedback_page_is_written(graded):
    reports, work, written, _ = graded
    assert len(written) == len(CLASS) and all(p.exists() for p in written)
    sent = json.loads(next((work / "autograded" / reports["wrong_outputs"].student).rglob("*.ipynb")).read_text())
    plain = [o["data"]["text/plain"] for c in sent["cells"] for o in c.get("outputs", []) if "text/plain" in o.get("data", {})]
    if work.name.startswith("edges-fork"):  # the engine that keeps an answer cell's outputs as they came
        assert [1, 2] in plain and {"a": 1} in plain, "the outputs of the wrong type reached the pages"
    page = next(p for p in written if p.parts[-3] == reports["wrong_outputs"].student).read_text(encoding="utf-8")
    assert "<pre class=\"out\">12</pre>" not in page  # a list of numbers is no text/plain: dropped


@pytest.mark.slow
def test_no_csv_cell_begins_with_a_formula_character(graded):
    *_, files = graded
    for path in files:
        rows = list(csv.reader(path.open(encoding="utf-8")))
        assert len(rows) > len(CLASS)
        bad = [c for row in rows for c in row if c.startswith(FORMULA_START) and not c.lstrip("-").replace(".", "").isdigit()]
        assert not bad, (path.name, bad)
    names = {row["student_name"] for row in csv.DictReader(files[0].open(encoding="utf-8"))}
    assert {"'@SUM(1+1)", '\'=HYPERLINK("http:evil.example","y")'} <= names
