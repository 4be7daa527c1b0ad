"""A rule of an exercise, from grading.toml, and the verdict on an answer: follows, breaks, or cannot be read."""


from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import NamedTuple

from nbformat import NotebookNode

from grader import cells
from grader.verdict.rules import reading
from grader.verdict.rules.bindings import Bindings, imported
from grader.verdict.rules.checks import UNREADABLE, Reader
from grader.verdict.rules.names import quote


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
    test: str = ""
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
                    integer_only=bool(spec.get("integer_only")), why=str(spec.get("why", "")),
                    test=cells.grade_id(cell) or "")
            answer = None
    return out


def _defined(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]


class Read(NamedTuple):
    """A notebook's code cells as the rules read them, once for all its rules (:func:`read`)."""

    cells: tuple[tuple[str | None, reading.Cell], ...]  # (grade_id, cell) of each code cell but the grader's tests
    tests: dict[str, int]  # test grade_id -> how many of those come before it


def read(nb: NotebookNode) -> Read:
    """``nb``'s code cells read for the rules (each distinct source once per batch: :func:`reading.read`)."""
    found: list[tuple[str | None, reading.Cell]] = []
    tests: dict[str, int] = {}
    for cell in nb.cells:
        if cells.is_test(cell):
            tests.setdefault(cells.grade_id(cell) or "", len(found))
        elif cell.get("cell_type") == "code":
            found.append((cells.grade_id(cell), reading.read(cells.source_text(cell))))
    return Read(tuple(found), tests)


def bindings(nb: NotebookNode | Read, rule: Rule) -> Bindings:
    """The bindings of the code cells the rule's test runs after (the grader's test cells left out)."""
    notebook = nb if isinstance(nb, Read) else read(nb)
    found = _bindings(notebook.cells)
    before = notebook.tests.get(rule.test, len(notebook.cells)) if rule.test else len(notebook.cells)
    return found.before(sum(len(cell.statements) for _, cell in notebook.cells[:before]))


@functools.lru_cache(maxsize=16)
def _bindings(read: tuple[tuple[str | None, reading.Cell], ...]) -> Bindings:
    """One notebook's bindings, built once for all its rules (cells are compared by identity:
    :func:`reading.read` gives one object per distinct source)."""
    return Bindings(list(read))


def violation(nb: NotebookNode | Read, rule: Rule) -> str | None:
    """Why the answer breaks ``rule`` or cannot be read (a sentence of the grader's own, with a line number), or None.

    ``nb``: the notebook, or its :func:`read` (a notebook with several rules is read once for all).
    """
    found = bindings(nb, rule)
    reached, names = found.reach(rule.functions)
    reader = Reader(rule, found, names, found.writes)
    # what may define anything first (the cause of every other doubt), then the answer cell's own lines
    for here in sorted(reached, key=lambda p: (id(p) not in found.why, p.cell != rule.answer)):
        statement = here.statement
        opaque = found.why.get(id(here))
        if opaque:
            node, why = statement.node, f"{UNREADABLE}: it runs {quote(opaque)}, which may define anything"
        else:
            checked = _only_reached(statement.node, names)
            hit = reader.statement(checked) if checked is not None else None
            if hit is None:
                continue
            node, why = hit
        line = getattr(node, "lineno", None)
        cell = "your answer cell" if here.cell == rule.answer else "another code cell"
        where = f" (line {line} of {cell})" if line else ""
        if why.startswith(UNREADABLE):
            return (f"the answer {why}{where}, so the grader cannot tell which functions it calls: "
                    f"write the call plainly ({rule.why or 'the statement sets a rule'}).")
        return f"the answer {why}{where}: {rule.why or 'the statement sets this rule'}."
    return None


def _only_reached(top: ast.AST, names: set[str]) -> ast.AST | None:
    """A reached top-level import with only the names the answer reached (``from torch import nn,
    optim`` reached for ``nn`` is no use of ``optim``); None when it binds none of them."""
    if not isinstance(top, ast.Import | ast.ImportFrom):
        return top
    kept = [a for a, (bound, _) in zip(top.names, imported(top) + [("*", "*")] * len(top.names), strict=False)
            if a.name == "*" or bound in names]
    if not kept:
        return None
    return top if len(kept) == len(top.names) else _narrowed(top, tuple(kept))


@functools.lru_cache(maxsize=1024)
def _narrowed(top: ast.Import | ast.ImportFrom, kept: tuple[ast.alias, ...]) -> ast.Import | ast.ImportFrom:
    """``top`` with only the aliases ``kept``: one copy per batch, so what a rule looks at in it is
    worked out once (:func:`grader.verdict.rules.checks._visited`)."""
    copy = type(top)(**{**{f: getattr(top, f) for f in top._fields}, "names": list(kept)})
    return ast.copy_location(copy, top)
