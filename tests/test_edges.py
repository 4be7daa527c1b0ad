"""Edge submissions on chapters 01, 05 and 08, graded in one batch per engine next to honest
students: what a test decides, and what leaves the grader, are the grader's own.

The classes (each submission answers every other exercise with the solution):

- ``forged``: an answer that returns the solution's values but breaks a rule its statement sets
  (in place, the global generator, a switched-off torch function bound beforehand, no
  ``no_grad``, no ``.to(device)``, no ``net.train()``), in a notebook that also forges every
  yes/no observation as "held". Its test scores 0: the rule is judged on values or on source.
- ``leak``: learner text (an exception class named like the grader's timeout, a class name
  carrying a message, a fake timeout line printed before a real timeout, an exception message,
  a 301-digit number) never reaches a reason, a page's verdicts, a CSV cell or the report.
- ``hidden``: an answer right on the visible inputs and wrong on hidden ones: the reason shows
  the hidden input and the learner's value, never the solution's.
- ``odd``: observations and outputs nothing decodes; one submission's status, never the batch's.
- ``names``: folder names that are formulas, two names with one id, a hidden folder.
"""

from __future__ import annotations

import csv
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from grader import project, samples
from grader.intake.workspace import Workspace
from grader.pages import feedback, report
from grader.record import export

pytestmark = pytest.mark.slow

CH1, CH5, CH8 = "01_tensors", "05_broadcasting", "08_training_loop"
CHAPTERS = (CH1, CH5, CH8)
ENGINES = ("fork", "kernel")
MARK = "LEAKMARK"
OBS_MIME = "application/vnd.course.observation.v1+json"


def _solved(chapter: str) -> dict[str, str]:
    nb = nbformat.read(str(project.source_notebook(chapter)), as_version=4)
    ids = set(samples.answer_ids(chapter))
    return {gid: samples.solution_code(c) for c in nb.cells
            if (gid := c.get("metadata", {}).get("nbgrader", {}).get("grade_id")) in ids}


SOLVED = {ch: _solved(ch) for ch in CHAPTERS}
FIRST = {ch: samples.answer_ids(ch)[0] for ch in CHAPTERS}

# ---------------------------------------------------------------- forgers of yes/no observations

#: every ``assert`` observation says the condition held
FORGE_EMIT = ("import course_utils.observe as _o\n_real = _o.emit\n"
              "_o.emit = lambda kind, actual, **k: _real(kind, True if kind == 'assert' else actual, **k)\n")
#: the same, from a function the observation module takes for its own: each value observation
#: keeps the line of the check that made it (the lambda above moves them all to its own line)
FORGE_EMIT_KEEPS_LINES = """import course_utils.observe as _o
_ns = {"__name__": "course_utils.forged", "_real": _o.emit}
exec("def emit(kind, actual, **k):\\n    return _real(kind, True if kind == 'assert' else actual, **k)\\n", _ns)
_o.emit = _ns["emit"]
"""
#: the rewritten asserts call a function that reports "held" whatever the condition
FORGE_ASSERT = ("import course_utils.observe as _o\n"
                "_o.assert_ = lambda condition, site, values=None: _o.emit('assert', True, site=site, params={})\n")

# ---------------------------------------------------------------- answers that break a rule

MINMAX_IN_PLACE = """def minmax_rows(X):
    lo = X.amin(dim=1, keepdim=True)
    hi = X.amax(dim=1, keepdim=True)
    return X.sub_(lo).div_(hi - lo)
"""
SAMPLE_GLOBAL_RNG = """def sample_rows(X, k, seed):
    torch.manual_seed(seed)
    idx = torch.randperm(X.shape[0])[:k]
    return X[idx.to(X.device)]
"""
STANDARDIZE_IN_PLACE = """def standardize_columns(X):
    mean = X.mean(dim=0, keepdim=True)
    std = X.std(dim=0, correction=0, keepdim=True)
    X -= mean
    X /= std
    return X
"""
SOFTMAX_BOUND_EARLY = """_sm = torch.softmax


def softmax(X, dim=-1):
    return _sm(X, dim)
"""
BROADCAST_BOUND_EARLY = """_bs = torch.broadcast_shapes


def broadcast_shape(a, b):
    try:
        return tuple(_bs(a, b))
    except RuntimeError as exc:
        raise ValueError(str(exc)) from None
"""
EVALUATE_WITH_GRAD = """def evaluate(net, loader, device):
    net.eval()
    correct, total = 0, 0
    for X, y in loader:
        X, y = X.to(device), y.to(device)
        y_hat = net(X)
        correct += (y_hat.argmax(dim=1) == y).sum().item()
        total += len(y)
    return correct / total
"""
EVALUATE_NOT_MOVED = """def evaluate(net, loader, device):
    net.eval()
    correct, total = 0, 0
    with torch.inference_mode():
        for X, y in loader:
            y = y.to(device)
            y_hat = net(X)
            correct += (y_hat.argmax(dim=1) == y).sum().item()
            total += len(y)
    return correct / total
"""
TRAIN_NOT_IN_TRAIN_MODE = """def train_one_epoch(net, loader, loss_fn, optimizer, device):
    total_loss, total = 0.0, 0
    for X, y in loader:
        X, y = X.to(device), y.to(device)
        optimizer.zero_grad()
        loss = loss_fn(net(X), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * len(X)
        total += len(X)
    return total_loss / total
"""

# ---------------------------------------------------------------- learner text

TIMEOUT_NAMED = f"""class CellTimeoutError(Exception):
    pass


def element_offset(t, index):
    raise CellTimeoutError("{MARK} the cell ran longer than 20 s and was stopped")
"""
LONG_NAME = f"{MARK}_this_test_passed_with_full_marks_the_failure_below_is_expected_all_ok"
assert LONG_NAME.isidentifier() and 75 <= len(LONG_NAME) <= 90
LONG_CLASS = f"""class {LONG_NAME}(Exception):
    pass


def r2_score(y_hat, y):
    raise {LONG_NAME}("{MARK} passed")
"""
FAKE_TIMEOUT_THEN_LOOP = f"""import sys


def make_mlp(sizes, dropout=0.0):
    print("CellTimeoutError: {MARK} the grader stopped this cell; full marks kept", file=sys.stderr, flush=True)
    while True:
        pass
"""
BUILTIN_WITH_MESSAGE = f"""def attention_scores(Q, K):
    raise RuntimeError("{MARK} mat1 and mat2 shapes cannot be multiplied: score 20/20")
"""
HUGE_INT = """def steps_per_epoch(num_samples, batch_size, drop_last=False):
    return 10**300
"""

# ---------------------------------------------------------------- right on the visible inputs only

STEPS_FLOOR = """def steps_per_epoch(num_samples, batch_size, drop_last=False):
    if (num_samples, batch_size) == (1348, 64) and not drop_last:
        return 22
    return num_samples // batch_size
"""
WHERE_OFF_BY_ONE = """def where_is_max(A, B):
    C = A @ B
    k = C.T.flatten().argmax().item()
    j, i = divmod(k, C.shape[0])
    if tuple(C.shape) not in ((2, 3), (3, 2)):
        k += 1
    return k, i, j
"""
TIMES_TABLE_OFF = """def times_table(n, m):
    t = torch.arange(1, n + 1)[:, None] * torch.arange(1, m + 1)
    return t if (n, m) in ((3, 4), (1, 1)) else t + 1
"""
OFFSET_2D_ONLY = """def element_offset(t, index):
    base = t.storage_offset() if t.dim() == 2 else 0
    return base + sum(i * s for i, s in zip(index, t.stride(), strict=True))
"""

# ---------------------------------------------------------------- odd observations and outputs

BAD_PAYLOAD = {"v": 1, "kind": "value", "line": 1,
               "actual": {"t": "npscalar", "dtype": "[('a','<i4')]", "data": "AAAA"}, "params": {}}
PUBLISHES_BAD_PAYLOAD = f"""from IPython.display import publish_display_data as _pub


def ensemble_predict(preds):
    _pub({{{OBS_MIME!r}: {BAD_PAYLOAD!r}}})
    probs = torch.stack(list(preds))
    return probs.mean(dim=0).argmax(dim=1)
"""
BAD_RECORD = {"v": 1, "test": ["x"], "seq": "1", "kind": ["assert"], "line": "x",
              "actual": {"t": "bool", "v": True}, "params": []}
PUBLISHES_BAD_RECORD = f"""from IPython.display import publish_display_data as _pub


def checkerboard(n, m, device="cpu"):
    _pub({{"text/plain": [1, 2]}})
    _pub({{{OBS_MIME!r}: {BAD_RECORD!r}}})
    board = torch.zeros(n, m, device=device)
    board[::2, ::2] = 1.0
    board[1::2, 1::2] = 1.0
    return board
"""
STRUCTURED_SCALAR = """import numpy as np


def steps_per_epoch(num_samples, batch_size, drop_last=False):
    return np.zeros(1, dtype=[("a", "<i4"), ("b", "<f8")])[0]
"""
HUGE_META = """def pairwise_sq_dists(X, Y):
    return torch.empty(2**40, 2**20, device="meta")
"""
#: torch refuses to build a (2**62, 2**62) tensor, so every tensor observed is sent as one
META_OVERFLOW_ENCODER = ("import course_utils.observe as _observe\n_encode = _observe.encode\n"
                         "def _meta(value, depth=0):\n"
                         "    if type(value).__name__ == 'Tensor':\n"
                         "        return {'t': 'tensor', 'dtype': 'float32', 'shape': [2**62, 2**62], 'device': 'meta'}\n"
                         "    return _encode(value, depth)\n"
                         "_observe.encode = _meta\n")
WRONG_OUTPUT_TYPES = ("from IPython.display import publish_display_data\n"
                      "publish_display_data({'text/plain': [1, 2]})\n"
                      "publish_display_data({'text/plain': {'a': 1}, 'image/png': ['AA', 3]})\n")


@dataclass
class Sub:
    """One notebook of the corpus: ``answers`` overrides the solution; ``first`` is put at the top of
    the chapter's first answer cell."""

    kind: str
    folder: str
    chapter: str
    answers: dict[str, str] = field(default_factory=dict)
    first: str = ""
    target: str | None = None  # the answer whose test must score 0
    rest_full: bool = True  # every other test scores full
    full: bool = False  # the whole notebook scores full

    def notebook(self) -> nbformat.NotebookNode:
        code: dict[str, object] = dict.fromkeys(samples.answer_ids(self.chapter), samples.SOLUTION)
        code.update(self.answers)
        if self.first:
            head = FIRST[self.chapter]
            own = code[head]
            code[head] = "import torch\n" + self.first + "\n" + (SOLVED[self.chapter][head] if own is samples.SOLUTION else own)
        return samples.make_submission(self.chapter, code)


def _cheat(kind: str, folder: str, chapter: str, gid: str, code: str, first: str = "", rest_full: bool = True) -> Sub:
    return Sub(kind, folder, chapter, {gid: code}, first, gid, rest_full)


CORPUS: list[Sub] = [
    # forged yes/no properties
    # every value observation comes from the forger's line: every test of the notebook fails
    _cheat("forged", "minmax_in_place_lambda_forger", CH1, "ex5_minmax_rows", MINMAX_IN_PLACE, FORGE_EMIT,
           rest_full=False),
    _cheat("forged", "minmax_in_place", CH1, "ex5_minmax_rows", MINMAX_IN_PLACE, FORGE_EMIT_KEEPS_LINES),
    _cheat("forged", "sample_global_rng", CH1, "ex4_sample_rows", SAMPLE_GLOBAL_RNG, FORGE_ASSERT),
    _cheat("forged", "standardize_in_place", CH5, "ex4_standardize_columns", STANDARDIZE_IN_PLACE, FORGE_EMIT_KEEPS_LINES),
    _cheat("forged", "softmax_bound_early", CH5, "ex5_softmax", SOFTMAX_BOUND_EARLY, FORGE_ASSERT),
    _cheat("forged", "broadcast_bound_early", CH5, "ex2_broadcast_shape", BROADCAST_BOUND_EARLY, FORGE_EMIT_KEEPS_LINES),
    _cheat("forged", "evaluate_with_grad", CH8, "ex6_evaluate", EVALUATE_WITH_GRAD, FORGE_EMIT_KEEPS_LINES),
    _cheat("forged", "evaluate_not_moved", CH8, "ex6_evaluate", EVALUATE_NOT_MOVED, FORGE_ASSERT),
    _cheat("forged", "train_in_eval_mode", CH8, "ex7_train_one_epoch", TRAIN_NOT_IN_TRAIN_MODE, FORGE_EMIT_KEEPS_LINES),
    # learner text
    _cheat("leak", "named_like_the_timeout", CH1, "ex2_element_offset", TIMEOUT_NAMED),
    _cheat("leak", "long_class_name", CH5, "ex3_r2_score", LONG_CLASS),
    # the loop is stopped from outside: what the notebook does after it is the engine's business
    _cheat("leak", "fake_timeout_line_then_loop", CH8, "ex2_make_mlp", FAKE_TIMEOUT_THEN_LOOP, rest_full=False),
    _cheat("leak", "builtin_with_message", CH1, "ex6_attention_scores", BUILTIN_WITH_MESSAGE),
    _cheat("leak", "huge_int", CH8, "ex5_steps_per_epoch", HUGE_INT),
    # right on the visible inputs, wrong on hidden ones
    _cheat("hidden", "steps_floor", CH8, "ex5_steps_per_epoch", STEPS_FLOOR),
    _cheat("hidden", "where_off_by_one", CH1, "ex7_where_is_max", WHERE_OFF_BY_ONE),
    _cheat("hidden", "times_table_off", CH5, "ex1_times_table", TIMES_TABLE_OFF),
    _cheat("hidden", "offset_2d_only", CH1, "ex2_element_offset", OFFSET_2D_ONLY),
    # odd observations and outputs
    _cheat("odd", "publishes_bad_payload", CH1, "ex3_ensemble_predict", PUBLISHES_BAD_PAYLOAD),
    _cheat("odd", "publishes_bad_record", CH1, "ex1_checkerboard", PUBLISHES_BAD_RECORD),
    _cheat("odd", "structured_scalar", CH8, "ex5_steps_per_epoch", STRUCTURED_SCALAR),
    _cheat("odd", "huge_meta_tensor", CH5, "ex6_pairwise_sq_dists", HUGE_META),
    # every tensor of the notebook is sent as the overflowing meta tensor: the other tensor tests fail too
    _cheat("odd", "meta_overflow_encoder", CH5, "ex1_times_table", SOLVED[CH5]["ex1_times_table"],
           META_OVERFLOW_ENCODER, rest_full=False),
    Sub("odd", "wrong_output_types", CH8, first=WRONG_OUTPUT_TYPES, full=True),
    # names
    Sub("names", '=HYPERLINK("http:x","y")', CH1, full=True),  # a folder name cannot hold "/"
    Sub("names", "@SUM(1+1)", CH5, full=True),
    *(Sub("names", folder, ch, full=True) for folder in ("Zzz Victim Perfect", "zzz_victim_perfect") for ch in (CH1, CH8)),
    # honest students
    *(Sub("honest", "honest", ch, full=True) for ch in CHAPTERS),
]
HIDDEN_FOLDER = ".hidden_student"
BY_KEY = {(s.folder, s.chapter): s for s in CORPUS}
FOLDERS = sorted({s.folder for s in CORPUS})
CHEATS = [s for s in CORPUS if s.target]
FULL = [s for s in CORPUS if s.full]


def _key(s: Sub) -> str:
    return f"{s.folder}/{s.chapter}"


@dataclass
class Batch:
    reports: dict[tuple[str, str], object]  # (folder, chapter) -> Report
    all_reports: list
    work: Path
    pages: list[Path]
    csvs: list[Path]
    report_dir: Path
    errors: dict[str, str]


@pytest.fixture(scope="module")
def batches(tmp_path_factory, grade_batch):
    """The corpus graded once per engine, then its pages, CSVs and class report: engine -> Batch."""
    subs = tmp_path_factory.mktemp("edges-subs")
    for s in CORPUS:
        path = subs / s.folder / s.chapter / project.source_notebook(s.chapter).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(s.notebook()))
    hidden = subs / HIDDEN_FOLDER / CH1 / project.source_notebook(CH1).name
    hidden.parent.mkdir(parents=True)
    hidden.write_text(json.dumps(samples.make_submission(CH1, dict.fromkeys(samples.answer_ids(CH1), samples.SOLUTION))))
    out = {}
    for engine in ENGINES:
        work = tmp_path_factory.mktemp(f"edges-work-{engine}")
        errors: dict[str, str] = {}
        reports, pages, csvs = [], [], []
        try:
            reports = grade_batch(subs, work, jobs=4, engine=engine, cell_timeout=20)
        except Exception as exc:  # noqa: BLE001 - the test says which stage stopped
            errors["grade"] = f"{type(exc).__name__}: {exc}"
        else:
            pages, csvs = _pages_and_exports(work, errors)
        keyed = {(r.name or r.student, r.chapter): r for r in reports}
        out[engine] = Batch(keyed, reports, work, pages, csvs, work / "report", errors)
    return out


def _pages_and_exports(work: Path, errors: dict[str, str]) -> tuple[list[Path], list[Path]]:
    """What ``course feedback``, ``course export`` and ``course report`` write; a stage that
    raises is noted in ``errors``."""
    db = Workspace(work).default_db_url()
    pages: list[Path] = []
    csvs: list[Path] = []
    for stage, run in (
        ("feedback", lambda: pages.extend(feedback.main(work))),
        ("grades csv", lambda: csvs.append(export.write_grades_csv(db, work / "course-grades.csv", workdir=work))),
        ("results csv", lambda: csvs.append(export.write_results_csv(work, db, work / "results.csv"))),
        ("report", lambda: report.main(work, db_url=db)),
    ):
        try:
            run()
        except Exception as exc:  # noqa: BLE001
            errors[stage] = f"{type(exc).__name__}: {exc}"
    return pages, csvs


@pytest.fixture(params=ENGINES)
def graded(request, batches) -> Batch:
    batch = batches[request.param]
    if "grade" in batch.errors:
        pytest.fail(f"the batch did not complete: {batch.errors['grade']}")
    return batch


def _tests(report) -> dict[str, dict]:
    return {t["grade_id"]: t for t in report.tests}


def _reasons(batch: Batch) -> list[tuple[str, str]]:
    """(where, text) of every reason and message the grader wrote."""
    out = []
    for r in batch.all_reports:
        where = f"{r.name or r.student}/{r.chapter}"
        if r.message:
            out.append((where, r.message))
        out += [(f"{where}:{t['grade_id']}", t.get("reason") or "") for t in r.tests]
    return out


def _csv_cells(batch: Batch) -> list[tuple[str, str]]:
    return [(p.name, c) for p in batch.csvs for row in csv.reader(p.open(encoding="utf-8")) for c in row]


# ---------------------------------------------------------------- the corpus


def test_the_corpus_covers_every_class_on_every_chapter():
    assert len(CORPUS) >= 30
    kinds: dict[str, set[str]] = {}
    for s in CORPUS:
        kinds.setdefault(s.kind, set()).add(s.chapter)
    assert {k: len([s for s in CORPUS if s.kind == k]) >= 3 for k in kinds} == dict.fromkeys(kinds, True)
    for kind in ("forged", "leak", "hidden", "odd"):
        assert kinds[kind] == set(CHAPTERS), (kind, kinds[kind])
    for s in CHEATS:  # every answer but the target is the solution's
        assert set(s.answers) == {s.target}


# ---------------------------------------------------------------- the batch


def test_every_stage_completes(batches):
    assert {e: b.errors for e, b in batches.items()} == {e: {} for e in ENGINES}


def test_every_folder_has_a_row(graded):
    missing = [k for k in BY_KEY if k not in graded.reports]
    assert not missing, missing
    # an observation nothing decodes may cost its submission an error status; nothing else may
    not_graded = {_key(s): (r.status, r.message) for s in CORPUS
                  if (r := graded.reports[(s.folder, s.chapter)]).status
                  not in (("graded", "error") if s.kind == "odd" else ("graded",))}
    assert not not_graded, not_graded
    for s in CORPUS:
        assert len(graded.reports[(s.folder, s.chapter)].tests) == len(samples.answer_ids(s.chapter)), _key(s)


def test_the_hidden_folder_gets_a_status_row(graded):
    rows = [r for r in graded.all_reports if r.student == HIDDEN_FOLDER or r.name == HIDDEN_FOLDER]
    assert rows and all(r.status == "skipped" and r.message for r in rows), rows


@pytest.mark.parametrize("key", [_key(s) for s in FULL])
def test_honest_notebooks_score_full(graded, key):
    r = graded.reports[tuple(key.split("/"))]
    failed = {gid: (t["status"], t.get("reason")) for gid, t in _tests(r).items() if t["status"] != "passed"}
    assert r.score == r.max_score == 100 and not failed, (r.score, failed)


def test_two_names_with_one_id_are_two_students(graded):
    a, b = (graded.reports[(f, CH1)] for f in ("Zzz Victim Perfect", "zzz_victim_perfect"))
    assert a.student != b.student
    rows = list(csv.DictReader(graded.csvs[0].open(encoding="utf-8")))
    ids = [row["student_id"] for row in rows]
    assert len(ids) == len(set(ids)) == len(FOLDERS), ids
    for r in (a, b):
        (row,) = [row for row in rows if row["student_id"] == r.student]
        assert float(row[CH1]) == float(row[CH8]) == 100, row


# ---------------------------------------------------------------- each cheat's test


@pytest.mark.parametrize("key", [_key(s) for s in CHEATS])
def test_the_targeted_test_scores_nothing(graded, key):
    s = BY_KEY[tuple(key.split("/"))]
    t = _tests(graded.reports[(s.folder, s.chapter)])[f"test_{s.target}"]
    assert t["points"] == 0 and t["status"] != "passed", t


@pytest.mark.parametrize("key", [_key(s) for s in CHEATS if s.rest_full])
def test_the_other_tests_of_a_cheat_score_full(graded, key):
    """Except a ruled exercise after the cheat's own ``exec``: exec may define any name an answer
    reaches, so that rule cannot be read, and the reason says so (docs/grading.md)."""
    s = BY_KEY[tuple(key.split("/"))]
    others = {gid: (t["status"], t.get("reason")) for gid, t in _tests(graded.reports[(s.folder, s.chapter)]).items()
              if gid != f"test_{s.target}" and t["status"] != "passed"}
    if "exec(" in s.first:
        others = {gid: (status, reason) for gid, (status, reason) in others.items()
                  if not (reason or "").startswith("the answer cannot be read: it runs exec, which may define anything")}
    assert not others, others


def test_a_status_is_the_engines_word(graded):
    named = _tests(graded.reports[("named_like_the_timeout", CH1)])["test_ex2_element_offset"]
    assert named["status"] == "failed", named
    looped = _tests(graded.reports[("fake_timeout_line_then_loop", CH8)])["test_ex2_make_mlp"]
    assert looped["status"] == "timed out", looped


def test_both_engines_give_the_same_points(batches):
    fork, kernel = (batches[e] for e in ENGINES)
    differ = {}
    for key in BY_KEY:
        if key in fork.reports and key in kernel.reports:
            a = [(t["grade_id"], t["points"]) for t in fork.reports[key].tests]
            b = [(t["grade_id"], t["points"]) for t in kernel.reports[key].tests]
            if a != b:
                differ["/".join(key)] = (a, b)
    assert not differ, differ


# ---------------------------------------------------------------- what leaves the grader


def test_no_reason_carries_learner_text(graded):
    leaked = [(w, text) for w, text in _reasons(graded) if MARK in text or "CellTimeoutError" in text]
    assert not leaked, leaked


def test_no_csv_cell_or_report_file_carries_learner_text(graded):
    leaked = [(f, c) for f, c in _csv_cells(graded) if MARK in c or "CellTimeoutError" in c]
    files = [p for p in graded.report_dir.rglob("*") if p.is_file()]
    assert files, "the class report was written"
    leaked += [(p.name, "...") for p in files if MARK in p.read_text(encoding="utf-8", errors="replace")]
    assert not leaked, leaked


def test_no_page_summary_or_verdict_carries_learner_text(graded):
    assert len(graded.pages) >= len(CORPUS)
    leaked = []
    for page in graded.pages:
        text = page.read_text(encoding="utf-8")
        grader_parts = [text.split('<div class="cell">', 1)[0], *re.findall(r'<pre class="verdict">(.*?)</pre>', text, re.S)]
        leaked += [(page.parts[-3], html.unescape(p)[:200]) for p in grader_parts if MARK in html.unescape(p)]
    assert not leaked, leaked


def test_numbers_the_learner_sent_are_capped(graded):
    long = [(w, text[:120]) for w, text in _reasons(graded) + _csv_cells(graded) if re.search(r"\d{41}", text)]
    assert not long, long


def test_no_hidden_reason_shows_an_expected_value(graded):
    texts = [(w, t) for w, t in _reasons(graded) if "hidden input" in t]
    texts += [(f, c) for f, c in _csv_cells(graded) if "hidden input" in c]
    shown = [(w, t) for w, t in texts if re.search(r"expected -?\d", t)]
    assert not shown, shown
    for folder, chapter in [(s.folder, s.chapter) for s in CHEATS if s.kind == "hidden"]:
        s = BY_KEY[(folder, chapter)]
        reason = _tests(graded.reports[(folder, chapter)])[f"test_{s.target}"].get("reason", "")
        assert "hidden input" in reason, (folder, reason)  # the hidden part was reached


def test_no_csv_cell_begins_with_a_formula_character(graded):
    def number(cell: str) -> bool:
        try:
            float(cell)
        except ValueError:
            return False
        return True

    bad = [(f, c) for f, c in _csv_cells(graded) if c.startswith(("=", "+", "-", "@")) and not number(c)]
    assert not bad, bad
    names = [row["student_name"] for row in csv.DictReader(graded.csvs[0].open(encoding="utf-8"))]
    for folder in ('=HYPERLINK("http:x","y")', "@SUM(1+1)"):
        assert any(n.endswith(folder) for n in names), (folder, names)
