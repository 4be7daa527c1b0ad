"""Rules read as Python runs the notebook (grader.verdict.rules): no one-line way around a rule, and no
honest exploration, draft or scratch import ever costs a point. Read on the rules' API, out of any
process that runs the code."""

from __future__ import annotations

import ast
import functools

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader import cells, project, samples
from grader.verdict import rules
from grader.verdict.rules import checks, reading


def _rule(chapter: str, answer: str) -> rules.Rule:
    src = nbformat.read(str(project.source_notebook(chapter)), as_version=4)
    found = rules.from_settings(project.grading_settings(project.source_notebook(chapter).parent), src)
    return found["test_" + answer]


@functools.cache
def _release(chapter: str) -> tuple[str, dict[str, str]]:
    """The chapter's release (as JSON) and its solution's answer code by answer cell."""
    src = nbformat.read(str(project.source_notebook(chapter)), as_version=4)
    solved = {cells.grade_id(c): samples.solution_code(c) for c in src.cells if cells.is_solution(c)}
    return nbformat.writes(samples.make_submission(chapter, {})), solved


def _nb(chapter: str, answers: dict[str, str]):
    """The chapter's release with ``answers`` (as :func:`grader.samples.make_submission` fills them);
    an answer starting with a cell magic keeps it as the cell's first line, as a learner's cell would."""
    text, solved = _release(chapter)
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        gid = cells.grade_id(cell) or ""
        if gid in answers and cells.is_solution(cell):
            code = solved[gid] if answers[gid] is samples.SOLUTION else answers[gid]
            cell.source = code if code.startswith("%%") else cells.marker_line("answer", gid) + "\n" + code
    return nb


def _verdict(chapter: str, answer: str, answers: dict[str, str]) -> str | None:
    return rules.violation(_nb(chapter, answers), _rule(chapter, answer))


#: (chapter, the ruled answer, {answer cell: code}) -- each reaches what its rule forbids, or hides what it reaches
BYPASSES = {
    "the def under if True": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex7_rotate_left": "import torch\nif True:\n    def rotate_left(img):\n        return torch.rot90(img)\n"}),
    "an import inside try": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "try:\n    from torch.nn.functional import softmax as _s\nexcept ImportError:\n    _s = None\n"
                       "def softmax(X, dim=-1):\n    return _s(X, dim)\n"}),
    "getattr with a constant name": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex7_rotate_left": "def rotate_left(img):\n    return getattr(torch, 'rot90')(img)\n"}),
    "a global set by a function of another cell": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "import torch\ndef _setup():\n    global _impl\n    _impl = torch.softmax\n_setup()\n",
        "ex5_softmax": "def softmax(X, dim=-1):\n    return _impl(X, dim)\n"}),
    "the graded name rebound by a function's global": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\ndef softmax(X, dim=-1):\n    e = X.exp()\n    return e / e.sum(dim, keepdim=True)\n"
                       "def _swap():\n    global softmax\n    softmax = torch.softmax\n_swap()\n"}),
    "a class body's name that a method reads as the global": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "import torch\n_sm = torch.softmax\n",
        "ex5_softmax": "class _K:\n    _sm = None\n    @staticmethod\n    def run(X, dim):\n        return _sm(X, dim)\n"
                       "def softmax(X, dim=-1):\n    return _K.run(X, dim)\n"}),
    "a subscripted hint that runs code": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex7_rotate_left": "class _H:\n    def __class_getitem__(cls, item):\n        return cls\n"
                           "def rotate_left(img: _H[0]):\n    return img.flip(1).T\n"}),
    "an answer under %%capture": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex7_rotate_left": "%%capture\nimport torch\ndef rotate_left(img):\n    return torch.rot90(img)\n"}),
    "a top-level exec": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "exec('import torch\\ndef softmax(X, dim=-1):\\n    return torch.softmax(X, dim)')\n"}),
    "an exec after an honest def": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "def softmax(X, dim=-1):\n    e = X.exp()\n    return e / e.sum(dim, keepdim=True)\n"
                       "exec('softmax = torch.soft' + 'max')\n"}),
    "a helper written into builtins": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "import builtins, torch\nbuiltins.smx = torch.softmax\n",
        "ex5_softmax": "def softmax(X, dim=-1):\n    return smx(X, dim)\n"}),
    "map over a lambda where loops are ruled out": ("01_tensors", "ex1_checkerboard", {
        "ex1_checkerboard": "def checkerboard(n, m, device='cpu'):\n    return torch.tensor(list(map(lambda i: list(map("
                            "lambda j: float((i + j) % 2 == 0), range(m))), range(n))), device=device)\n"}),
    "recursion where loops are ruled out": ("01_tensors", "ex1_checkerboard", {
        "ex1_checkerboard": "def checkerboard(n, m, device='cpu'):\n    if n == 0:\n        return torch.zeros(0, m, device=device)\n"
                            "    return torch.cat([checkerboard(n - 1, m, device), torch.zeros(1, m, device=device)])\n"}),
    "a walrus": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\nif (_s := torch.softmax) is not None:\n    pass\ndef softmax(X, dim=-1):\n    return _s(X, dim)\n"}),
    "a for target": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\nfor _s in [torch.special.softmax]:\n    pass\ndef softmax(X, dim=-1):\n    return _s(X, dim)\n"}),
    "a with block": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\nwith torch.no_grad():\n    _s = torch.nn.Softmax\ndef softmax(X, dim=-1):\n    return _s(dim)(X)\n"}),
    "a tuple target": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch.nn.functional as F\n_a, (_b, _s) = 1, (2, F.log_softmax)\n"
                       "def softmax(X, dim=-1):\n    return _s(X, dim).exp()\n"}),
    "torch._softmax": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\ndef softmax(X, dim=-1):\n    return torch._softmax(X, dim, False)\n"}),
    "a private module of torch": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\ndef softmax(X, dim=-1):\n    return torch._C._nn.gelu(X) * 0 + X\n"}),
    "np.broadcast on zero-stride arrays": ("05_broadcasting", "ex2_broadcast_shape", {
        "ex2_broadcast_shape": "import numpy as np\ndef broadcast_shape(a, b):\n"
                               "    z = lambda s: np.lib.stride_tricks.as_strided(np.zeros(1), shape=s, strides=(0,) * len(s))\n"
                               "    return tuple(np.broadcast(z(a), z(b)).shape)\n"}),
    "arithmetic on empty tensors": ("05_broadcasting", "ex2_broadcast_shape", {
        "ex2_broadcast_shape": "import torch\ndef broadcast_shape(a, b):\n    return tuple((torch.empty(a) + torch.empty(b)).shape)\n"}),
    "import torch.optim._functional": ("08_training_loop", "ex1_fit_line", {
        "ex1_fit_line": "from torch.optim._functional import sgd\ndef fit_line(X, y, w_init, b_init, lr, num_steps):\n"
                        "    return sgd\n"}),
    "a module the notebook writes and imports": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "%%writefile mysm.py\nimport torch\ndef softmax(X, dim=-1):\n    return torch.softmax(X, dim)\n",
        "ex5_softmax": "from mysm import softmax\n"}),
    "a module that patches torch on import": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex6_patchify": "%%writefile tools.py\nimport torch\ntorch.Tensor.flip = lambda self, dims: self.rot90()\n",
        "ex7_rotate_left": "import tools\ndef rotate_left(img):\n    return img.flip(1).T\n"}),
    "a method patched in another cell": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex6_patchify": "import torch\ntorch.Tensor.flip = torch.Tensor.rot90\n",
        "ex7_rotate_left": "def rotate_left(img):\n    return img.flip(1).T\n"}),
    "setattr on torch in another cell": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex6_patchify": "import torch\nsetattr(torch.Tensor, 'flip', torch.Tensor.rot90)\n",
        "ex7_rotate_left": "def rotate_left(img):\n    return img.flip(1).T\n"}),
    "len(DataLoader(...)) inside try": ("08_training_loop", "ex5_steps_per_epoch", {
        "ex5_steps_per_epoch": "try:\n    from torch.utils.data import DataLoader as _DL\nexcept Exception:\n    _DL = None\n"
                               "def steps_per_epoch(n, b, drop_last=False):\n    return len(_DL(range(n), batch_size=b, drop_last=drop_last))\n"}),
    "vars of a module": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\ndef softmax(X, dim=-1):\n    return vars(torch)['soft' + 'max'](X, dim)\n"}),
    "attrgetter": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "from operator import attrgetter\nimport torch\ndef softmax(X, dim=-1):\n    return attrgetter('softmax')(torch)(X, dim)\n"}),
    "a decorator that replaces the def": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\n@lambda f: torch.softmax\ndef softmax(X, dim=-1):\n    return X\n"}),
    "a lambda bound after the def, in a later cell": ("05_broadcasting", "ex2_broadcast_shape", {
        "ex2_broadcast_shape": "def broadcast_shape(a, b):\n    return ()\nimport torch\nbroadcast_shape = lambda a, b: tuple(torch.broadcast_shapes(a, b))\n"}),
    "%run of a script": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "def softmax(X, dim=-1):\n    e = X.exp()\n    return e / e.sum(dim, keepdim=True)\n%run cheat.py\n"}),
    "an unknown cell magic": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "%%mymagic\ndef softmax(X, dim=-1):\n    return torch.softmax(X, dim)\n"}),
    "sys.modules": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import sys\ndef softmax(X, dim=-1):\n    return sys.modules['torch'].__dict__['soft' + 'max'](X, dim)\n"}),
    "a float division by operator.truediv": ("08_training_loop", "ex5_steps_per_epoch", {
        "ex5_steps_per_epoch": "import operator\ndef steps_per_epoch(n, b, drop_last=False):\n    return int(operator.truediv(n, b))\n"}),
    "a class with __call__ bound to the graded name": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\nclass S:\n    def __call__(self, X, dim=-1):\n        return torch.nn.functional.softmax(X, dim)\nsoftmax = S()\n"}),
    "a match capture": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "import torch\nmatch torch.softmax:\n    case _s:\n        pass\ndef softmax(X, dim=-1):\n    return _s(X, dim)\n"}),
    "globals() written by a function that runs": ("05_broadcasting", "ex5_softmax", {
        "ex5_softmax": "def softmax(X, dim=-1):\n    e = X.exp()\n    return e / e.sum(dim, keepdim=True)\n"
                       "def _g():\n    globals()['softmax'] = torch.softmax\n_g()\n"}),
    "a float through eval": ("08_training_loop", "ex5_steps_per_epoch", {
        "ex5_steps_per_epoch": "def steps_per_epoch(n, b, drop_last=False):\n    return n // b if drop_last else int(eval('n / b') + 0.999)\n"}),
}


@pytest.mark.parametrize("how", sorted(BYPASSES))
def test_every_way_around_a_rule_costs_the_exercise_with_its_line(how):
    chapter, answer, answers = BYPASSES[how]
    why = _verdict(chapter, answer, answers)
    assert why is not None and why.startswith("the answer ") and "(line " in why, why


#: (chapter, the ruled answer, {answer cell: code}) -- honest notebooks: each keeps its points
HONEST = {
    "another cell imports torch.nn.functional": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex6_patchify": "import torch.nn.functional\nprint(torch.nn.functional.relu(torch.ones(2)))\n",
        "ex7_rotate_left": "def rotate_left(img):\n    return img.flip(1).T\n"}),
    "an exploration with randperm": ("01_tensors", "ex1_checkerboard", {
        "ex2_element_offset": "demo = torch.zeros(4)\ndemo[torch.randperm(4)[:2]] = 1.0\nprint(demo)\n",
        "ex1_checkerboard": samples.SOLUTION}),
    "cudnn.benchmark in a first cell": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex1_to_channels_first": "import torch\ntorch.backends.cudnn.benchmark = False\n",
        "ex7_rotate_left": "def rotate_left(img):\n    return img.flip(1).T\n"}),
    "divmod and operator.add": ("08_training_loop", "ex5_steps_per_epoch", {
        "ex5_steps_per_epoch": "import operator\ndef steps_per_epoch(n, b, drop_last=False):\n    q, r = divmod(n, b)\n"
                               "    return q if drop_last or r == 0 else operator.add(q, 1)\n"}),
    "a draft overridden later": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "import torch\ndef softmax(X, dim=-1):\n    return torch.softmax(X, dim)  # my first try\n",
        "ex5_softmax": "def softmax(X, dim=-1):\n    e = torch.exp(X - X.amax(dim, keepdim=True))\n    return e / e.sum(dim, keepdim=True)\n"}),
    "a draft in the answer cell itself": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex7_rotate_left": "def rotate_left(img):\n    return torch.rot90(img)\n\ndef rotate_left(img):\n    return img.flip(1).T\n"}),
    "%time and %%time": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex7_rotate_left": "%%time\ndef rotate_left(img):\n    return img.flip(1).T\n%time rotate_left(torch.ones(2, 3))\n"}),
    "a scratch eval, vars and globals elsewhere": ("04_reshape_indexing", "ex7_rotate_left", {
        "ex6_patchify": "print(eval('2 ** 10'), sorted(globals())[:3], vars(torch.nn.Linear(1, 1)).keys())\n",
        "ex7_rotate_left": "def rotate_left(img):\n    return img.flip(1).transpose(0, 1)\n"}),
    "a helper in another cell, with a nested def": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "import torch\ndef _shifted(X, dim):\n    def top(Y):\n        return Y.amax(dim, keepdim=True)\n"
                                   "    return X - top(X)\n",
        "ex5_softmax": "def softmax(X, dim=-1):\n    e = torch.exp(_shifted(X, dim))\n    return e / e.sum(dim, keepdim=True)\n"}),
    "a local that shadows a class body name": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "import torch\nsm = torch.softmax(torch.ones(3), 0)\n",
        "ex5_softmax": "class Soft:\n    sm = None\n    def __call__(self, X, dim=-1):\n        sm = X.exp()\n        return sm / sm.sum(dim, keepdim=True)\n"
                       "def softmax(X, dim=-1):\n    return Soft()(X, dim)\n"}),
    "scratch imports of anything": ("05_broadcasting", "ex5_softmax", {
        "ex4_standardize_columns": "import importlib, inspect, builtins\nfrom torch.nn.functional import *\nprint(inspect.signature(softmax))\n",
        "ex5_softmax": "import torch\ndef softmax(X, dim=-1):\n    e = torch.exp(X - X.amax(dim, keepdim=True))\n    return e / e.sum(dim, keepdim=True)\n"}),
    "type hints of every plain kind": ("07_devices", "ex7_attention_mask", {
        "ex7_attention_mask": "from typing import Optional\n\ndef attention_mask(lengths: 'torch.Tensor', T: int, x: Optional[torch.Tensor] = None)"
                              " -> torch.Tensor | None:\n    pos = torch.arange(T, device=lengths.device)\n"
                              "    return (pos.unsqueeze(0) <= pos.unsqueeze(1)).unsqueeze(0) & (pos < lengths.unsqueeze(-1)).unsqueeze(1)\n"}),
}


@pytest.mark.parametrize("how", sorted(HONEST))
def test_honest_exploration_drafts_and_helpers_never_cost_a_point(how):
    chapter, answer, answers = HONEST[how]
    assert _verdict(chapter, answer, answers) is None


def test_a_learners_long_identifier_is_capped_in_the_reason():
    name = "x" * 500
    code = f"import torch\ndef rotate_left(img):\n    return img.{name}(1).T\n"
    why = _verdict("04_reshape_indexing", "ex7_rotate_left", {"ex7_rotate_left": code})
    assert why is not None and name not in why and len(why) < 600


def test_a_batch_parses_each_release_cell_once(monkeypatch):
    """What the rules need from a cell depends only on its source: a batch of submissions (release
    cells shared, answers differing) parses each distinct source once."""
    parsed: list[str] = []
    real = reading._parse
    monkeypatch.setattr(reading, "_parse", lambda source: parsed.append(source) or real(source))
    reading.read.cache_clear()
    chapter = "05_broadcasting"
    batch = [_nb(chapter, {"ex5_softmax": samples.SOLUTION, "ex1_times_table": f"x = {k}\n"}) for k in range(5)]
    for nb in batch:
        for rule in rules.from_settings(project.grading_settings(project.source_notebook(chapter).parent),
                                        nbformat.read(str(project.source_notebook(chapter)), as_version=4)).values():
            rules.violation(nb, rule)
    twice = {source[:60] for source in parsed if parsed.count(source) > 1}
    assert parsed and not twice, f"parsed more than once: {sorted(twice)[:3]}"


def test_a_batch_walks_each_reached_statement_once_and_reads_a_notebook_once_for_all_its_rules(monkeypatch):
    """What a rule looks at in a statement is worked out once per batch (the statement is one object
    per distinct source), not once per rule and submission; a notebook's cells are looked up once for
    all the rules of its chapter."""
    chapter = "01_tensors"
    found = rules.from_settings(project.grading_settings(project.source_notebook(chapter).parent),
                                nbformat.read(str(project.source_notebook(chapter)), as_version=4))
    assert len(found) > 1
    checks._visited.cache_clear()
    looked_up: list[str] = []
    real = reading.read
    monkeypatch.setattr(reading, "read", lambda source: looked_up.append(source) or real(source))
    walked = []
    for k in range(4):  # the ruled answers the same, an answer no rule reaches written differently
        answers = {**dict.fromkeys(samples.answer_ids(chapter), samples.SOLUTION), "ex7_where_is_max": f"x = {k}\n"}
        notebook = rules.read(_nb(chapter, answers))
        assert len(looked_up) == len(notebook.cells) * (k + 1), "a notebook's cells looked up more than once"
        for rule in found.values():
            rules.violation(notebook, rule)
        walked.append(checks._visited.cache_info().misses)
    assert walked[0] > 0 and walked == walked[:1] * 4, f"statements walked again for another submission: {walked}"


# -- equivalent forms of correct answers keep their points (property-based) -------------------------

RULED = [(ch, gid) for ch in project.chapters() for gid in
         project.grading_settings(project.source_notebook(ch).parent).get("rules", {})]
SCRATCH = [
    "import torch.nn.functional as F\nprint(F.softmax(torch.ones(3), 0))\n",
    "demo = torch.zeros(4)\ndemo[torch.randperm(4)[:2]] = 1.0\nprint(demo)\n",
    "import numpy as np\nprint(np.broadcast_shapes((2, 1), (1, 3)))\n",
    "torch.backends.cudnn.benchmark = False\n",
    "import inspect, importlib, operator\nprint(getattr(torch, 'rot90')(torch.ones(2, 2)))\n",
    "x = torch.rot90(torch.ones(2, 2))\nfor i in range(3):\n    print([j for j in range(i)], x.sum() / 2.0)\n",
    "%timeit -n 1 torch.ones(3).softmax(0)\n!ls\n%matplotlib inline\n",
    "from torch.utils.data import DataLoader\nprint(len(DataLoader(range(10), batch_size=3)))\n",
]
HINTS = ["torch.Tensor", "'torch.Tensor'", "int", "float | None", "tuple[int, ...]", "object"]


def _answer(chapter: str, gid: str) -> str:
    src = nbformat.read(str(project.source_notebook(chapter)), as_version=4)
    return next(samples.solution_code(c) for c in src.cells if cells.is_solution(c) and cells.grade_id(c) == gid)


def _rewrite(code: str, functions: tuple[str, ...], draw) -> tuple[str, list[str]]:
    """``code`` in an equivalent form, and cells to put before it: helpers, drafts, scratch."""
    tree = ast.parse(code)
    before: list[str] = []
    for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in functions]:
        if draw(st.booleans()):  # type hints on every argument and the return
            for arg in fn.args.args:
                arg.annotation = ast.parse(draw(st.sampled_from(HINTS)), mode="eval").body
            fn.returns = ast.parse(draw(st.sampled_from(HINTS)), mode="eval").body
        if draw(st.booleans()):  # the body in a nested def
            inner = ast.FunctionDef(name="_inner", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                                    body=fn.body, decorator_list=[], returns=None, type_params=[])
            fn.body = [inner, ast.Return(ast.Call(ast.Name("_inner", ast.Load()), [], []))]
        if draw(st.booleans()):  # the body in a helper of another cell, called with the same arguments
            helper = ast.FunctionDef(**{**{f: getattr(fn, f) for f in fn._fields}, "name": f"_{fn.name}_helper", "decorator_list": []})
            before.append("import torch\n" + ast.unparse(ast.fix_missing_locations(helper)))
            fn.body = ast.parse(f"return _{fn.name}_helper(*args, **kwargs)").body
            fn.args = ast.parse("def f(*args, **kwargs): pass").body[0].args
        if draw(st.booleans()):  # a first draft, overridden by the answer
            before.append(f"import torch\ndef {fn.name}(*args, **kwargs):\n    return eval('torch.rot90')(*args)  # draft\n")
    text = ast.unparse(ast.fix_missing_locations(tree))
    if draw(st.booleans()):
        text += "\n%time None\n"
    if draw(st.booleans()):
        text = "%%time\n" + text
    before += draw(st.lists(st.sampled_from(SCRATCH), max_size=3))
    return text, before


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_correct_answer_in_any_equivalent_form_keeps_its_points(data):
    chapter, gid = data.draw(st.sampled_from(RULED))
    rule = _rule(chapter, gid)
    code, before = _rewrite(_answer(chapter, gid), rule.functions, data.draw)
    nb = _nb(chapter, {gid: "pass\n"})
    at = next(i for i, c in enumerate(nb.cells) if cells.is_solution(c) and cells.grade_id(c) == gid)
    nb.cells[at].source = code
    nb.cells[at:at] = [nbformat.v4.new_code_cell(text) for text in before]
    assert rules.violation(nb, rule) is None, (code, before)


def test_a_function_that_runs_exec_when_called_at_the_top_level_is_read():
    answers = {"ex5_softmax": "def softmax(X, dim=-1):\n    e = X.exp()\n    return e / e.sum(dim, keepdim=True)\n"
                              "def _go():\n    exec('softmax = torch.softmax', globals())\n_go()\n"}
    assert "cannot be read" in _verdict("05_broadcasting", "ex5_softmax", answers)
    answers["ex5_softmax"] = answers["ex5_softmax"].replace("_go()\n", "")  # defined, never run: nothing changed
    assert _verdict("05_broadcasting", "ex5_softmax", answers) is None


def test_a_star_import_after_the_answer_rebinds_it_and_one_before_does_not():
    good = "def softmax(X, dim=-1):\n    e = X.exp()\n    return e / e.sum(dim, keepdim=True)\n"
    after = _verdict("05_broadcasting", "ex5_softmax", {"ex5_softmax": good + "from torch.nn.functional import *\n"})
    assert "import *" in after
    before = {"ex4_standardize_columns": "from torch.nn.functional import *\n", "ex5_softmax": good}
    assert _verdict("05_broadcasting", "ex5_softmax", before) is None


def test_a_nested_functions_parameter_is_its_own_local():
    answers = {"ex4_standardize_columns": "import torch\nY = torch.softmax\n",
               "ex5_softmax": "def softmax(X, dim=-1):\n    def top(Y):\n        return Y.amax(dim, keepdim=True)\n"
                              "    e = (X - top(X)).exp()\n    return e / e.sum(dim, keepdim=True)\n"}
    assert _verdict("05_broadcasting", "ex5_softmax", answers) is None
