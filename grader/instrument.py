"""Test cells as the grader runs them: every check an observation, begin and end marked.

The coordinator rewrites each test cell of a prepared notebook (the learner's and the
solution's alike) from the chapter's own source, so that both runs execute the very same
code: the cell reseeds every RNG and observes its start (``begin``), the hidden part is
marked (``phase``), each plain ``assert`` becomes an observation of whether it held
(``assert_``), and the last line observes that the cell ran to its end (``end``). The
checks of :mod:`course_utils.checks` observe by themselves while a test cell runs.
"""

from __future__ import annotations

import ast
import zlib
from dataclasses import dataclass, field

from nbformat import NotebookNode

from grader import cells

OBS = "_course_obs"


@dataclass
class TestSource:
    """A test cell as the grader runs it, and what the coordinator needs to explain it."""

    grade_id: str
    code: str
    #: the message of each rewritten ``assert``, by its site number (coordinator-side text)
    asserts: dict[int, str] = field(default_factory=dict)


class _Asserts(ast.NodeTransformer):
    def __init__(self, source: str):
        self.source = source
        self.messages: dict[int, str] = {}

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        site = len(self.messages) + 1
        self.messages[site] = _message(node.msg)
        call = ast.Call(
            func=ast.Attribute(value=ast.Name(id=OBS, ctx=ast.Load()), attr="assert_", ctx=ast.Load()),
            args=[node.test, ast.Constant(site)],
            keywords=[],
        )
        return ast.copy_location(ast.Expr(value=call), node)


def _message(msg: ast.expr | None) -> str:
    """The assert's message as the test's author wrote it (values formatted in are elided)."""
    if msg is None:
        return ""
    if isinstance(msg, ast.Constant) and isinstance(msg.value, str):
        return msg.value
    if isinstance(msg, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in msg.values)
    if isinstance(msg, ast.BinOp):
        return _message(msg.left) + _message(msg.right)
    return ""


def seed_of(grade_id: str) -> int:
    """The seed every RNG gets at the start of a test cell (the same in both runs)."""
    return zlib.crc32(grade_id.encode()) & 0x7FFFFFFF


def rewrite(grade_id: str, source: str) -> TestSource:
    """The test cell ``source`` (hidden tests included) as the grader runs it."""
    lines = source.split("\n")
    out = []
    for line in lines:
        indent = line[: len(line) - len(line.lstrip())]
        if line.strip() == cells.BEGIN_HIDDEN:
            out.append(f"{indent}{OBS}.phase('hidden')")
        elif line.strip() == cells.END_HIDDEN:
            out.append("")
        else:
            out.append(line)
    text = "\n".join(out)
    try:
        tree = ast.parse(text)
    except SyntaxError:  # not Python (a magic?): run as written; its checks still observe
        body, messages = text, {}
    else:
        transformer = _Asserts(text)
        tree = transformer.visit(tree)
        ast.fix_missing_locations(tree)
        body, messages = ast.unparse(tree), transformer.messages
    code = (
        f"import course_utils.observe as {OBS}\n"
        f"{OBS}.begin({grade_id!r}, {seed_of(grade_id)})\n"
        f"{body}\n"
        f"{OBS}.end()\n"
    )
    return TestSource(grade_id, code, messages)


def chapter_tests(source_nb: NotebookNode) -> dict[str, TestSource]:
    """Every test cell of a chapter's source notebook, rewritten, by grade_id."""
    return {
        cells.grade_id(c): rewrite(cells.grade_id(c), cells.source_text(c))
        for c in source_nb.cells
        if cells.is_test(c) and cells.grade_id(c)
    }


def apply(nb: NotebookNode, tests: dict[str, TestSource]) -> NotebookNode:
    """Replace the source of every test cell of ``nb`` by the grader's version of it.

    A test cell the chapter does not have keeps its source but is not graded (its
    observations are never read).
    """
    for cell in nb.cells:
        if cells.is_test(cell) and cells.grade_id(cell) in tests:
            cell.source = tests[cells.grade_id(cell)].code
    return nb
