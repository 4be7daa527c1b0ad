"""Names as what they are: attribute chains resolved through imports, families, and lookups by name."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import sys

from grader.verdict.rules.bindings import Bindings, imported

#: called by name, each looks a function up at run time (or runs code given as text)
DYNAMIC_CALLS = frozenset({"getattr", "setattr", "delattr", "eval", "exec", "compile", "__import__", "globals",
                           "vars", "locals", "get_ipython", "breakpoint", "__builtins__"})
#: attributes that reach objects by name (a namespace, a frame, a function's code or annotations)
DYNAMIC_ATTRS = frozenset({"__dict__", "__getattribute__", "__getattr__", "__builtins__", "__globals__", "__code__",
                           "__closure__", "__annotations__", "__annotate__", "__signature__", "__wrapped__",
                           "__subclasses__", "__class_getitem__", "__reduce__", "__reduce_ex__", "__setattr__",
                           "f_globals", "f_locals", "f_builtins", "f_back", "user_ns"})
#: modules whose use looks functions up by name (or loads them from bytes)
DYNAMIC_MODULES = frozenset({"importlib", "inspect", "builtins", "pickle", "marshal", "ctypes", "runpy", "code",
                             "codeop", "pydoc", "pkgutil", "copyreg", "shelve", "gc", "dill", "cloudpickle", "imp",
                             "zipimport", "__main__", "unittest.mock", "_operator"})
#: qualified names that look functions up by name
DYNAMIC_QUALIFIED = frozenset({"sys.modules", "sys._getframe", "operator.attrgetter", "operator.methodcaller",
                               "typing.get_type_hints", "torch.load", "torch.hub", "torch.jit.load", "torch.package",
                               "numpy.load", "functools.singledispatch"})
#: what a Python loop can hide in where loops are ruled out: a function called per element
LOOP_CALLS = frozenset({"map", "filter"})
LOOP_QUALIFIED = frozenset({"functools.reduce", "itertools", "numpy.vectorize", "numpy.frompyfunc",
                            "numpy.apply_along_axis", "numpy.apply_over_axes", "numpy.fromiter"})
LOOP_ATTRS = frozenset({"apply_", "map_", "map2_", "vectorize", "frompyfunc", "apply_along_axis", "apply_over_axes"})
#: aliases the course's notebooks write for modules (numpy is `np`, never a name of its own)
CANONICAL = {"np": "numpy"}


def qualified(node: ast.AST, found: Bindings) -> list[str]:
    """The qualified names an attribute chain or name stands for (``F.softmax`` ->
    ``torch.nn.functional.softmax``) when its first name is bound by an import; else []."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return []
    return [".".join([canonical(q), *parts]) for q in found.imports(node.id)]


def canonical(name: str) -> str:
    head, _, rest = name.partition(".")
    head = CANONICAL.get(head, head)
    return f"{head}.{rest}" if rest else head


def module_of(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import runs (``from a.b import c`` runs ``a.b``, and ``a.b.c`` when it is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    return [base] + [q for _, q in imported(node)] if node.level == 0 else ["." * node.level + base]


def under(name: str, entries: frozenset[str] | set[str]) -> str | None:
    """The entry of ``entries`` that ``name`` is or lies under (``torch.optim.SGD`` under ``torch.optim``)."""
    parts = name.split(".")
    return next((e for e in entries if parts[: e.count(".") + 1] == e.split(".")), None)


def family(name: str, entries: frozenset[str]) -> str | None:
    """The entry without a dot that names ``name``'s family (``_softmax`` and ``softmax`` are one), or None."""
    plain = name.lstrip("_")
    return next((e for e in entries if "." not in e and e.lstrip("_") == plain), None)


def private(name: str) -> str | None:
    """The first private part of a qualified name (``torch._softmax`` -> ``_softmax``), or None."""
    return next((p for p in name.split(".")[1:] if p.startswith("_") and not p.endswith("__")), None)


def kind(module: str, written: frozenset[str]) -> str:
    """``stdlib``, ``dependency`` (installed with the course) or ``own`` (anything else: a module the
    notebook writes, a relative import, a file beside it)."""
    top = module.split(".")[0]
    if not top or top in written:
        return "own"
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return "stdlib"
    return "dependency" if top in _installed() else "own"


@functools.lru_cache(maxsize=1)
def _installed() -> frozenset[str]:
    return frozenset(importlib.metadata.packages_distributions()) | {"course_utils", "torch", "numpy"}


def quote(name: str, limit: int = 40) -> str:
    """A learner's identifier as a reason may show it: capped, one line."""
    text = " ".join(str(name).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
