"""Lint of hidden tests: they observe the learner's values and never compute expected ones.

Whatever runs in the learner's process can be read there, so a hidden test builds inputs and
observes results; the chapter's solution, run by the grader apart, is its oracle (see
DESIGN.md, "Where the verdict is decided"). Rules, per test cell's hidden part:

1. no ``check_tensor``/``check_value`` call is given a computed expected value (a second
   positional argument or ``expected=`` other than a literal such as ``3.0``): the solution's
   value is the expected one;
2. nothing is assigned to a name that says it holds an expected value (``expected``,
   ``reference``, ``want``, ``target_value`` ...);
3. at least one value observation whose expected value is the solution's (``check_tensor``,
   ``check_value`` without an expected argument, or ``observe``): a yes/no ``assert`` can be
   faked by the process that makes it, and a literal written in the test can be read there.

Usage: ``python ci/hidden_lint.py [NOTEBOOK ...]`` (default: every chapter's source).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import cells, project  # noqa: E402

VALUE_CHECKS = {"check_tensor", "check_value", "observe"}
EXPECTED_NAMES = {"expected", "reference", "want", "wanted", "expected_value", "target_value", "truth"}


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _literal(node: ast.expr) -> bool:
    """A constant written in the test (``3.0``, ``(2, 3)``, ``"float32"``): nothing computed."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def problems_in(grade_id: str, hidden: str) -> list[str]:
    """What breaks the rules in one test cell's hidden part."""
    try:
        tree = ast.parse(hidden)
    except SyntaxError as exc:
        return [f"{grade_id}: the hidden tests do not parse ({exc.msg}, line {exc.lineno})"]
    found, observed = [], False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _called(node)
            given = node.args[1:2] + [k.value for k in node.keywords if k.arg == "expected"]
            if name in VALUE_CHECKS and not (given and name != "observe"):
                observed = True  # the solution's value is expected here: nothing to guess
            if name in ("check_tensor", "check_value") and any(not _literal(e) for e in given):
                found.append(f"{grade_id}, line {node.lineno}: {name} is given a computed expected value; leave it out"
                             " (the solution's value is expected)")
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for name_node in ast.walk(target):
                if isinstance(name_node, ast.Name) and name_node.id in EXPECTED_NAMES:
                    found.append(f"{grade_id}, line {node.lineno}: `{name_node.id}` holds an expected value")
    if not observed:
        found.append(f"{grade_id}: the hidden tests make no value observation whose expected value is the"
                     " solution's (check_tensor / check_value without an expected argument)")
    return found


def problems(notebook: Path) -> list[str]:
    """Every rule broken by the hidden tests of one source notebook."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    out = []
    for cell in nb.cells:
        if cells.is_test(cell):
            gid = cells.grade_id(cell) or "?"
            _, hidden = cells.split_hidden(cells.source_text(cell))
            if not hidden.strip():
                out.append(f"{gid}: no hidden tests")
                continue
            out += problems_in(gid, hidden)
    return out


def run(problems_of, argv: list[str]) -> int:
    """A chapter lint's command line: ``problems_of(path)`` for each notebook given (default:
    every chapter's source), one printed line per problem, exit status 1 when there is any."""
    paths = [Path(a) for a in argv] or [project.source_notebook(c) for c in project.chapters()]
    bad = 0
    for path in paths:
        for line in problems_of(path):
            print(f"{path}: {line}")
            bad += 1
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    return run(problems, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
