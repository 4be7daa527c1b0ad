"""Lint of asserts that cannot fail: a chapter's demo asserts what it measured, not what always holds.

A notebook's asserts are its evidence; one that holds whatever the code computed proves nothing
and reads as if it did. Rules, per code cell of a chapter's source notebook
(``solutions/*/*.ipynb``), on every ``assert``:

1. **A histogram's counts against its total.** ``counts.sum() == n`` (or ``sum(counts)``, on
   either side) where ``counts`` came from ``hist``, ``histogram``, ``histc`` or ``bincount``:
   every value falls in one bar by construction.
2. **A duration compared with zero.** ``t > 0``, ``t >= 0``, ``0 < t`` where ``t`` was computed
   from a clock (``time.perf_counter()`` and the other timers ``ci/claim_lint.py`` knows) or is
   named as one (``*_s``, ``*_ms``, ``*_us``, ``*_ns``, ``seconds``, ``elapsed``, ``duration``):
   any run takes some time.
3. **A median between its own sample's ends.** ``low <= median <= high`` where the middle names
   a median and the ends a minimum and a maximum (directly or through the names they were
   assigned from): a median always lies between the smallest and the largest value.

Names are followed through the cell's own assignments (``low, high = x.min(), x.max()`` too).

Usage: ``python ci/tautology_lint.py [NOTEBOOK ...]`` (default: every chapter's source).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import claim_lint  # beside this file: ci/

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claim_lint import _is_timer_call, _parse, _source  # noqa: E402  (the same parsing and timers)

HISTOGRAMS = {"hist", "histogram", "histc", "bincount", "histogramdd"}
TIME_NAME = re.compile(r"(?:^|_)(?:s|ms|us|ns|seconds?|elapsed|duration)$")


def _assignments(tree: ast.AST) -> dict[str, ast.expr]:
    """Each name the cell assigns, mapped to the expression it was last assigned from."""
    out: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple | ast.Call):
                    values = node.value.elts if isinstance(node.value, ast.Tuple) else None
                    for k, elt in enumerate(target.elts):
                        if isinstance(elt, ast.Name):
                            same_length = values is not None and len(values) == len(target.elts)
                            out[elt.id] = values[k] if same_length else node.value
    return out


def _resolved(expr: ast.expr, names: dict[str, ast.expr], depth: int = 3) -> list[ast.expr]:
    """``expr`` and the expressions the names in it were assigned from, a few levels deep."""
    found = [expr]
    if depth:
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id in names and names[n.id] is not expr:
                found += _resolved(names[n.id], names, depth - 1)
    return found


def _words(expr: ast.expr, names: dict[str, ast.expr]) -> set[str]:
    return set().union(*(claim_lint.names_in(e) for e in _resolved(expr, names)))


def _calls(expr: ast.expr, names: dict[str, ast.expr]) -> list[ast.Call]:
    return [n for e in _resolved(expr, names) for n in ast.walk(e) if isinstance(n, ast.Call)]


def _is_histogram_total(side: ast.expr, names: dict[str, ast.expr]) -> bool:
    """``counts.sum()`` / ``sum(counts)`` (``.item()`` allowed) of a histogram's counts."""
    if isinstance(side, ast.Call) and isinstance(side.func, ast.Attribute) and side.func.attr == "item":
        side = side.func.value
    if not isinstance(side, ast.Call):
        return False
    func = side.func
    if isinstance(func, ast.Attribute) and func.attr == "sum" and not side.args:
        summed = func.value
    elif isinstance(func, ast.Name) and func.id == "sum" and len(side.args) == 1:
        summed = side.args[0]
    else:
        return False
    called = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
              for c in _calls(summed, names)}
    return bool(called & HISTOGRAMS)


def _is_zero(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and not isinstance(e.value, bool) and e.value == 0


def _is_duration(e: ast.expr, names: dict[str, ast.expr]) -> bool:
    if isinstance(e, ast.Name) and TIME_NAME.search(e.id):
        return True
    return any(_is_timer_call(c, set()) for c in _calls(e, names))


def _problems_of_compare(test: ast.Compare, names: dict[str, ast.expr]) -> list[str]:
    sides = [test.left, *test.comparators]
    out = []
    for (left, right), op in zip(zip(sides, sides[1:], strict=False), test.ops, strict=True):
        if isinstance(op, ast.Eq) and (_is_histogram_total(left, names) or _is_histogram_total(right, names)):
            out.append("compares a histogram's total count with the number of values (every value is in a bar)")
        positive = (isinstance(op, ast.Gt | ast.GtE) and _is_zero(right) and _is_duration(left, names)) or (
            isinstance(op, ast.Lt | ast.LtE) and _is_zero(left) and _is_duration(right, names))
        if positive:
            out.append("compares a duration with 0 (every run takes some time)")
    ordered = all(isinstance(op, ast.Lt | ast.LtE) for op in test.ops) or all(
        isinstance(op, ast.Gt | ast.GtE) for op in test.ops)
    if len(sides) == 3 and ordered:
        low, middle, high = sides if isinstance(test.ops[0], ast.Lt | ast.LtE) else sides[::-1]
        if ("median" in _words(middle, names) and _words(low, names) & {"min", "amin"}
                and _words(high, names) & {"max", "amax"}):
            out.append("puts a median between the minimum and the maximum of its sample (it always lies there)")
    return out


def problems_in_code(code: str) -> list[str]:
    """Every tautological assert of one code cell, as 'line N: why'."""
    tree = _parse(code)
    if tree is None:
        return []
    names = _assignments(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            tests = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
            for test in tests:
                if isinstance(test, ast.Compare):
                    out += [f"line {node.lineno}: the assert {why}: assert what the run measured instead"
                            for why in _problems_of_compare(test, names)]
    return out


def problems_in_cells(cells: list[Any], label: str = "") -> list[str]:
    """Every tautological assert in a notebook's code cells (dicts or nbformat nodes)."""
    return [f"{label}cell {i}, {line}" for i, cell in enumerate(cells) if cell.get("cell_type") == "code"
            for line in problems_in_code(_source(cell))]


def problems(notebook: Path) -> list[str]:
    """Every tautological assert of one source notebook."""
    import nbformat

    return problems_in_cells(nbformat.read(str(notebook), as_version=4).cells)


def main(argv: list[str]) -> int:
    from hidden_lint import run  # the same command line as the other chapter lints

    return run(problems, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
