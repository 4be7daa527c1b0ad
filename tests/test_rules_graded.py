"""Rules through the grader, on both engines: answers whose values are right but which reach what
their rule forbids (or hide what they reach) lose that exercise with a reason naming the line; honest
notebooks with drafts, exploration, scratch imports and magics keep every point. Packed into a few
notebooks (several exercises each), one batch per engine."""

from __future__ import annotations

import json

import nbformat
import pytest

from grader import cells, project, samples

pytestmark = pytest.mark.slow


def _notebook(chapter: str, answers: dict[str, str], before: dict[str, list[str]] | None = None) -> dict:
    """A perfect notebook of ``chapter`` with ``answers`` replacing some answer cells (a cell magic
    kept on the cell's first line) and, before the answer cells named in ``before``, code cells."""
    nb = samples.make_submission(chapter, dict.fromkeys(samples.answer_ids(chapter), samples.SOLUTION))
    out = []
    for cell in nb.cells:
        gid = cells.grade_id(cell) or ""
        if cells.is_solution(cell):
            out += [nbformat.v4.new_code_cell(code) for code in (before or {}).get(gid, [])]
            if gid in answers:
                code = answers[gid]
                cell.source = code if code.startswith("%%") else cells.marker_line("answer", gid) + "\n" + code
        out.append(cell)
    nb.cells = out
    return json.loads(nbformat.writes(nb))


SOFTMAX_BY_TORCH = ("exec('import torch\\ndef softmax(X, dim=-1):\\n"
                    "    return torch.exp(X - torch.logsumexp(X, dim, keepdim=True))')\n")
TOEPLITZ_BY_GETATTR = ("def toeplitz(v):\n    i = getattr(torch, 'arange')(v.shape[0], device=v.device)\n"
                       "    return v[(i[:, None] - i[None, :]).abs()]\n")
ZERO_STRIDE = ("import numpy as np\n\ndef _bs(a, b):\n"
               "    z = lambda s: np.lib.stride_tricks.as_strided(np.zeros(1), shape=tuple(s), strides=(0,) * len(s))\n"
               "    return tuple(int(n) for n in np.broadcast(z(a), z(b)).shape)\n")
SHAPE_BY_NUMPY = "if True:\n" + "".join("    " + line + "\n" for line in ZERO_STRIDE.splitlines()) + (
    "    broadcast_shape = _bs\n")
SHAPE_BY_CLASS = ("class _K:\n    _bs = None\n    @staticmethod\n    def run(a, b):\n        return _bs(a, b)\n\n"
                  "def broadcast_shape(a, b):\n    return _K.run(a, b)\n")
MOVING_BY_MAP = ("def moving_average(losses, w):\n    if losses.shape[0] == 0:\n        return losses.clone()\n"
                 "    return torch.stack(list(map(lambda k: losses[max(0, k - w + 1):k + 1].mean(), range(losses.shape[0]))))\n")

#: student -> (chapter, answers, cells before answers, the ruled tests that must score 0)
HOSTILE = {
    "exec_getattr_if_true": ("05_broadcasting", {
        "ex5_softmax": SOFTMAX_BY_TORCH, "ex7_toeplitz": TOEPLITZ_BY_GETATTR, "ex2_broadcast_shape": SHAPE_BY_NUMPY}, {},
        ["test_ex5_softmax", "test_ex7_toeplitz", "test_ex2_broadcast_shape"]),
    "builtins_class_walrus": ("05_broadcasting", {
        "ex5_softmax": "def softmax(X, dim=-1):\n    return smx(X, dim)\n",
        "ex2_broadcast_shape": SHAPE_BY_CLASS,
        "ex7_toeplitz": ("if (_sub := torch.sub):\n    pass\n\ndef toeplitz(v):\n    i = torch.arange(v.shape[0], device=v.device)\n"
                         "    return v[_sub(i[:, None], i[None, :]).abs()]\n")}, {
        "ex2_broadcast_shape": [ZERO_STRIDE],
        "ex5_softmax": ["import builtins\n\ndef _mine(X, dim=-1):\n    e = (X - X.amax(dim, keepdim=True)).exp()\n"
                        "    return e / e.sum(dim, keepdim=True)\n\nbuiltins.smx = _mine\n"]},
        ["test_ex5_softmax", "test_ex2_broadcast_shape", "test_ex7_toeplitz"]),
    "capture_magic": ("04_reshape_indexing", {
        "ex7_rotate_left": "%%capture\nimport torch\ndef rotate_left(img):\n    return torch.rot90(img)\n"}, {},
        ["test_ex7_rotate_left"]),
    "dataloader_in_try_and_map": ("08_training_loop", {
        "ex5_steps_per_epoch": ("try:\n    from torch.utils.data import DataLoader as _DL\nexcept Exception:\n    _DL = None\n\n"
                                "def steps_per_epoch(num_samples, batch_size, drop_last=False):\n"
                                "    return len(_DL(range(num_samples), batch_size=batch_size, drop_last=drop_last))\n"),
        "ex8_moving_average": MOVING_BY_MAP}, {},
        ["test_ex5_steps_per_epoch", "test_ex8_moving_average"]),
    "global_set_by_a_function": ("01_tensors", {"ex1_checkerboard": "def checkerboard(n, m, device='cpu'):\n    return _board(n, m, device)\n"}, {
        "ex1_checkerboard": ["def _setup():\n    global _board\n    def _board(n, m, device):\n"
                             "        i = torch.arange(n, device=device)[:, None] + torch.arange(m, device=device)\n"
                             "        return (i % 2 == 0).float()\n_setup()\n"]},
        ["test_ex1_checkerboard"]),
}

#: student -> (chapter, answers, cells before answers): every point kept
HONEST = {
    "first_cell_draft_and_scratch": ("04_reshape_indexing", {
        "ex7_rotate_left": "def rotate_left(img: torch.Tensor) -> torch.Tensor:\n    return img.flip(1).T\n\n%time rotate_left(torch.ones(2, 3))\n"}, {
        "ex1_to_channels_first": ["import torch\ntorch.backends.cudnn.benchmark = False\n"],
        "ex7_rotate_left": ["import torch.nn.functional\nprint(torch.nn.functional.relu(torch.ones(2)))\n",
                            "def rotate_left(img):\n    return torch.rot90(img)  # a first draft\n"]}),
    "divmod_and_operator": ("08_training_loop", {
        "ex5_steps_per_epoch": ("import operator\n\ndef steps_per_epoch(num_samples, batch_size, drop_last=False):\n"
                                "    q, r = divmod(num_samples, batch_size)\n"
                                "    return q if drop_last or r == 0 else operator.add(q, 1)\n")}, {}),
    "exploration_and_time": ("01_tensors", {
        "ex1_checkerboard": ("%%time\ndef checkerboard(n, m, device='cpu'):\n    board = torch.zeros(n, m, device=device)\n"
                             "    board[::2, ::2] = 1.0\n    board[1::2, 1::2] = 1.0\n    return board\n")}, {
        "ex1_checkerboard": ["demo = torch.zeros(4)\ndemo[torch.randperm(4)[:2]] = 1.0\nprint(demo)\n"]}),
    "helpers_and_star_import": ("05_broadcasting", {
        "ex5_softmax": "def softmax(X, dim=-1):\n    e = torch.exp(_shifted(X, dim))\n    return e / e.sum(dim, keepdim=True)\n"}, {
        "ex5_softmax": ["from torch.nn.functional import *\nprint(softmax(torch.ones(3), 0))\n",
                        "def _shifted(X, dim):\n    def top(Y):\n        return Y.amax(dim, keepdim=True)\n    return X - top(X)\n"]}),
}


@pytest.fixture(scope="module", params=["fork", "kernel"])
def graded(tmp_path_factory, request, grade_batch):
    subs = tmp_path_factory.mktemp("rules")
    for student, (chapter, answers, before, *_) in {**HOSTILE, **HONEST}.items():
        path = subs / student / chapter / project.source_notebook(chapter).name
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(_notebook(chapter, answers, before)), encoding="utf-8")
    reports = grade_batch(subs, tmp_path_factory.mktemp("work"), jobs=2, engine=request.param, cell_timeout=60)
    students = {**HOSTILE, **HONEST}
    return {r.student: r for r in reports if r.chapter == students[r.student][0]}


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_a_right_value_reached_around_a_rule_scores_zero_with_its_line(graded, student):
    tests = {t["grade_id"]: t for t in graded[student].tests}
    for gid in HOSTILE[student][3]:
        t = tests[gid]
        assert (t["points"], t["status"]) == (0, "failed"), (gid, t)
        assert t["reason"].startswith("the answer ") and "(line " in t["reason"], (gid, t["reason"])


@pytest.mark.parametrize("student", sorted(HONEST))
def test_an_honest_notebook_with_drafts_scratch_and_magics_scores_full(graded, student):
    report = graded[student]
    failed = [(t["grade_id"], t["status"], t["reason"]) for t in report.tests if t["status"] != "passed"]
    assert (report.status, report.score) == ("graded", report.max_score), failed
