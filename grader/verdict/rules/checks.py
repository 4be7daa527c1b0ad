"""What in the reached code breaks a rule, or cannot be read: one sentence per finding, with its node."""

from __future__ import annotations

import ast
import functools
from typing import TYPE_CHECKING

from grader.verdict.rules import names as nm
from grader.verdict.rules.bindings import BUILTINS, Bindings, imported
from grader.verdict.rules.reading import annotations

if TYPE_CHECKING:
    from grader.verdict.rules import Rule

LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: calls that compute in floats (by any name: `operator.truediv`, `math.sqrt`, `x.__truediv__`)
FLOAT_CALLS = frozenset({"float", "ceil", "floor", "true_divide", "divide", "div", "trunc", "round", "truediv", "itruediv",
                         "__truediv__", "__rtruediv__", "__itruediv__", "sqrt", "exp", "log", "log2", "log10", "fsum",
                         "mean", "fmod", "hypot", "ldexp", "pow", "fdiv"})
#: generic types a plain hint may subscript or join with `|` (their own code, never the learner's)
SAFE_HINTS = BUILTINS | {"None"}
UNREADABLE = "cannot be read"


class Reader:
    """Reads reached statements against one rule with the notebook's ``found`` bindings."""

    def __init__(self, rule: Rule, found: Bindings, names: set[str], written: frozenset[str]):
        self.rule, self.found, self.names, self.written = rule, found, names, written
        self.named = rule.forbid or rule.allow is not None

    def statement(self, node: ast.stmt) -> tuple[ast.AST, str] | None:
        """The first node of ``node`` (a reached top-level statement) that breaks the rule, and why."""
        for n, hint in _visited(node):
            why = self._hint(n) if hint else None
            why = why or self._node(n, hint=hint)
            if why:
                return n, why
        return None

    def _hint(self, node: ast.AST) -> str | None:
        """An annotation is evaluated when its def runs: a subscript or a `|` of anything but builtins
        and library types runs the learner's code (``__class_getitem__``, a metaclass's ``__or__``)."""
        if isinstance(node, ast.Call | ast.Lambda | ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom):
            return f"{UNREADABLE}: it computes in a type hint"
        operands = [node.value] if isinstance(node, ast.Subscript) else [node.left, node.right] if isinstance(node, ast.BinOp) else []
        for part in operands:
            root = part
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Constant) and root.value is None:
                continue
            if not isinstance(root, ast.Name) or not self._library(root.id):
                return f"{UNREADABLE}: it evaluates a type hint that runs its own code"
        return None

    def _library(self, name: str) -> bool:
        """Whether ``name`` is a builtin or an import of a library's (never the learner's own code)."""
        found = self.found.candidates(name)
        if not found:
            return name in SAFE_HINTS
        return all(isinstance(p.statement.node, ast.Import | ast.ImportFrom)
                   and all(nm.kind(m, self.written) != "own" for m in nm.module_of(p.statement.node)) for p in found)

    def _node(self, node: ast.AST, *, hint: bool) -> str | None:
        rule = self.rule
        if isinstance(node, ast.Import | ast.ImportFrom):
            why = self._import(node)
            if why:
                return why
        if isinstance(node, ast.Attribute | ast.Name):
            why = self._name(node, hint=hint)
            if why:
                return why
        if rule.forbid and isinstance(node, ast.Constant) and isinstance(node.value, str) and nm.family(node.value, rule.forbid):
            return f"names {nm.quote(node.value)} in a string, which this exercise switches off"
        if rule.no_loops:
            why = self._loop(node)
            if why:
                return why
        if rule.integer_only:
            if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Div):
                return "divides with /, which gives a float: this exercise asks for integer arithmetic only"
            if isinstance(node, ast.Constant) and type(node.value) is float:
                return "uses a float number, but this exercise asks for integer arithmetic only"
            called = _called(node)
            if called in FLOAT_CALLS:
                return f"calls {called}(), but this exercise asks for integer arithmetic only"
        return None

    def _import(self, node: ast.Import | ast.ImportFrom) -> str | None:
        rule = self.rule
        if any(a.name == "*" for a in node.names):
            return f"{UNREADABLE}: it takes names from a `from ... import *`"
        for module in nm.module_of(node):
            if nm.kind(module, self.written) == "own":
                return f"{UNREADABLE}: it imports {nm.quote(module)}, a module of its own (neither the standard library nor the course's)"
            if nm.under(nm.canonical(module), nm.DYNAMIC_MODULES):
                return f"{UNREADABLE}: it imports {nm.quote(module)}, which looks functions up by name"
        bound = [nm.canonical(q) for _, q in imported(node)]
        for q in bound:
            why = self._qualified(q)
            if why:
                return why
            if rule.forbid and any(nm.family(part, rule.forbid) for part in q.split(".")):
                return f"uses {nm.quote(q)}, which this exercise switches off"
        if rule.allow is not None and any(q.split(".")[0] != "torch" or "." in q for q in bound):
            return "imports a module, but this puzzle allows torch's listed primitives only"
        return None

    def _qualified(self, q: str) -> str | None:
        rule = self.rule
        if nm.under(q, nm.DYNAMIC_QUALIFIED) or nm.under(q, nm.DYNAMIC_MODULES):
            return f"{UNREADABLE}: it uses {nm.quote(q)}, which looks functions up by name"
        if rule.forbid:
            hit = nm.under(q, frozenset(e for e in rule.forbid if "." in e))
            if hit:
                return f"uses {nm.quote(q)}, which this exercise switches off"
        if self.named and nm.private(q):
            return f"uses {nm.quote(q)}, a private name of the library, which this exercise cannot check"
        return None

    def _name(self, node: ast.Attribute | ast.Name, *, hint: bool) -> str | None:
        rule = self.rule
        if isinstance(node, ast.Name):
            if node.id in nm.DYNAMIC_CALLS and isinstance(node.ctx, ast.Load) and not self.found.binds.get(node.id):
                return f"{UNREADABLE}: it calls {node.id}, which looks a function up by name at run time"
            return None
        if node.attr in nm.DYNAMIC_ATTRS:
            return f"{UNREADABLE}: it uses .{node.attr}, which reaches functions by name"
        for q in nm.qualified(node, self.found) if not hint else ():  # a hint names a type: computes nothing
            why = self._qualified(q)
            if why:
                return why
        if isinstance(node.ctx, ast.Load):
            hit = nm.family(node.attr, rule.forbid) if rule.forbid else None
            if hit:
                return f"uses {nm.quote(node.attr)}, which this exercise switches off"
            if rule.allow is not None and not hint and node.attr not in _families(rule.allow):
                return (f"uses .{nm.quote(node.attr)}, which is not among this puzzle's allowed primitives "
                        f"({', '.join(sorted(_families(rule.allow)))})")
            if self.named and not hint and node.attr.startswith("_") and not node.attr.endswith("__") and not self._own_attr(node.attr):
                return f"uses .{nm.quote(node.attr)}, a private name, which this exercise cannot check"
        return None

    def _own_attr(self, attr: str) -> bool:
        return any(attr in p.statement.attrs_written for p in self.found.placed)

    def _loop(self, node: ast.AST) -> str | None:
        if isinstance(node, LOOPS):
            return "uses a Python loop (for, while or a comprehension), which this exercise rules out"
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in nm.LOOP_CALLS and not self.found.binds.get(f.id):
                return f"calls {f.id}(), a Python loop over the elements, which this exercise rules out"
            if isinstance(f, ast.Attribute) and f.attr in nm.LOOP_ATTRS:
                return f"calls .{f.attr}(), a Python loop over the elements, which this exercise rules out"
        if isinstance(node, ast.Attribute | ast.Name):
            for q in nm.qualified(node, self.found):
                if nm.under(q, nm.LOOP_QUALIFIED):
                    return f"uses {nm.quote(q)}, a Python loop over the elements, which this exercise rules out"
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name in _called_by_name(node):
                return f"calls {nm.quote(node.name)} from itself, a loop by recursion, which this exercise rules out"
        return None


#: the nodes a rule can find something in (:meth:`Reader._node`), and inside a type hint (:meth:`Reader._hint`)
FOUND_IN = (ast.Import, ast.ImportFrom, ast.Attribute, ast.Name, ast.Constant, ast.Call, ast.FunctionDef,
            ast.AsyncFunctionDef, ast.BinOp, ast.AugAssign, *LOOPS)
FOUND_IN_HINTS = (ast.Call, ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Subscript, ast.BinOp)


@functools.lru_cache(maxsize=1 << 14)
def _visited(top: ast.AST) -> tuple[tuple[ast.AST, bool], ...]:
    """The nodes of ``top`` a rule can find something in, in :func:`ast.walk`'s order, each with
    whether it is inside an annotation: worked out once per statement (a statement is one object per
    distinct source, :func:`grader.verdict.rules.reading.read`), not once per rule and submission."""
    hints = {id(n) for a in ast.walk(top) for h in annotations(a) for n in ast.walk(h)}
    return tuple((n, id(n) in hints) for n in ast.walk(top)
                 if isinstance(n, FOUND_IN) or (id(n) in hints and isinstance(n, FOUND_IN_HINTS)))


@functools.lru_cache(maxsize=1 << 12)
def _called_by_name(node: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The plain names ``node`` calls anywhere in its body, worked out once per function (a node is one
    object per distinct source), not once per rule and submission."""
    return frozenset(n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))


def _families(entries: frozenset[str]) -> frozenset[str]:
    """``torch.arange`` and ``arange`` allow the same attribute."""
    return frozenset(e.rsplit(".", 1)[-1] for e in entries)


def _called(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
