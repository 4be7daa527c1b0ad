"""Which statements of a notebook the graded function reaches, as Python binds names cell after cell."""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass

from grader.verdict.rules.reading import Cell, Statement

BUILTINS = frozenset(dir(builtins))


@dataclass(eq=False)
class Placed:
    """A statement where it runs: its position in the notebook and its cell's grade_id."""

    statement: Statement
    position: int
    cell: str | None


class Bindings:
    """Every binding the code cells make, in order (the latest plain one wins), as a test placed
    after the first ``limit`` statements meets them (:meth:`before`)."""

    def __init__(self, cells: list[tuple[str | None, Cell]]):
        self.limit = 1 << 60
        self.placed: list[Placed] = []
        self.binds: dict[str, list[tuple[Placed, bool]]] = {}
        self.opaque: list[Placed] = []
        self.stars: list[Placed] = []
        self.writers: dict[str, list[Placed]] = {}
        self.why: dict[int, str] = {}  # why each opaque statement may define anything
        written = {name: code for _, cell in cells for name, code in cell.writes.items()}
        inside: dict[str, bool] = {}  # names bound by a statement that defines a function running `exec`, ...
        self.writes = frozenset(written)
        for gid, cell in cells:
            for statement in cell.statements:
                here = Placed(statement, len(self.placed), gid)
                self.placed.append(here)
                for name, plain in statement.binds.items():
                    self.binds.setdefault(name, []).append((here, plain))
                for attr in statement.attrs_written:
                    self.writers.setdefault(attr, []).append(here)
                if statement.opaque_inside:
                    inside.update(statement.binds)
                why = statement.opaque or next((f"import {m}" for m in sorted(statement.imports & written.keys())
                                                if written[m].patches), None)
                if not why and statement.top_reads & inside.keys():  # it calls a function that runs `exec`, ...
                    why = next(p.statement.opaque_inside for name in sorted(statement.top_reads & inside.keys())
                               for p, _ in self.binds[name] if p.statement.opaque_inside)
                if why:
                    self.opaque.append(here)
                    self.why[id(here)] = why
                if statement.star:
                    self.stars.append(here)

    def before(self, limit: int) -> Bindings:
        """These bindings as a test after the first ``limit`` statements meets them."""
        view = copy.copy(self)
        view.limit = limit
        return view

    def candidates(self, name: str) -> list[Placed]:
        """The statements whose binding of ``name`` the test may meet: the latest unconditional one,
        every conditional one after it, and what may bind any name after it (``exec``, ``%run``;
        a star import for a name nothing else binds and no builtin is)."""
        limit = self.limit
        found = [(p, plain) for p, plain in self.binds.get(name, ()) if p.position < limit]
        last = max((p.position for p, plain in found if plain), default=-1)
        out = [p for p, _ in found if p.position >= last]
        out += [p for p in self.opaque if last < p.position < limit]
        module = any(p.position == last and isinstance(p.statement.node, ast.Import) for p, _ in found)
        if name not in BUILTINS and not module:  # a star import after the latest binding may rebind it (a
            out += [p for p in self.stars if last < p.position < limit]  # module it rebinds to the library's own)
        return out

    def imports(self, name: str) -> list[str]:
        """The qualified names ``name`` is bound to by the imports among its candidates
        (``F`` -> ``torch.nn.functional``)."""
        out = []
        for p in self.candidates(name):
            node = p.statement.node
            if isinstance(node, ast.Import | ast.ImportFrom):
                out += [q for alias, q in imported(node) if alias == name]
        return out

    def reach(self, functions: tuple[str, ...]) -> tuple[list[Placed], set[str]]:
        """The statements the graded ``functions`` reach (their bindings first, then the candidates
        of every global name they read and of every attribute they use that a statement assigns),
        and the global names followed."""
        seen: list[Placed] = []
        ids: set[int] = set()
        names: set[str] = set()
        todo: list[Placed] = []
        for fn in functions:
            names.add(fn)
            todo += self.candidates(fn)
        while todo:
            here = todo.pop(0)
            if id(here) in ids:
                continue
            ids.add(id(here))
            seen.append(here)
            for name in sorted(here.statement.reads - names):
                names.add(name)
                todo += self.candidates(name)
            used = here.statement.attrs_read
            for attr in used & self.writers.keys():
                todo += [p for p in self.writers[attr] if p.position < self.limit]
            if used:  # `setattr(torch.Tensor, "flip", ...)`, `exec(...)`: any attribute may be changed
                todo += [p for p in self.opaque if p.position < self.limit]
        return seen, names


def imported(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(name bound, qualified name it holds) for each alias of an import: ``import a.b`` binds ``a``
    to ``a``; ``import a.b as c`` binds ``c`` to ``a.b``; ``from a import b`` binds ``b`` to ``a.b``."""
    if isinstance(node, ast.Import):
        return [(a.asname, a.name) if a.asname else (a.name.split(".")[0], a.name.split(".")[0]) for a in node.names]
    base = "." * node.level + (node.module or "")
    return [(a.asname or a.name, f"{base}.{a.name}" if base else a.name) for a in node.names if a.name != "*"]

