"""Catching submissions that tamper with the checks instead of solving the exercise.

Two layers. A static scan of the learner's cells finds code that patches torch, builtins
or the checking helpers, or that reaches for files outside its directory. A runtime guard,
installed in the kernel before any learner code runs, remembers the objects the tests rely
on and is asked, before every test cell, whether any of them was replaced. Either finding
zeroes the tests that come after it and flags the submission in the report. Neither layer
is a proof against a determined attacker in the same process; the sandbox (see
:mod:`grader.engines.isolation.sandbox`) is what protects files and the network.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

#: (pattern, what it means) — searched in the learner's code, comments and strings removed
#: except for path-like string literals, which are searched separately.
CODE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\btorch(?!\.backends\.)(\.\w+)+\s*=(?!=)", "assigns to an attribute of torch"),
    (r"\b(np|numpy)(\.\w+)+\s*=(?!=)", "assigns to an attribute of numpy"),
    (r"\bsetattr\s*\(", "calls setattr (monkey-patching)"),
    (r"\b__builtins__\b|\bimport\s+builtins\b|\bfrom\s+builtins\b|\bbuiltins\.", "touches builtins"),
    (r"\b(cu|course_utils|checks)(\.\w+)+\s*=(?!=)", "replaces a course_utils checking helper"),
    (r"^\s*def\s+(check_tensor|check_value|check_shape|raises)\s*\(", "redefines a checking helper"),
    (r"^\s*(check_tensor|check_value|check_shape|raises)\s*=(?!=)", "redefines a checking helper"),
    (r"__course_guard", "touches the grader's guard"),
    (r"\bsys\.modules\b", "touches sys.modules"),
    (r"\bsys\.(displayhook|excepthook|settrace|setprofile|stdout|stderr)\s*=(?!=)", "replaces a sys hook"),
    (r"\bgc\.(get_referrers|get_referents|get_objects)\b", "walks the garbage collector's object graph"),
    (r"\b(sys\._getframe|inspect\.currentframe|f_back|f_globals|f_locals)\b", "inspects interpreter frames"),
    (r"\.__class__\s*=(?!=)|\b__eq__\s*=(?!=)|\bdef\s+__eq__\s*\(", "overrides equality"),
    (r"\bclass\s+\w+\s*\(\s*(torch\.)?Tensor\s*\)|\.as_subclass\s*\(", "makes a tensor subclass"),
)

#: string literals that look like paths outside the kernel's working directory
PATH_LITERAL = re.compile(r"""(?P<q>['"])(?P<path>(/[A-Za-z0-9_.-]+|~|\.\./)[^'"\n]*)(?P=q)""")
PRIVATE_NAMES = re.compile(r"""['"][^'"\n]*(gradebook|autograded|submitted|solutions|course-work)[^'"\n]*['"]""")

#: where Colab keeps a learner's files (``/content``, a mounted Drive): never a finding
COLAB_ROOT = "/content"

_COMMENT = re.compile(r"#[^\n]*")


@dataclass(frozen=True)
class Finding:
    """One suspicious thing in a cell."""

    cell_index: int
    reason: str
    excerpt: str


def scan(source: str, cell_index: int = 0) -> list[Finding]:
    """Suspicious constructs in one cell's source."""
    findings = []
    code = _COMMENT.sub("", source)
    for pattern, reason in CODE_PATTERNS:
        m = re.search(pattern, code, flags=re.MULTILINE)
        if m:
            findings.append(Finding(cell_index, reason, _line_of(code, m.start())))
    for m in PATH_LITERAL.finditer(code):
        path = m.group("path")
        if path == COLAB_ROOT or path.startswith(COLAB_ROOT + "/"):  # Colab's own folders: what its users write
            continue
        findings.append(Finding(cell_index, "uses a path outside its working directory", m.group(0)[:60]))
        break
    m = PRIVATE_NAMES.search(code)
    if m:
        findings.append(Finding(cell_index, "names the grader's private files", m.group(0)[:60]))
    machinery = _touches_machinery(source)
    if machinery is not None and not any(f.reason.startswith("replaces a course_utils") for f in findings):
        findings.append(Finding(cell_index, "replaces part of course_utils' observing and checking machinery",
                                _line_of(source, _offset(source, machinery))))
    return findings


def _offset(source: str, lineno: int) -> int:
    lines = source.splitlines(keepends=True)
    return sum(len(line) for line in lines[: max(0, lineno - 1)])


def _touches_machinery(source: str) -> int | None:
    """The line where a cell rebinds, deletes or reaches by dynamic code anything of ``course_utils``
    (under whatever name it imported it), or None. Calling its helpers is what a notebook does and
    is never a finding."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "course_utils"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "course_utils":
            aliases |= {a.asname or a.name for a in node.names}

    def rooted(expr: ast.AST) -> bool:  # course_utils.x.y, cu.emit, observe.emit, check_tensor.__code__
        while isinstance(expr, ast.Attribute | ast.Subscript):
            expr = expr.value
        return isinstance(expr, ast.Name) and expr.id in aliases

    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        if any(isinstance(t, ast.Attribute | ast.Subscript) and rooted(t) for t in targets):
            return node.lineno
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            first = node.args[0] if node.args else None
            if name in ("setattr", "delattr", "vars") and first is not None and rooted(first):
                return node.lineno
            if name in ("import_module", "__import__") and isinstance(first, ast.Constant) \
                    and str(first.value).startswith("course_utils"):
                return node.lineno
        if isinstance(node, ast.Attribute) and node.attr == "__dict__" and rooted(node.value):
            return node.lineno
    return None


def _line_of(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end != -1 else None].strip()[:80]


#: Modules imported before any learner code, by a fork server and by every kernel alike, so
#: that an import hook a learner installs meets the same modules under both engines. (A fork
#: server also imports what the batch's chapters ask for in their grading.toml, ``preload``:
#: modules their cells import anyway, which a kernel imports when its cells do.)
#: ``torch.fx.experimental.symbolic_shapes`` (and sympy with it) is what the first
#: ``torch.broadcast_shapes`` imports: 0.5 s, paid once by a server instead of by every child.
PRELOAD = (
    "numpy", "torch", "matplotlib", "matplotlib.pyplot", "IPython", "IPython.core.interactiveshell",
    "course_utils", "course_utils.checks", "course_utils.observe", "course_utils.plots",
    "hypothesis", "hypothesis.strategies", "torch.fx.experimental.symbolic_shapes",
    # what IPython, torch and course_utils import lazily in the cells of most chapters
    "bdb", "IPython.core.logger", "torch._subclasses.schema_check_mode",
    "course_utils.pictures", "course_utils.graph", "course_utils.data", "course_utils.bits",
    "course_utils.arrows", "course_utils.broadcast_grad", "course_utils.timeline",
)

#: Run after the imports and before anything draws, by a fork server and in every kernel and
#: fork child alike: the hidden tests' inputs must not depend on what else the process loaded.
#: Hypothesis (>= 6.131) now and then draws a constant found in the source of a "local" module
#: loaded in the process (any file outside site-packages and the standard library): a module a
#: learner wrote with ``%%writefile`` and imported, or the grader's own modules in a fork child.
#: Then a perfect answer met other inputs than the reference run's and lost the test. Only
#: hypothesis's own global constants stay in the pool; older versions have no such pool.
FIXED_INPUTS = """
def _course_fixed_inputs():
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return
    if hasattr(providers, "_get_local_constants"):
        none = providers.Constants()
        providers._get_local_constants = lambda: none
        getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", {}).clear()
_course_fixed_inputs()
del _course_fixed_inputs
"""

#: Run after the imports, by a fork server and by every kernel alike: what a process pays the
#: first time it runs the tests' machinery, paid here instead of in the learner's cells -- a
#: server pays it once for all its children (~35 ms of each chapter-01 child). Hypothesis's first
#: test in a process pays ~0.3 s (a full garbage collection to register random states) and each
#: kind of strategy its first draw; the checks and the observation encoder their first tensor of
#: each dtype; torch its first call of each common op.
#: It runs in a function of its own and prints nothing; nothing it leaves behind depends on the
#: learner, and the seeds are reset right after it.
WARM_UP = """
def _course_warm_up():
    import contextlib, io
    import torch
    from hypothesis import given, settings, strategies as st
    import course_utils.checks as checks
    import course_utils.observe as observe
    with contextlib.redirect_stdout(io.StringIO()):
        for dtype in (torch.float32, torch.float64, torch.int64, torch.bool):
            t = torch.arange(12).reshape(3, 4).to(dtype)
            checks.check_tensor(t, t.clone(), name="warm-up")
            checks.check_shape(t, (3, 4), name="warm-up")
            observe.encode(t), observe.encode(t.T), observe.encode(t[:, 1])
        checks.check_value(1.5, 1.5, name="warm-up")
        x = torch.randn(4, 3)
        (x @ x.T).sum(dim=1, keepdim=True).argmax(), torch.stack([x, x]).mean(0), torch.cat([x, x], 1)
        torch.allclose(x, x), torch.einsum("ij,kj->ik", x, x), torch.bmm(x[None], x.T[None]), x.max(dim=1)
    @settings(max_examples=5, derandomize=True, database=None, deadline=None)
    @given(st.integers(1, 5), st.lists(st.integers(1, 4), min_size=0, max_size=3),
           st.sampled_from([torch.float32, torch.float64]), st.floats(-10, 10, allow_nan=False), st.booleans(),
           st.one_of(st.integers(0, 3), st.floats(0, 1)))
    def warm(a, shape, dtype, value, flag, either):
        torch.zeros(shape or [1], dtype=dtype) + value
    warm()
try:
    _course_warm_up()
except Exception:
    pass
del _course_warm_up
"""

#: What the guard watches: (module expression, attribute names). Evaluated in the kernel.
WATCHED = {
    "builtins": [
        "isinstance", "issubclass", "type", "len", "abs", "all", "any", "sum", "min", "max",
        "float", "int", "bool", "str", "repr", "getattr", "hasattr", "range", "zip", "print",
        "AssertionError", "Exception", "__import__",
    ],
    # not manual_seed: importing torch._dynamo (the first optimizer, some meta-device ops)
    # legitimately wraps it
    "torch": ["allclose", "equal", "isclose", "eq", "ne", "all", "any", "tensor", "is_tensor"],
    "torch.Tensor": [
        "__eq__", "__ne__", "__bool__", "__float__", "__int__", "__len__", "eq", "equal",
        "allclose", "all", "any", "item", "tolist", "dtype", "shape", "device",
    ],
    "torch.testing": ["assert_close"],
    "numpy": ["allclose", "array_equal", "isclose"],
    "math": ["isclose"],
    "course_utils": ["check_tensor", "check_value", "check_shape", "raises", "AnswerError"],
    "course_utils.checks": [
        "check_tensor", "check_value", "check_shape", "raises", "AnswerError",
        "_isclose", "_equal", "_Tensor", "_tensor_type", "_nonzero", "_logical_not", "_check_type",
    ],
}


def new_guard_name() -> str:
    """A name for the guard no submission can know in advance."""
    return f"__course_guard_{secrets.token_hex(6)}__"


def install_code(name: str, *, warm_up: bool = True) -> str:
    """Code run in a fresh kernel, before any learner code: remember what the tests rely on.

    ``warm_up=False`` leaves :data:`WARM_UP` out: a fork server ran it before forking, and its
    children start with what it warmed.
    """
    return f'''
def _course_guard_factory(watched):
    import importlib, sys
    def resolve(path):
        head, *rest = path.split(".")
        obj = importlib.import_module(head)
        for part in rest:
            try:
                obj = importlib.import_module(obj.__name__ + "." + part)
            except Exception:
                obj = getattr(obj, part)
        return obj
    original = {{}}
    for path, names in watched.items():
        owner = resolve(path)
        for attr in names:
            original[(path, attr)] = (owner, getattr(owner, attr))
    def check(nonce):
        changed = []
        for (path, attr), (owner, obj) in original.items():
            if getattr(owner, attr, None) is not obj:
                changed.append(path + "." + attr)
            mod = sys.modules.get(path)
            if mod is not None and "." not in path and mod is not owner:
                changed.append("sys.modules[" + repr(path) + "]")
        return ("ok:" if not changed else "tampered:") + nonce + ":" + ",".join(sorted(set(changed)))
    return check
import sys as _course_sys
setattr(_course_sys, {name!r}, _course_guard_factory({WATCHED!r}))
del _course_sys, _course_guard_factory
import importlib as _il
for _m in {PRELOAD!r}:
    try:
        _il.import_module(_m)
    except Exception:
        pass
del _il, _m
{FIXED_INPUTS}
{WARM_UP if warm_up else ""}
import random as _r, numpy as _np, torch as _t
_r.seed(0); _np.random.seed(0); _t.manual_seed(0)
del _r, _np, _t
'''


def check_code(name: str, nonce: str) -> str:
    """Code whose result (the cell's ``execute_result``) says whether anything was replaced."""
    return f"__import__('sys').{name}({nonce!r})"


def parse_check(text: str | None, nonce: str) -> tuple[bool, str]:
    """(clean, what changed) from the guard's answer; a missing or forged answer is tampering."""
    if not text:
        return False, "the grader's guard did not answer (it was removed or replaced)"
    value = text.strip().strip("'\"")
    if value.startswith(f"ok:{nonce}:"):
        return True, ""
    if value.startswith(f"tampered:{nonce}:"):
        return False, "replaced " + value.split(":", 2)[2]
    return False, "the grader's guard gave a forged answer"
