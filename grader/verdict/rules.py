"""Rules about *how* an answer is written, checked in the coordinator on the answer's source.

Some statements set a rule that no value can show: "no loops", "integer arithmetic only",
"``torch.softmax`` is switched off". Patching torch inside the learner's process enforces
nothing (an answer that bound ``torch.softmax`` before the test ran never meets the patch), and
a yes/no sent from there can be faked. So the rule is read here, from the code the graded
function reaches: its definition in the learner's notebook, and, transitively, every top-level
definition, import and assignment of another learner cell whose name it uses, and every other
binding of the graded name itself (``softmax = torch.softmax`` after the ``def``). A scratch cell
that calls ``torch.softmax`` to compare never counts against the answer; a helper the answer
calls does.

A chapter declares its rules in ``solutions/<chapter>/grading.toml``, by answer cell::

    [rules.ex5_softmax]
    forbid = ["softmax", "log_softmax", "logsumexp"]   # attributes and imported names
    allow = ["arange", "where", "shape"]                # or: only these attributes (a puzzle's primitives)
    no_loops = true                                     # for, while, comprehensions
    integer_only = true                                 # no /, no float literal, no float()
    why = "softmax must be built from exp, max and sum"

``allow`` turns the list around: every attribute the reached code uses (``torch.arange``,
``x.shape``, ``x.sum()``) must be among them, and nothing is imported but ``torch``. A rule with
``forbid`` or ``allow`` also refuses dynamic code in the reached code (``getattr`` with a
computed name, ``eval``, ``exec``, ``__import__``, ``importlib``, ``globals()``, ``vars()``,
``__dict__``, ``sys.modules``): the grader could not tell which function it reaches.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from nbformat import NotebookNode

from grader import cells

DYNAMIC_CALLS = frozenset({"getattr", "eval", "exec", "compile", "__import__", "globals", "vars", "locals",
                           "attrgetter", "methodcaller"})
DYNAMIC_NAMES = frozenset({"importlib", "__dict__", "modules", "__builtins__", "__getattribute__",
                           # a type hint is not read as code (:func:`_hint`): nothing may read it back
                           "__annotations__", "__annotate__", "__signature__", "get_type_hints", "get_annotations",
                           "signature", "annotation", "inspect"})
LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
FLOAT_CALLS = frozenset({"float", "ceil", "floor", "true_divide", "divide", "div", "trunc", "round"})


@dataclass(frozen=True)
class Rule:
    """How the answer cell ``answer`` must be written (see the module docstring)."""

    answer: str
    functions: tuple[str, ...]
    forbid: frozenset[str] = frozenset()
    allow: frozenset[str] | None = None
    no_loops: bool = False
    integer_only: bool = False
    why: str = ""
    extra: dict = field(default_factory=dict, compare=False)


def from_settings(settings: dict, source_nb: NotebookNode) -> dict[str, Rule]:
    """Test grade_id -> the :class:`Rule` of its exercise, from a chapter's ``grading.toml`` data.

    The graded functions are those the solution's answer cell defines at its top level.
    """
    declared = settings.get("rules", {})
    if not isinstance(declared, dict):
        return {}
    out: dict[str, Rule] = {}
    answer = None
    for cell in source_nb.cells:
        if cells.is_solution(cell):
            answer = cell
        elif cells.is_test(cell) and answer is not None:
            spec = declared.get(cells.grade_id(answer) or "")
            if isinstance(spec, dict):
                out[cells.grade_id(cell)] = Rule(
                    answer=cells.grade_id(answer), functions=tuple(_defined(cells.source_text(answer))),
                    forbid=frozenset(str(n) for n in spec.get("forbid", [])), no_loops=bool(spec.get("no_loops")),
                    allow=frozenset(str(n) for n in spec["allow"]) if isinstance(spec.get("allow"), list) else None,
                    integer_only=bool(spec.get("integer_only")), why=str(spec.get("why", "")))
            answer = None
    return out


def _defined(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]


def _bindings(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """Top-level statements of a cell by each name they bind."""
    out: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        for name in names:
            out.setdefault(name, []).append(node)
    return out


def _parse(source: str) -> ast.Module | None:
    """A cell as Python sees it once IPython turned its magics (``%time``, ``!ls``) into calls."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - parsed as written then
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None  # it never ran: it defined nothing


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
          ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _hint(node: ast.AST | None) -> bool:
    """Whether an annotation is a plain type hint (``torch.Tensor``, ``np.ndarray``, ``int | None``,
    ``list[int]``, ``"torch.Tensor"``): names and attributes looked up, never called. It computes
    nothing, so a puzzle's list of primitives does not read it (the stubs themselves write
    ``-> torch.Tensor``), and the names in it pull in no other code; nothing may read it back
    (:data:`DYNAMIC_NAMES`, and a puzzle allows no other attribute)."""
    if node is None or isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Constant):
        return node.value is None or node.value is Ellipsis or isinstance(node.value, str)
    if isinstance(node, ast.Attribute):  # a chain of names: `torch.Tensor`, never `f().x`
        return isinstance(node.value, ast.Name | ast.Attribute) and _hint(node.value)
    if isinstance(node, ast.BinOp):  # `int | None`
        return isinstance(node.op, ast.BitOr) and _hint(node.left) and _hint(node.right)
    parts = [node.value, node.slice] if isinstance(node, ast.Subscript) else getattr(node, "elts", None)
    return isinstance(node, ast.Subscript | ast.Tuple | ast.List) and all(_hint(p) for p in parts)


def _annotations(node: ast.AST) -> list[ast.AST]:
    """The annotations ``node`` holds as children (an argument's, a def's return, an annotated assignment's)."""
    found = getattr(node, "annotation" if isinstance(node, ast.arg | ast.AnnAssign) else "returns", None)
    return [found] if isinstance(found, ast.expr) else []


def _in_hints(top: ast.AST) -> set[int]:
    """The ids of the nodes of ``top`` that lie in a plain type hint (:func:`_hint`)."""
    return {id(n) for a in ast.walk(top) for h in _annotations(a) if _hint(h) for n in ast.walk(h)}


def _own(nodes: list[ast.AST]) -> list[ast.AST]:
    """The nodes of one scope: ``nodes`` and what they hold, not the bodies of the scopes nested in
    them (a nested function's decorators, defaults and annotations are evaluated here: kept, but a
    plain type hint computes nothing: left out)."""
    out, todo = [], list(nodes)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            todo += [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            todo += [a for a in [*(arg.annotation for arg in _args(node.args)), node.returns] if a and not _hint(a)]
        elif isinstance(node, ast.AnnAssign):
            todo += [n for n in (node.target, node.value) if n is not None]
            todo += [a for a in _annotations(node) if not _hint(a)]
        elif isinstance(node, ast.Lambda):
            todo += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
        elif isinstance(node, ast.ClassDef):
            todo += [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            todo.append(node.generators[0].iter)  # the first iterable is evaluated outside
        else:
            todo += list(ast.iter_child_nodes(node))
    return out


def _args(args: ast.arguments) -> list[ast.arg]:
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *([args.vararg] if args.vararg else []),
            *([args.kwarg] if args.kwarg else [])]


def _nested(node: ast.AST) -> list[ast.AST]:
    """The scopes nested directly in ``node``'s own scope."""
    inside = node.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else [node]
    return [n for top in inside for n in _own([top]) if isinstance(n, SCOPES) and n is not node]


def free_names(node: ast.AST) -> set[str]:
    """The names a function, class, comprehension or module-level statement reads from the cell's
    globals: read in its scope or a nested one, and bound in none of those scopes on the way."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        body = node.body if isinstance(node.body, list) else [node.body]
        mine = [n for top in body for n in _own([top])]
        bound = {a.arg for a in _args(node.args)}
    elif isinstance(node, ast.ClassDef):
        mine, bound = [n for top in node.body for n in _own([top])], set()
    elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        parts = [node.elt] if not isinstance(node, ast.DictComp) else [node.key, node.value]
        parts += [g.target for g in node.generators] + [c for g in node.generators for c in g.ifs]
        parts += [g.iter for g in node.generators[1:]]
        mine, bound = [n for p in parts for n in _own([p])], set()
    else:  # a module-level statement: whatever it reads is global
        return {n.id for n in _own([node]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} | {
            name for scope in (s for s in _own([node]) if isinstance(s, SCOPES)) for name in free_names(scope)}
    declared = {name for n in mine if isinstance(n, ast.Global | ast.Nonlocal) for name in n.names}
    bound |= {n.id for n in mine if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del)}
    bound |= {(a.asname or a.name).split(".")[0] for n in mine if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
    bound |= {n.name for n in mine if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n is not node}
    bound -= declared
    reads = {n.id for n in mine if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for scope in (n for n in mine if isinstance(n, SCOPES) and n is not node):
        reads |= free_names(scope)
    return reads - bound


def _trees(nb: NotebookNode) -> list[tuple[str | None, ast.Module]]:
    """(grade_id, parsed source) of every code cell but the tests, in notebook order."""
    out = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code" or cells.is_test(cell):
            continue
        tree = _parse(cells.source_text(cell))
        if tree is not None:
            out.append((cells.grade_id(cell), tree))
    return out


def reached(rule: Rule, trees: list[ast.Module]) -> tuple[list[ast.AST], set[str]]:
    """The learner's code the graded functions of ``rule`` reach in the cells ``trees`` (their
    definitions first: every binding of a graded name, then the top-level bindings of every global
    name they read, in turn), and the global names it followed. A name that nothing binds but a
    ``from ... import *`` (and no builtin) pulls in every such import."""
    starts: list[ast.stmt] = []  # every binding of a graded name: a later `softmax = torch.softmax` counts
    others: dict[str, list[ast.stmt]] = {}
    for tree in trees:
        for name, nodes in _bindings(tree).items():
            (starts if name in rule.functions else others.setdefault(name, [])).extend(nodes)
    seen: list[ast.AST] = []
    todo, names = list(starts), set(rule.functions)
    while todo:
        node = todo.pop(0)
        if any(node is s for s in seen):
            continue
        seen.append(node)
        outer = {n.id for n in _own([node]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        for name in sorted((free_names(node) | outer) - names):  # outer: a def's defaults and decorators
            names.add(name)
            todo += others.get(name, [] if name in _BUILTINS else others.get("*", []))
    return seen, names


_BUILTINS = frozenset(dir(__import__("builtins")))


def _only_reached(top: ast.AST, names: set[str]) -> ast.AST | None:
    """A reached top-level import with only the names the answer reached (``from torch import nn,
    optim`` reached for ``nn`` is no use of ``optim``); None when it binds none of them."""
    if not isinstance(top, ast.Import | ast.ImportFrom):
        return top
    kept = [a for a in top.names if a.name == "*" or (a.asname or a.name).split(".")[0] in names]
    if not kept:
        return None
    copy = type(top)(**{**{f: getattr(top, f) for f in top._fields}, "names": kept})
    return ast.copy_location(copy, top)


def violation(nb: NotebookNode, rule: Rule) -> str | None:
    """Why the answer breaks ``rule`` (a sentence of the grader's own, with a line number), or None."""
    parsed = _trees(nb)
    in_answer = {id(top) for gid, tree in parsed if gid == rule.answer for top in tree.body}
    found, names = reached(rule, [tree for _, tree in parsed])
    for top in sorted(found, key=lambda top: id(top) not in in_answer):  # the answer cell's own lines first
        hints = _in_hints(top)
        checked = _only_reached(top, names)
        for node in ast.walk(checked) if checked is not None else ():
            why = _breaks(node, rule, hint=id(node) in hints)
            if why:
                line = getattr(node, "lineno", None)
                cell = "your answer cell" if id(top) in in_answer else "another code cell"
                where = f" (line {line} of {cell})" if line else ""
                reason = rule.why or "the statement sets this rule"
                return f"the answer {why}{where}: {reason}."
    return None


def _breaks(node: ast.AST, rule: Rule, *, hint: bool = False) -> str | None:
    """Why ``node`` breaks ``rule``, or None. In a plain type hint (``hint``) a puzzle's list of
    allowed primitives does not apply: ``-> torch.Tensor`` computes nothing; a switched-off name
    is refused even there."""
    if (rule.forbid or rule.allow is not None) and isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
        return "takes names from a `from ... import *`, which this exercise cannot check"
    if rule.forbid:
        name = node.attr if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.ImportFrom):
            name = next((a.name for a in node.names if a.name in rule.forbid), None)
        if name in rule.forbid:
            return f"uses {name}, which this exercise switches off"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in rule.forbid:
            return f"names {node.value} in a string, which this exercise switches off"
        if _dynamic(node):
            return "reaches functions by dynamic code (getattr, eval, importlib, ...), which this exercise cannot check"
    if rule.allow is not None and not hint:
        if isinstance(node, ast.Attribute) and node.attr not in rule.allow:
            return f"uses .{node.attr}, which is not among this puzzle's allowed primitives ({', '.join(sorted(rule.allow))})"
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m != "torch" for m in modules) or isinstance(node, ast.ImportFrom):
                return "imports a module, but this puzzle allows torch's listed primitives only"
        if _dynamic(node):
            return "reaches functions by dynamic code (getattr, eval, importlib, ...), which this exercise cannot check"
    if rule.no_loops and isinstance(node, LOOPS):
        return "uses a Python loop (for, while or a comprehension), which this exercise rules out"
    if rule.integer_only:
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Div):
            return "divides with /, which gives a float: this exercise asks for integer arithmetic only"
        if isinstance(node, ast.Constant) and type(node.value) is float:
            return "uses a float number, but this exercise asks for integer arithmetic only"
        called = _called(node)
        if called in FLOAT_CALLS:
            return f"calls {called}(), but this exercise asks for integer arithmetic only"
    return None


def _called(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _dynamic(node: ast.AST) -> bool:
    if isinstance(node, ast.Name) and node.id in DYNAMIC_NAMES | DYNAMIC_CALLS - {"getattr"}:
        return True
    if isinstance(node, ast.Attribute) and node.attr in DYNAMIC_NAMES:
        return True
    if isinstance(node, ast.Import | ast.ImportFrom):
        modules = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        return any(m.split(".")[0] in ("importlib", "operator", "builtins", "inspect") for m in modules)
    if _called(node) == "getattr":
        args = node.args
        return len(args) < 2 or not (isinstance(args[1], ast.Constant) and isinstance(args[1].value, str))
    return False
