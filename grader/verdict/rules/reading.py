"""A code cell as the rules read it: parsed once per distinct source, magics turned into the code they run."""

from __future__ import annotations

import ast
import functools
import logging
import re
import symtable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

#: magics whose line or body is Python run in the notebook's namespace: read as the code they are
READ_MAGICS = frozenset({"time", "timeit", "prun", "capture", "debug"})
#: cell magics whose body is no Python run in the namespace (a shell, a file, a page): the cell binds nothing
INERT_CELL_MAGICS = frozenset({"writefile", "file", "bash", "sh", "script", "html", "HTML", "javascript", "js",
                               "latex", "markdown", "svg", "perl", "ruby", "python", "python2", "python3", "pypy",
                               "sx", "system"})
#: line magics that run no code of the learner's in the namespace
INERT_LINE_MAGICS = frozenset({
    "matplotlib", "pip", "conda", "mamba", "config", "who", "whos", "who_ls", "pwd", "ls", "cd", "env", "autoreload",
    "precision", "xmode", "history", "hist", "colors", "lsmagic", "magic", "page", "pinfo", "pinfo2", "pdoc",
    "psource", "pfile", "pdef", "psearch", "clear", "tb", "sx", "system", "sc", "dhist", "dirs", "pprint",
    "quickref", "doctest_mode", "automagic", "notebook", "pdb", "load", "reset", "reset_selective", "mkdir", "cat",
    "more", "less", "rm", "ldir", "cp", "mv", "lf", "lk", "ll", "lx", "rmdir", "man", "load_ext"})
#: names whose use anywhere in a statement may bind any name at run time
OPAQUE_NAMES = frozenset({"exec", "eval", "setattr", "delattr", "globals", "vars", "locals", "get_ipython"})
#: what only shows a namespace it is given (a name in it is never bound there)
SHOWN = frozenset({"print", "len", "sorted", "list", "repr", "str", "dict", "set", "tuple", "display", "pprint"})
#: namespaces that bind names when written (``builtins.x = f``, ``sys.modules[...] = m``), not when looked in
WRITTEN_NAMES = frozenset({"builtins", "__builtins__", "__main__"})
OPAQUE_ATTRS = frozenset({"__setattr__", "__globals__", "f_globals", "f_locals", "user_ns"})
WRITTEN_ATTRS = frozenset({"__dict__", "modules"})


@dataclass(eq=False)
class Statement:
    """One top-level statement of a cell and what it binds and reads of the notebook's globals."""

    node: ast.stmt
    binds: dict[str, bool]        # name -> bound unconditionally (a plain def, import, assignment)
    reads: frozenset[str]         # globals it reads, in its own scope or any nested one (symtable)
    attrs_written: frozenset[str]  # attribute names it assigns (`torch.flip = ...`, `self.w = ...`)
    opaque: str | None = None     # why running it may bind any name, or None
    opaque_inside: str | None = None  # why calling a function it defines may, or None
    top_reads: frozenset[str] = frozenset()  # the globals it reads when it runs (not in the bodies it defines)
    attrs_read: frozenset[str] = frozenset()  # attribute names it reads
    star: bool = False            # a `from ... import *`
    imports: frozenset[str] = frozenset()  # the top-level modules it imports


@dataclass(eq=False)
class Cell:
    """A code cell's statements as Python runs them, and the module files it writes (``%%writefile x.py``)."""

    statements: tuple[Statement, ...]
    writes: dict[str, Cell] = field(default_factory=dict)  # module name -> its code

    @property
    def patches(self) -> str | None:
        """Why importing this code (a module the notebook writes) may change any name or attribute, or None."""
        return next((s.opaque or "an assignment to an attribute" for s in self.statements if s.opaque or s.attrs_written), None)


@functools.lru_cache(maxsize=8192)
def read(source: str) -> Cell:
    """The cell with source ``source``; computed once per distinct source (release cells are shared)."""
    return _read(source)


def _read(source: str, offset: int = 0) -> Cell:
    tree = _parse(source)
    if tree is None:
        return Cell(())  # it never ran: it defined nothing
    if offset:
        ast.increment_lineno(tree, offset)
    statements: list[Statement] = []
    writes: dict[str, Cell] = {}
    for node in tree.body:
        magic = _magic(node, "run_cell_magic")
        if magic is not None:
            name, line, body = magic
            if name in READ_MAGICS:
                inner = _read(body, node.lineno)
                statements += inner.statements
                writes.update(inner.writes)
            elif name in ("writefile", "file"):
                target = line.split()[-1] if line.split() else ""
                if target.endswith(".py"):
                    writes[target.rsplit("/", 1)[-1][:-3]] = _read(body)
            elif name not in INERT_CELL_MAGICS:
                statements.append(Statement(node, {}, frozenset(), frozenset(), opaque=f"the cell magic %%{name}"))
            continue
        statements += _statements(_expand_lines(node))
    return Cell(tuple(statements), writes)


def _parse(source: str) -> ast.Module | None:
    """Python as written, or as IPython turns it into Python (``%time``, ``!ls``, an indented cell)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
        return ast.parse(source)
    except Exception:  # noqa: BLE001 - IPython would not run it either
        return None


def _magic(node: ast.AST, kind: str) -> tuple[str, ...] | None:
    """(name, line[, body]) of ``get_ipython().<kind>('name', ...)`` as the statement ``node``, or None."""
    call = node.value if isinstance(node, ast.Expr) else node
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == kind):
        return None
    owner = call.func.value
    if not (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "get_ipython"):
        return None
    if not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args) or not call.args:
        return None
    return tuple(a.value for a in call.args)


def _expand_lines(node: ast.stmt) -> list[ast.stmt]:
    """``node`` with a line magic that runs Python (``%time f(x)``) as the code it runs."""
    magic = _magic(node, "run_line_magic")
    if magic is None or magic[0] not in READ_MAGICS:
        return [node]
    line = re.sub(r"^(\s*-\w+(\s+[\w.]+)?)*\s*", "", magic[1]) if magic[0] in ("timeit", "prun") else magic[1]
    try:
        inner = ast.parse(line)
    except SyntaxError:
        return [node]  # read as the magic call it is: opaque
    for part in inner.body:
        ast.increment_lineno(part, node.lineno - 1)
    return list(inner.body) or [ast.Pass(lineno=node.lineno, col_offset=0)]


def _statements(nodes: list[ast.stmt]) -> list[Statement]:
    return [_statement(node) for node in nodes]


def _statement(node: ast.stmt) -> Statement:
    star = isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
    attributes = [n for n in ast.walk(node) if isinstance(n, ast.Attribute)]
    written = frozenset(n.attr for n in attributes if not isinstance(n.ctx, ast.Load))
    binds, reads, top_reads = _scopes(node)
    for name in _unconditional(node):
        if name in binds:
            binds[name] = True
    imports = frozenset(m.split(".")[0] for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)
                        for m in ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]))
    now = _opaque(node, _running(node))
    return Statement(node, binds, frozenset(reads), written, opaque=now, star=star, imports=imports,
                     opaque_inside=None if now else _opaque(node, list(ast.walk(node))), top_reads=frozenset(top_reads),
                     attrs_read=frozenset(n.attr for n in attributes if isinstance(n.ctx, ast.Load)))


def _running(node: ast.stmt) -> list[ast.AST]:
    """The nodes of ``node`` that run when it runs: not the bodies of the functions and lambdas it defines."""
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        out.append(n)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo += [*getattr(n, "decorator_list", []), *n.args.defaults, *(d for d in n.args.kw_defaults if d)]
        else:
            todo += list(ast.iter_child_nodes(n))
    return out


def _scopes(node: ast.stmt) -> tuple[dict[str, bool], set[str], set[str]]:
    """What ``node`` binds (all conditionally, for now) and reads of the globals, from Python's own
    symbol tables: a method reads a global, never its class's names; ``global x`` binds one."""
    loaded = {n.id for n in _outside_hints(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    try:
        table = symtable.symtable(ast.unparse(node), "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        return dict.fromkeys(stored, False), loaded, loaded
    binds = {s.get_name(): False for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    reads = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    top = reads & loaded
    todo = list(table.get_children())
    while todo:
        scope = todo.pop()
        todo += scope.get_children()
        for s in scope.get_symbols():
            if s.is_declared_global() and s.is_assigned():
                binds[s.get_name()] = False
            # bound in its scope is local unless declared global (3.11's is_global says yes for a nested def's parameter)
            global_ = s.is_declared_global() or (s.is_global() and not s.is_local())
            if s.is_referenced() and (global_ or (scope.get_type() == "class" and s.is_local())):
                reads.add(s.get_name())
    return binds, reads & loaded, top


def _unconditional(node: ast.stmt) -> set[str]:
    """The names ``node`` binds whenever it runs: a def, a class, an import, a plain assignment."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
    out: set[str] = set()
    for target in targets:
        todo = [target]
        while todo:
            t = todo.pop()
            if isinstance(t, ast.Name):
                out.add(t.id)
            elif isinstance(t, ast.Tuple | ast.List):
                todo += t.elts
            elif isinstance(t, ast.Starred):
                todo.append(t.value)
    return out


def _opaque(node: ast.stmt, nodes: list[ast.AST]) -> str | None:
    """Why ``nodes`` of ``node`` may bind names no statement shows (``exec``, ``setattr``, ``%run``), or None."""
    magic = _magic(node, "run_line_magic")
    if magic is not None:
        return None if magic[0] in INERT_LINE_MAGICS else f"the magic %{magic[0]}"
    inert = {id(n) for m in ast.walk(node) if _magic(m, "system") or _magic(m, "getoutput")
             or (_magic(m, "run_line_magic") or ("",))[0] in INERT_LINE_MAGICS for n in ast.walk(m)}
    parents = {id(c): p for p in ast.walk(node) for c in ast.iter_child_nodes(p)}
    for n in nodes:
        if id(n) in inert:
            continue
        if isinstance(n, ast.Name) and n.id in OPAQUE_NAMES and not _only_looked_at(n, parents) and not _inert_code(n, parents):
            return n.id
        if isinstance(n, ast.Attribute) and n.attr in OPAQUE_ATTRS:
            return "." + n.attr
        if isinstance(n, ast.Attribute) and n.attr in WRITTEN_ATTRS and not _only_looked_at(n, parents):
            return "a write to ." + n.attr
        if isinstance(n, ast.Name) and n.id in WRITTEN_NAMES and _written(n, parents):
            return "a write to " + n.id
    return None


def _written(node: ast.expr, parents: dict[int, ast.AST]) -> bool:
    """Whether a namespace is written where it stands (``builtins.f = g``, ``__builtins__["f"] = g``)."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Attribute | ast.Subscript) and not isinstance(parent.ctx, ast.Load):
        return True
    return isinstance(parent, ast.Attribute) and parent.attr in ("__dict__", "update", "setdefault", "__setitem__")


def _only_looked_at(node: ast.expr, parents: dict[int, ast.AST]) -> bool:
    """Whether a namespace (``globals()``, ``sys.modules``) is only read where it stands: a name
    looked up in it (``"x" in globals()``, ``sys.modules.get(...)``, ``sys.modules["np"]``)."""
    if isinstance(node, ast.Name):  # globals() / vars(x) / locals(): the call is the namespace
        if node.id not in ("globals", "vars", "locals"):
            return False
        call = parents.get(id(node))
        if not (isinstance(call, ast.Call) and call.func is node):
            return False
        node = call
    parent = parents.get(id(node))
    if isinstance(parent, ast.Call) and parent.func is node:  # a method of that name: `net.modules()`
        return True
    if isinstance(parent, ast.Compare):
        return all(isinstance(op, ast.In | ast.NotIn) for op in parent.ops)
    if isinstance(parent, ast.Subscript):
        return isinstance(parent.ctx, ast.Load)
    if isinstance(parent, ast.Attribute) and parent.attr in ("get", "keys", "values", "items", "copy", "__contains__"):
        return isinstance(parents.get(id(parent)), ast.Call)
    # shown, counted or copied: `print(vars(net))`, `sorted(globals())`
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in SHOWN


def _inert_code(node: ast.Name, parents: dict[int, ast.AST]) -> bool:
    """Whether ``node`` is ``exec``/``eval`` of a literal text that binds and changes nothing (``eval("2 ** 10")``)."""
    call = parents.get(id(node))
    if node.id not in ("exec", "eval") or not (isinstance(call, ast.Call) and call.func is node and len(call.args) == 1):
        return False
    text = call.args[0]
    if not (isinstance(text, ast.Constant) and isinstance(text.value, str)) or call.keywords:
        return False
    inner = _read(text.value) if _parse(text.value) is not None else None
    return inner is not None and all(not (s.binds or s.attrs_written or s.opaque or s.opaque_inside) for s in inner.statements)


def _outside_hints(node: ast.AST) -> list[ast.AST]:
    """The nodes of ``node`` but those inside a type hint (an argument's, a return's, an annotated name's)."""
    hinted = {id(n) for a in ast.walk(node) for h in annotations(a) for n in ast.walk(h)}
    return [n for n in ast.walk(node) if id(n) not in hinted]


def annotations(node: ast.AST) -> list[ast.expr]:
    """The annotations ``node`` holds as children (an argument's, a def's return, an annotated assignment's)."""
    found = getattr(node, "annotation" if isinstance(node, ast.arg | ast.AnnAssign) else "returns", None)
    return [found] if isinstance(found, ast.expr) else []
