"""Rules about how an answer is written (grader.verdict.rules): read on the code the graded function
reaches, out of the learner's process; every way around a switched-off function is caught, and
an honest notebook's scratch code never is."""

from __future__ import annotations

import ast
import re

import nbformat
import pytest

from grader import cells, project, samples
from grader.verdict import rules

GOOD_SOFTMAX = ("import torch\n\ndef softmax(X, dim=-1):\n    e = torch.exp(X - X.amax(dim, keepdim=True))\n"
                "    return e / e.sum(dim, keepdim=True)\n")


def _rule(chapter: str, test: str) -> rules.Rule:
    src = nbformat.read(str(project.source_notebook(chapter)), as_version=4)
    return rules.from_settings(project.grading_settings(project.source_notebook(chapter).parent), src)[test]


def _nb(chapter: str, answers: dict[str, str]):
    return nbformat.from_dict(samples.make_submission(chapter, answers))


AROUND = {
    "bound before the test": "import torch\n_sm = torch.softmax\ndef softmax(X, dim=-1):\n    return _sm(X, dim)",
    "a default argument": "import torch\ndef softmax(X, dim=-1, f=torch.softmax):\n    return f(X, dim)",
    "getattr with a computed name": "import torch\ndef softmax(X, dim=-1):\n    return getattr(torch, 'soft' + 'max')(X, dim)",
    "getattr with the name": "import torch\ndef softmax(X, dim=-1):\n    return getattr(torch, 'softmax')(X, dim)",
    "an import under another name": "from torch.nn.functional import softmax as s\ndef softmax(X, dim=-1):\n    return s(X, dim)",
    "the tensor method": "def softmax(X, dim=-1):\n    return X.softmax(dim)",
    "logsumexp": "import torch\ndef softmax(X, dim=-1):\n    return torch.exp(X - X.logsumexp(dim, keepdim=True))",
    "a rebinding after the def": "def softmax(X, dim=-1):\n    return X\nimport torch\nsoftmax = torch.softmax",
    "eval": "def softmax(X, dim=-1):\n    return eval('X.soft' + 'max(dim)')",
    "importlib": "import importlib\ndef softmax(X, dim=-1):\n    return importlib.import_module('torch').softmax(X, dim)",
    "the nn module": "import torch\ndef softmax(X, dim=-1):\n    return torch.nn.Softmax(dim)(X)",
}


@pytest.mark.parametrize("how", sorted(AROUND))
def test_a_switched_off_function_is_caught_however_it_is_reached(how):
    why = rules.violation(_nb("05_broadcasting", {"ex5_softmax": AROUND[how]}), _rule("05_broadcasting", "test_ex5_softmax"))
    assert why is not None and why.startswith("the answer ")


def test_a_helper_in_another_cell_is_followed():
    nb = _nb("05_broadcasting", {
        "ex4_standardize_columns": "import torch.nn.functional as F\ndef _helper(X, d):\n    return F.softmax(X, d)\n",
        "ex5_softmax": "def softmax(X, dim=-1):\n    return _helper(X, dim)",
    })
    assert "softmax, which this exercise switches off" in rules.violation(nb, _rule("05_broadcasting", "test_ex5_softmax"))


def test_scratch_code_elsewhere_in_the_notebook_never_counts():
    nb = _nb("05_broadcasting", {
        "ex4_standardize_columns": "import torch\nprint(torch.softmax(torch.ones(3), 0))\nref = torch.softmax\n",
        "ex5_softmax": GOOD_SOFTMAX + "print(ref(torch.ones(2), 0), softmax(torch.ones(2), 0))\n",
    })
    assert rules.violation(nb, _rule("05_broadcasting", "test_ex5_softmax")) is None


def test_loops_and_float_arithmetic_are_read_where_the_statement_rules_them_out():
    loops = "def checkerboard(n, m, device='cpu'):\n    return torch.tensor([[float((i + j) % 2 == 0) for j in range(m)] for i in range(n)])"
    assert "loop" in rules.violation(_nb("01_tensors", {"ex1_checkerboard": loops}), _rule("01_tensors", "test_ex1_checkerboard"))
    rule = _rule("08_training_loop", "test_ex5_steps_per_epoch")
    for code in ("import math\ndef steps_per_epoch(n, b, drop_last=False):\n    return n // b if drop_last else math.ceil(n / b)",
                 "def steps_per_epoch(n, b, drop_last=False):\n    return int(n // b + (0.0 if drop_last or n % b == 0 else 1))"):
        assert "integer arithmetic" in rules.violation(_nb("08_training_loop", {"ex5_steps_per_epoch": code}), rule)
    honest = "def steps_per_epoch(n, b, drop_last=False):\n    return n // b if drop_last else -(-n // b)"
    assert rules.violation(_nb("08_training_loop", {"ex5_steps_per_epoch": honest}), rule) is None


@pytest.mark.parametrize("chapter", project.chapters())
def test_the_solution_keeps_its_own_rules(chapter):
    src = nbformat.read(str(project.source_notebook(chapter)), as_version=4)
    found = rules.from_settings(project.grading_settings(project.source_notebook(chapter).parent), src)
    nb = _nb(chapter, dict.fromkeys(samples.answer_ids(chapter), samples.SOLUTION))
    assert {gid: rules.violation(nb, rule) for gid, rule in found.items()} == dict.fromkeys(found)


def test_a_puzzles_allowed_primitives_are_the_only_attributes_its_answer_uses():
    rule = rules.Rule(answer="ex9", functions=("ones_below",), allow=frozenset({"arange", "shape"}), no_loops=True)
    ok = "import torch\n\ndef ones_below(n):\n    i = torch.arange(n)\n    return 1 * (i[:, None] >= i)\n"
    nb = _nb("01_tensors", {"ex1_checkerboard": ok})
    assert rules.violation(nb, rule) is None
    for code in ("import torch\n\ndef ones_below(n):\n    return torch.tril(torch.ones(n, n))\n",
                 "import numpy as np\n\ndef ones_below(n):\n    return np.tri(n)\n",
                 "import torch\n\ndef ones_below(n):\n    i = torch.arange(n)\n    return (i[:, None] >= i).float()\n",
                 "import torch\n\ndef ones_below(n):\n    return getattr(torch, 'tr' + 'il')(torch.arange(n))\n"):
        assert rules.violation(_nb("01_tensors", {"ex1_checkerboard": code}), rule) is not None, code


def test_a_local_name_never_pulls_in_a_global_of_the_same_name():
    """A scratch cell's `x = torch.softmax(...)` is not the answer's local `x`: no false accusation."""
    nb = _nb("05_broadcasting", {
        "ex4_standardize_columns": "import torch\nx = torch.softmax(torch.ones(3), 0)\nm = x.logsumexp(0)\n",
        "ex5_softmax": ("import torch\n\ndef softmax(X, dim=-1):\n    x = X - X.amax(dim, keepdim=True)\n"
                        "    m = [v for v in (x,)][0]\n    e = torch.exp(m)\n    return e / e.sum(dim, keepdim=True)\n"),
    })
    assert rules.violation(nb, _rule("05_broadcasting", "test_ex5_softmax")) is None


SHADOWS = {
    "a global read by a nested function": "import torch\n_sm = torch.softmax\ndef softmax(X, dim=-1):\n    def inner():\n        return _sm(X, dim)\n    return inner()",
    "a default argument naming a global": "import torch\n_sm = torch.softmax\ndef softmax(X, dim=-1, f=_sm):\n    return f(X, dim)",
    "a global declared in the function": "import torch\n_sm = torch.softmax\ndef softmax(X, dim=-1):\n    global _sm\n    return _sm(X, dim)",
    "a magic in the answer cell": "%time 1\nimport torch\n_sm = torch.softmax\ndef softmax(X, dim=-1):\n    return _sm(X, dim)",
    "a local in an inner function only": "import torch\n_sm = torch.softmax\ndef softmax(X, dim=-1):\n    def inner():\n        _sm = 0\n        return _sm\n    inner()\n    return _sm(X, dim)",
}


@pytest.mark.parametrize("how", sorted(SHADOWS))
def test_a_global_is_followed_through_scopes(how):
    nb = _nb("05_broadcasting", {"ex5_softmax": SHADOWS[how]})
    assert rules.violation(nb, _rule("05_broadcasting", "test_ex5_softmax")) is not None


#: What a puzzle's statement calls to draw the expected output (course_utils pictures, matplotlib).
DRAWS = frozenset({"show_grid", "show_strides", "show_broadcast", "show_mask", "draw_graph", "subplots", "plot", "imshow"})


@pytest.mark.parametrize("chapter", project.chapters())
def test_every_chapter_has_one_puzzle_with_its_primitives_checked(chapter):
    """Each chapter has one puzzle: exactly one rule of its grading.toml lists allowed primitives
    (with no_loops and a why), for an answer cell of the chapter whose statement (the cells from
    its exercise heading to the answer) names every allowed primitive, defines a plain-Python loop
    reference, runs it and draws the expected output."""
    path = project.source_notebook(chapter)
    declared = project.grading_settings(path.parent).get("rules", {})
    puzzles = {gid: spec for gid, spec in declared.items() if isinstance(spec, dict) and "allow" in spec}
    assert len(puzzles) == 1, f"{chapter}: {len(puzzles)} rules with `allow` in grading.toml, not one"
    [(gid, spec)] = puzzles.items()
    assert spec.get("no_loops") is True and str(spec.get("why", "")).strip(), f"{chapter}:{gid}: no_loops and a why"
    nb = nbformat.read(str(path), as_version=4)
    answer = [i for i, c in enumerate(nb.cells) if cells.is_solution(c) and cells.grade_id(c) == gid]
    assert answer, f"{chapter}: grading.toml names {gid}, which is no answer cell of the chapter"
    heading = re.compile(r"##+ Exercise \d+\b")
    start = max(i for i in range(answer[0]) if nb.cells[i].cell_type == "markdown" and heading.match(nb.cells[i].source))
    statement = nb.cells[start:answer[0]]
    prose = "\n".join(c.source for c in statement if c.cell_type == "markdown")
    assert "**Allowed primitives**" in prose, f"{chapter}:{gid}: the statement lists no allowed primitives"
    unnamed = [n for n in sorted(spec["allow"]) if not re.search(rf"`(?:torch\.|\.){re.escape(n)}[`(]", prose)]
    assert not unnamed, f"{chapter}:{gid}: the statement does not name the allowed {unnamed}"
    trees = [ast.parse(c.source) for c in statement if c.cell_type == "code"]
    specs = {f.name for t in trees for f in ast.walk(t) if isinstance(f, ast.FunctionDef)
             and any(isinstance(n, ast.For | ast.While) for n in ast.walk(f))}
    called = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
              for t in trees for n in ast.walk(t) if isinstance(n, ast.Call)}
    assert specs & called, f"{chapter}:{gid}: no plain-Python loop reference that the statement runs"
    assert called & DRAWS, f"{chapter}:{gid}: the statement draws no picture of the expected output"


#: Correct puzzle answers with type hints, as learners write them (the stubs of other exercises do):
#: a hint computes nothing, so it is no primitive of the puzzle.
HINTED = {
    ("01_tensors", "ex1_checkerboard"): (
        'import torch\n\n\ndef checkerboard(n: int, m: int, device="cpu") -> torch.Tensor:\n'
        '    board = torch.zeros((n, m), dtype=torch.float32, device=device)\n'
        '    board[0::2, 0::2] = 1.0\n    board[1::2, 1::2] = 1.0\n    return board\n'),
    ("02_dtypes", "ex6_quantize_int8"): (
        "def quantize_int8(x: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:\n"
        "    lo, hi = torch.iinfo(torch.int8).min, torch.iinfo(torch.int8).max\n"
        "    return (torch.round(x / scale) + zero_point).clamp(lo, hi).to(torch.int8)\n"),
    ("03_numpy_bridge", "ex6_sliding_windows"): (
        "import numpy as np\n\n\ndef sliding_windows(arr: np.ndarray, k: int) -> 'torch.Tensor':\n"
        "    base = torch.from_numpy(arr)\n    (stride,) = base.stride()\n"
        "    return base.as_strided(size=(base.size(0) - k + 1, k), stride=(stride, stride))\n"),
    ("04_reshape_indexing", "ex7_rotate_left"): (
        "from torch import Tensor\n\n\ndef rotate_left(img: Tensor) -> Tensor:\n"
        "    mirrored: Tensor = img.flip([1])\n    return mirrored.mT\n"),
    ("06_autograd", "ex7_sinc"): (
        "from typing import Optional\n\n\ndef sinc(x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor | None:\n"
        "    safe = torch.where(x == 0, torch.ones_like(x), x)\n"
        "    return torch.where(x == 0, torch.ones_like(x), torch.sin(safe) / safe)\n"),
    ("07_devices", "ex7_attention_mask"): (
        "def attention_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:\n"
        "    rows = torch.arange(T, device=lengths.device).unsqueeze(-1)\n"
        "    cols = torch.arange(T, device=lengths.device).unsqueeze(0)\n"
        "    return (rows >= cols) & (lengths[:, None, None] > cols)\n"),
    ("08_training_loop", "ex8_moving_average"): (
        "def moving_average(losses: torch.Tensor, w: int) -> torch.Tensor:\n"
        "    S = losses.shape[0]\n    s = losses.cumsum(0)\n"
        "    shifted = torch.cat([losses.new_zeros(w), s])[:S]\n"
        "    counts = torch.arange(1, S + 1, device=losses.device).clamp(max=w)\n    return (s - shifted) / counts\n"),
}


def _rule_of(chapter: str, answer: str) -> rules.Rule:
    """The rule of the answer cell ``answer`` (:func:`_rule` takes its test's grade_id)."""
    return _rule(chapter, "test_" + answer)


@pytest.mark.parametrize(("chapter", "answer"), sorted(HINTED))
def test_a_type_hint_is_no_primitive_of_a_puzzle(chapter, answer):
    nb = _nb(chapter, {answer: HINTED[(chapter, answer)]})
    assert rules.violation(nb, _rule_of(chapter, answer)) is None


#: Ways to reach a switched-off function, or a primitive a puzzle does not allow, through an annotation.
THROUGH_HINTS = {
    "a switched-off name as a hint": ("05_broadcasting", "ex5_softmax",
        "import torch\ndef softmax(X: torch.softmax, dim=-1):\n    return X\n"),
    "__annotations__": ("05_broadcasting", "ex5_softmax",
        "from torch.nn.functional import softmax as s\ndef softmax(X: s, dim: int = -1):\n"
        "    return softmax.__annotations__['X'](X, dim)\n"),
    "inspect.signature": ("05_broadcasting", "ex5_softmax",
        "import inspect\nfrom torch.nn.functional import softmax as s\ndef softmax(X, dim: int = -1, f: s = None):\n"
        "    return inspect.signature(softmax).parameters['f'].annotation(X, dim)\n"),
    "typing.get_type_hints": ("05_broadcasting", "ex2_broadcast_shape",
        "import typing\nfrom torch import broadcast_shapes as b\ndef broadcast_shape(a, b_: b = None):\n"
        "    return tuple(typing.get_type_hints(broadcast_shape)['b_'](a, b_))\n"),
    "a call in an annotation": ("05_broadcasting", "ex5_softmax",
        "import torch\ndef softmax(X: torch.nn.functional.softmax(torch.ones(2), 0), dim=-1):\n    return X\n"),
    "a puzzle's hint read back": ("06_autograd", "ex7_sinc",
        "def sinc(x: torch.Tensor):\n    return sinc.__annotations__['x'].sinc(x)\n"),
    "a disallowed call in a puzzle's annotation": ("04_reshape_indexing", "ex7_rotate_left",
        "def rotate_left(img: torch.rot90(torch.ones(2, 2))):\n    return img.flip(1).T\n"),
}


@pytest.mark.parametrize("how", sorted(THROUGH_HINTS))
def test_an_annotation_smuggles_nothing_past_a_rule(how):
    chapter, answer, code = THROUGH_HINTS[how]
    assert rules.violation(_nb(chapter, {answer: code}), _rule_of(chapter, answer)) is not None


def test_an_import_reached_for_one_name_is_no_use_of_the_others_it_binds():
    """`from torch.nn.functional import relu, softmax` in a scratch cell, with an answer that
    reads `relu` only, does not use softmax; an answer reading the alias does."""
    scratch = "from torch.nn.functional import relu, softmax as sm\nimport torch.optim, math\n"
    honest = ("import torch\n\ndef softmax(X, dim=-1):\n    e = torch.exp(relu(X) * 0 + X - X.amax(dim, keepdim=True))\n"
              "    return e / e.sum(dim, keepdim=True) * math.exp(0)\n")
    rule = _rule("05_broadcasting", "test_ex5_softmax")
    nb = _nb("05_broadcasting", {"ex4_standardize_columns": scratch, "ex5_softmax": honest})
    assert rules.violation(nb, rule) is None
    cheat = "def softmax(X, dim=-1):\n    return sm(X, dim)\n"
    nb = _nb("05_broadcasting", {"ex4_standardize_columns": scratch, "ex5_softmax": cheat})
    assert "softmax, which this exercise switches off" in rules.violation(nb, rule)


@pytest.mark.parametrize("scratch", ["from torch.nn.functional import *", "from torch.special import *"])
def test_a_name_only_a_star_import_gives_is_not_taken_on_trust(scratch):
    cheat = "def softmax(X, dim=-1):\n    return log_softmax(X, dim).exp()\n"
    nb = _nb("05_broadcasting", {"ex4_standardize_columns": scratch, "ex5_softmax": cheat})
    assert "import *" in rules.violation(nb, _rule("05_broadcasting", "test_ex5_softmax"))
    # builtins and names bound elsewhere never pull a star import in
    nb = _nb("05_broadcasting", {"ex4_standardize_columns": scratch, "ex5_softmax": GOOD_SOFTMAX.replace(
        "return e", "assert len(X.shape) >= 1\n    return e")})
    assert rules.violation(nb, _rule("05_broadcasting", "test_ex5_softmax")) is None


def test_fit_line_refuses_an_optimizer_whatever_undoes_the_tests_own_refusal():
    """ch08 ex2 rules out torch.optim. The test's refusal of an optimizer built during the call
    lives in the learner's process, where an answer can undo it; the rule is read here."""
    rule = _rule_of("08_training_loop", "ex1_fit_line")
    undo = ("import torch\n_init = torch.optim.Optimizer.__init__\n\n\ndef fit_line(X, y, w_init, b_init, lr, num_steps):\n"
            "    torch.optim.Optimizer.__init__ = _init\n    return 0.0, 0.0\n")
    assert "which this exercise switches off" in rules.violation(_nb("08_training_loop", {"ex1_fit_line": undo}), rule)
    imported = "from torch.optim import SGD as Step\n\n\ndef fit_line(X, y, w_init, b_init, lr, num_steps):\n    return Step\n"
    assert "SGD, which this exercise switches off" in rules.violation(_nb("08_training_loop", {"ex1_fit_line": imported}), rule)
    nb = _nb("08_training_loop", {"ex1_fit_line": samples.SOLUTION})
    assert rules.violation(nb, rule) is None
