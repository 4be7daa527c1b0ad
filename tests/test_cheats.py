"""A class of cheats on chapter 01: each solves nothing and tries to score anyway. Every one
scores 0, on both engines, and no feedback page shows a hidden test.

Each fixture answers every exercise of chapter 01 wrongly (the JUNK answers below, or an
answer that tries to read the expected value out of the test) and adds its trick to the
first answer cell. The families: hiding a test's error, changing a test's code before it
runs, neutralising or forging the checks, changing torch under the checks, and reading the
answer out of the test. Points may come only from values equal to the solution's on the
hidden inputs (grader.verdict.judge), so none of them can earn any.
"""

from __future__ import annotations

import html
import json
import re

import nbformat
import pytest

from grader import cells, project, samples
from grader.pages import feedback

pytestmark = pytest.mark.slow

CH = "01_tensors"

JUNK = {
    "ex1_checkerboard": "def checkerboard(n, m, device='cpu'):\n    return torch.zeros(n, m, device=device)\n",
    "ex2_element_offset": "def element_offset(t, index):\n    return 0\n",
    "ex3_ensemble_predict": "def ensemble_predict(preds):\n    return torch.zeros(len(preds[0]), dtype=torch.int64)\n",
    "ex4_sample_rows": "def sample_rows(X, k, seed):\n    return X[:k]\n",
    "ex5_minmax_rows": "def minmax_rows(X):\n    return X\n",
    "ex6_attention_scores": "def attention_scores(Q, K):\n    return Q @ K.mT\n",
    "ex7_where_is_max": "def where_is_max(A, B):\n    return (0, 0, 0)\n",
}

#: answers that return whatever the calling test holds as its expected value
FROM_FRAME = {
    gid: re.sub(r"\n    return .*\n$", "\n    return _steal()\n", code) for gid, code in JUNK.items()
}

STEAL_LOCALS = """
import sys
def _steal():
    f = sys._getframe(2)
    for name in ("expected", "reference", "recipe", "expected2", "want"):
        if name in f.f_locals:
            return f.f_locals[name]
        if name in f.f_globals:
            return f.f_globals[name]
    return None
"""

STEAL_SOURCE = """
import ast, linecache, sys
def _steal():
    f = sys._getframe(2)
    lines = linecache.getlines(f.f_code.co_filename)
    tree = ast.parse("".join(lines))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node, "lineno", 0) == f.f_lineno and len(node.args) >= 2:
            try:
                return eval(compile(ast.Expression(node.args[1]), "x", "eval"), f.f_globals, f.f_locals)
            except Exception:
                pass
    return None
"""

STEAL_GC = """
import gc, sys, torch
def _steal():
    seen = [o for o in gc.get_objects() if type(o) is torch.Tensor]
    return seen[-1] if seen else None
"""

#: name -> (trick added to the first answer cell, answers used)
CHEATS: dict[str, tuple[str, dict[str, str]]] = {
    # hiding a test's error
    "nbgrader_cheat_attempt": (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "def _no_tb(self, *args, **kwargs):\n    return None\n"
        "InteractiveShell.showtraceback = _no_tb\n", JUNK),
    "showtraceback_none": (
        "from IPython.core.interactiveshell import InteractiveShell\nInteractiveShell.showtraceback = None\n", JUNK),
    "instance_showtraceback": ("get_ipython()._showtraceback = lambda *a, **k: None\n", JUNK),
    "bdbquit": ("import bdb\ndef _quit(*a, **k):\n    raise bdb.BdbQuit\n", {
        gid: re.sub(r"\n    return .*\n$", "\n    _quit()\n", code) for gid, code in JUNK.items()}),
    "custom_exc": ("get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n", JUNK),
    "post_run_clears_outputs": (
        "from IPython.display import clear_output\n"
        "get_ipython().events.register('post_run_cell', lambda *a: clear_output())\n", JUNK),
    "drop_error_messages": (
        "try:\n    _k = get_ipython().kernel\n    _send = _k.session.send\n"
        "    def _filtered(stream, msg, *a, **k):\n"
        "        if msg == 'error' or (isinstance(msg, dict) and msg.get('msg_type') == 'error'):\n"
        "            return None\n        return _send(stream, msg, *a, **k)\n"
        "    _k.session.send = _filtered\nexcept Exception:\n    pass\n"
        "try:\n    _cap = get_ipython().capture\n    _add = _cap.add\n"
        "    _cap.add = lambda out: None if out.get('output_type') == 'error' else _add(out)\n"
        "except Exception:\n    pass\n", JUNK),
    "thread_injects_exit": (
        "import ctypes, threading, time\n_main = threading.main_thread().ident\n"
        "def _poke():\n    while True:\n        time.sleep(0.05)\n"
        "        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(_main), ctypes.py_object(SystemExit))\n"
        "threading.Thread(target=_poke, daemon=True).start()\n", JUNK),
    # changing a test's code before it runs
    "input_transformer_empties_tests": (
        "def _blank(lines):\n    text = ''.join(lines)\n    return [] if '[tests:' in text or '_course_obs' in text else lines\n"
        "get_ipython().input_transformers_post.append(_blank)\n", JUNK),
    "ast_transformer_drops_checks": (
        "import ast\nclass _Drop(ast.NodeTransformer):\n"
        "    def visit_Expr(self, node):\n"
        "        text = ast.unparse(node)\n"
        "        return None if 'check' in text or 'assert_' in text else node\n"
        "get_ipython().ast_transformers.append(_Drop())\n", JUNK),
    "ast_transformer_keeps_only_marks": (
        "import ast\nclass _Marks(ast.NodeTransformer):\n"
        "    def visit_Module(self, node):\n"
        "        node.body = [s for s in node.body if 'begin' in ast.unparse(s) or 'end()' in ast.unparse(s) or 'import' in ast.unparse(s)]\n"
        "        return node\n"
        "get_ipython().ast_transformers.append(_Marks())\n", JUNK),
    "pre_run_patches_checks": (
        "import course_utils.checks as _c, course_utils as _cu\n"
        "def _patch(*a):\n    for m in (_c, _cu):\n        for n in ('check_tensor', 'check_value', 'check_shape'):\n"
        "            setattr(m, n, lambda *a, **k: None)\n"
        "get_ipython().events.register('pre_run_cell', _patch)\n", JUNK),
    "audit_hook_on_exec": (
        "import sys\nimport course_utils.observe as _o\n"
        "def _hook(event, args):\n    if event == 'exec':\n        _o.emit = lambda *a, **k: None\n"
        "sys.addaudithook(_hook)\n", JUNK),
    # neutralising or forging the checks
    "code_swap_checks": (
        "import course_utils.checks as _c\n_noop = (lambda *a, **k: None).__code__\n"
        "for _f in (_c.check_tensor, _c.check_value, _c.check_shape):\n    _f.__code__ = _noop\n", JUNK),
    "code_swap_observe": (
        "import course_utils.observe as _o\n_o.emit.__code__ = (lambda *a, **k: None).__code__\n", JUNK),
    "ctypes_code_swap": (
        "import ctypes, course_utils.checks as _c\n_new = (lambda *a, **k: None).__code__\n"
        "for _f in (_c.check_tensor, _c.check_value, _c.check_shape):\n"
        "    ctypes.py_object(_f).value  # touch\n"
        "    ctypes.pythonapi.PyFunction_SetCode(ctypes.py_object(_f), ctypes.py_object(_new))\n", JUNK),
    "settrace_rewrites_locals": (
        "import sys, ctypes\n"
        "def _tracer(frame, event, arg):\n"
        "    if frame.f_code.co_name in ('check_tensor', 'check_value') and event == 'call':\n"
        "        if 'expected' in frame.f_locals:\n"
        "            frame.f_locals['actual'] = frame.f_locals['expected']\n"
        "            ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))\n"
        "    return _tracer\n"
        "sys.settrace(_tracer)\n", JUNK),
    "fake_observe_module": (
        "import sys, types\n_fake = types.ModuleType('course_utils.observe')\n"
        "for _n in ('begin', 'end', 'phase', 'assert_', 'emit', 'observe', 'active'):\n"
        "    setattr(_fake, _n, lambda *a, **k: False)\n"
        "sys.modules['course_utils.observe'] = _fake\nimport course_utils\ncourse_utils.observe = _fake\n", JUNK),
    "forge_the_guard": (
        "import sys\nfor _n in list(vars(sys)):\n    if _n.startswith('__course_guard'):\n"
        "        setattr(sys, _n, lambda nonce: 'ok:' + nonce + ':')\n"
        "import course_utils as cu\ncu.check_tensor = lambda *a, **k: None\n", JUNK),
    "patch_helpers_plainly": (
        "import course_utils as cu, course_utils.checks as _c\n"
        "cu.check_tensor = cu.check_value = cu.check_shape = lambda *a, **k: None\n"
        "_c.check_tensor = _c.check_value = _c.check_shape = lambda *a, **k: None\n", JUNK),
    "copy_expected_into_observation": (
        "import IPython.display as _d, course_utils.observe as _o\n_pub = _d.publish_display_data\n"
        "def _forge(data, *a, **k):\n    rec = data.get(_o.MIME)\n"
        "    if rec and 'expected' in rec:\n        rec['actual'] = rec['expected']\n"
        "    return _pub(data, *a, **k)\n"
        "_d.publish_display_data = _forge\n", JUNK),
    "forge_every_check_as_passed": (
        "import course_utils.observe as _o\n_emit = _o.emit\n"
        "def _emit2(kind, actual, **k):\n    if kind == 'assert':\n        actual = True\n"
        "    if 'expected' in k and k.get('has_expected'):\n        actual = k['expected']\n"
        "    return _emit2.orig(kind, actual, **k)\n_emit2.orig = _emit\n_o.emit = _emit2\n", JUNK),
    # changing torch under the checks
    "tensor_eq_always_true": (
        "type.__setattr__(torch.Tensor, '__eq__', lambda *a: True)\n"
        "type.__setattr__(torch.Tensor, 'equal', lambda *a: True)\n", JUNK),
    "global_torch_function_mode": (
        "from torch.overrides import TorchFunctionMode\nclass _Zero(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        out = func(*args, **(kwargs or {}))\n"
        "        return out\n"
        "_Zero().__enter__()\n"
        "torch.isclose = lambda *a, **k: torch.ones((), dtype=torch.bool)\n", JUNK),
    "aten_override": (
        "_lib = torch.library.Library('aten', 'IMPL')\n"
        "_lib.impl('isclose', lambda a, b, *r, **k: torch.ones(a.shape, dtype=torch.bool), 'CPU')\n"
        "_lib.impl('eq.Tensor', lambda a, b: torch.ones(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.bool), 'CPU')\n",
        JUNK),
    "patch_tensor_builders": (
        "_zeros, _empty = torch.zeros, torch.empty\n"
        "torch.randn = lambda *a, **k: _zeros(*[x for x in a if isinstance(x, int)] or (1,))\n"
        "torch.randperm = lambda n, **k: torch.arange(n)\n", JUNK),
    "break_the_encoder": (
        "torch.Tensor.contiguous = lambda self, *a, **k: None\n"
        "import numpy as np\nnp.ascontiguousarray = lambda *a, **k: None\n", JUNK),
    # reading the answer out of the test
    "steal_frame_locals": (STEAL_LOCALS, FROM_FRAME),
    "steal_via_linecache_and_ast": (STEAL_SOURCE, FROM_FRAME),
    "steal_via_gc": (STEAL_GC, FROM_FRAME),
    "import_hook_serves_fake_observe": (
        "import sys, types, importlib.abc, importlib.machinery\n"
        "class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'course_utils.observe':\n"
        "            return importlib.machinery.ModuleSpec(name, self)\n"
        "    def create_module(self, spec):\n        return types.ModuleType(spec.name)\n"
        "    def exec_module(self, module):\n"
        "        for n in ('begin', 'end', 'phase', 'assert_', 'emit', 'observe', 'active'):\n"
        "            setattr(module, n, lambda *a, **k: None)\n"
        "sys.meta_path.insert(0, _Finder())\nsys.modules.pop('course_utils.observe', None)\n", JUNK),
    "stash_and_print_hidden_source": (
        "import sys, linecache\n_seen = []\n"
        "def _spy(*a, **k):\n    f = sys._getframe(2)\n"
        "    _seen.append(''.join(linecache.getlines(f.f_code.co_filename)))\n"
        "    return None\n", {**JUNK, "ex7_where_is_max":
            "def where_is_max(A, B):\n    return _spy()\n\nprint('\\n'.join(_seen))\n"}),
}


#: tricks whose statuses depend on timing (their points never do)
RACY = {"thread_injects_exit"}


def submission(trick: str, answers: dict[str, str]) -> dict:
    code = dict(answers)
    first = "ex1_checkerboard"
    code[first] = "import torch\n" + trick + "\n" + code[first]
    return samples.make_submission(CH, code)


ENGINES = ("fork", "kernel")


@pytest.fixture(scope="module")
def batches(tmp_path_factory, grade_batch):
    """The class graded once per engine: engine -> (reports by student, workspace)."""
    subs = tmp_path_factory.mktemp("cheats")
    name = project.source_notebook(CH).name
    for student, (trick, answers) in CHEATS.items():
        path = subs / student / CH / name
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(submission(trick, answers)))
    honest = subs / "honest" / CH / name
    honest.parent.mkdir(parents=True)
    honest.write_text(json.dumps(samples.make_submission(CH, dict.fromkeys(JUNK, samples.SOLUTION))))
    out = {}
    for engine in ENGINES:
        work = tmp_path_factory.mktemp(f"work-{engine}")
        reports = grade_batch(subs, work, jobs=2, engine=engine, cell_timeout=20)
        feedback.main(work)
        out[engine] = ({r.student: r for r in reports}, work)
    return out


@pytest.fixture(params=ENGINES)
def graded(request, batches):
    return batches[request.param]


def test_there_are_at_least_thirty_cheats():
    assert len(CHEATS) >= 30


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_a_cheat_that_solves_nothing_scores_nothing(graded, name):
    reports, _ = graded
    report = reports[name]
    passed = [t["grade_id"] for t in report.tests if t["status"] == "passed"]
    assert report.score == 0 and not passed, f"{name} earned {report.score}: {passed}"
    assert len(report.tests) == 7, "every test of the chapter has a verdict"


def test_an_honest_solution_in_the_same_batch_scores_full(graded):
    reports, _ = graded
    assert reports["honest"].score == reports["honest"].max_score == 100


def test_no_feedback_page_shows_a_hidden_test(graded):
    _, work = graded
    hidden = []
    released = {line.strip() for c in nbformat.read(str(project.NOTEBOOKS / CH / project.source_notebook(CH).name),
                                                     as_version=4).cells for line in cells.source_text(c).splitlines()}
    for c in nbformat.read(str(project.source_notebook(CH)), as_version=4).cells:
        if cells.is_test(c):
            _, part = cells.split_hidden(cells.source_text(c))
            # a line the visible tests share (the pages show them as text) is public
            hidden += [line.strip() for line in part.splitlines() if len(line.strip()) > 25 and line.strip() not in released]
    assert len(hidden) > 10
    pages = list(feedback.feedback_dir(work).rglob("*.html"))
    assert len(pages) == len(CHEATS) + 1
    for page in pages:
        text = html.unescape(page.read_text(encoding="utf-8"))
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{page}: shows hidden test lines {leaked[:2]}"


def test_the_tricks_are_noted_for_review_not_scored(graded):
    reports, _ = graded
    noted = [n for n, r in reports.items() if any(t.get("note") for t in r.tests)]
    assert "patch_helpers_plainly" in noted and "honest" not in noted


def test_both_engines_give_every_cheat_the_same_grade(batches):
    fork, kernel = (batches[e][0] for e in ENGINES)
    assert fork.keys() == kernel.keys()
    differ = {}
    for student in fork:
        # an exception injected from a thread every 50 ms lands wherever the process happens to be:
        # which test it stops, and how, is a matter of timing; its points are not
        racy = student in RACY
        a = [(t["grade_id"], t["points"]) + (() if racy else (t["status"],)) for t in fork[student].tests]
        b = [(t["grade_id"], t["points"]) + (() if racy else (t["status"],)) for t in kernel[student].tests]
        if a != b:
            differ[student] = (a, b)
    assert not differ, differ
