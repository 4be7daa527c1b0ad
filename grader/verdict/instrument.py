"""Test cells as the grader runs them: every check an observation, begin and end marked.

The coordinator rewrites each test cell of a prepared notebook (the learner's and the
solution's alike) from the chapter's own source, so that both runs execute the very same
code: the cell reseeds every RNG and observes its start (``begin``), the hidden part is
marked (``phase``), each plain ``assert`` becomes an observation of whether it held
(``assert_``), a ``raise AnswerError(...)`` says which one fired (``fail``), and the last line observes that the cell ran to its end (``end``). The
checks of :mod:`course_utils.checks` observe by themselves while a test cell runs.
"""

from __future__ import annotations

import ast
import zlib
from dataclasses import dataclass, field

from nbformat import NotebookNode

from grader import cells
from grader.verdict.rules.rule import Rule

OBS = "_course_obs"


@dataclass(frozen=True)
class Message:
    """A test's own failure message: literal parts, and ``None`` where a value is formatted in.

    The values come from the learner's process as observations; the coordinator writes them
    in only when they are plain data, or text that stands in the visible test itself.
    """

    parts: tuple[str | None, ...]
    visible: str = ""
    #: how the test formats each value in (one per ``None`` part): its conversion (``"r"``,
    #: ``"s"``, ``"a"`` or ``""``) and its format spec when the test wrote one as plain text
    formats: tuple[tuple[str, str], ...] = ()


@dataclass
class TestSource:
    """A test cell as the grader runs it, and what the coordinator needs to explain it."""

    grade_id: str
    code: str
    #: the message of each rewritten ``assert`` and ``raise AnswerError``, by its site number
    #: (coordinator-side text: the test's own wording, never the learner's process's)
    asserts: dict[int, Message] = field(default_factory=dict)
    #: how the exercise's answer must be written, checked on its source (:mod:`grader.verdict.rules`)
    rule: Rule | None = None
    #: the exercise's reviewed hints, by way of failing (:mod:`grader.verdict.hints`)
    hints: dict[str, str] = field(default_factory=dict)


def _obs_call(attr: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=ast.Name(id=OBS, ctx=ast.Load()), attr=attr, ctx=ast.Load()),
                    args=args, keywords=[])


class _Asserts(ast.NodeTransformer):
    def __init__(self, visible: str):
        self.visible = visible
        self.messages: dict[int, Message] = {}

    def _site(self, msg: ast.expr | None) -> tuple[int, list[ast.expr]]:
        site = len(self.messages) + 1
        parts, values = _message(msg)
        self.messages[site] = Message(tuple(parts), self.visible, tuple(_format(v) for v in values))
        return site, [v.value if isinstance(v, ast.FormattedValue) else v for v in values]

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        site, values = self._site(node.msg)
        args = [node.test, ast.Constant(site)]
        if values:  # formatted only when the assert fails, as Python would
            args.append(ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                                   body=ast.Tuple(elts=values, ctx=ast.Load())))
        return ast.copy_location(ast.Expr(value=_obs_call("assert_", args)), node)

    def visit_Raise(self, node: ast.Raise) -> ast.AST | list[ast.AST]:
        """``raise AnswerError(message)`` in a test: observe which one failed, then raise it."""
        exc = node.exc
        func = exc.func if isinstance(exc, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name != "AnswerError":
            return node
        site, values = self._site(exc.args[0] if exc.args else None)
        call = _obs_call("fail", [ast.Constant(site), ast.Tuple(elts=values, ctx=ast.Load())])
        return [ast.copy_location(ast.Expr(value=call), node), node]


def _format(value: ast.expr) -> tuple[str, str]:
    """(conversion, format spec) of one value an f-string formats in; ("", "") for a plain one."""
    if not isinstance(value, ast.FormattedValue):
        return "", ""
    conversion = chr(value.conversion) if value.conversion and value.conversion > 0 else ""
    spec = value.format_spec
    literal = isinstance(spec, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in spec.values)
    return conversion, "".join(str(v.value) for v in spec.values) if literal else ""


def _message(msg: ast.expr | None) -> tuple[list[str | None], list[ast.expr]]:
    """The message as the test's author wrote it: literal parts, and the values formatted in (an
    f-string's as their ``ast.FormattedValue``, for its conversion and format spec)."""
    if msg is None:
        return [], []
    if isinstance(msg, ast.Constant) and isinstance(msg.value, str):
        return [msg.value], []
    if isinstance(msg, ast.JoinedStr):
        parts: list[str | None] = []
        values: list[ast.expr] = []
        for v in msg.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                parts.append(None)
                values.append(v)
        return parts, values
    if isinstance(msg, ast.BinOp) and isinstance(msg.op, ast.Add):
        left, right = _message(msg.left), _message(msg.right)
        return left[0] + right[0], left[1] + right[1]
    return [], []


#: Stands for the end of the hidden part while the cell is rewritten.
_END_MARK = "_course_end_hidden"
#: The function the hidden part runs in (see :func:`_scoped`).
HIDDEN_SCOPE = "_course_hidden"


def _scoped(tree: ast.Module) -> ast.Module:
    """The hidden part run inside a function of its own, so that nothing it defines (``_check``,
    ``_describe``, ``x``) lands in the notebook's namespace, where it would replace a helper of
    the learner's of the same name: in the learner's own kernel there is no hidden part."""
    body = tree.body
    start = next((i for i, n in enumerate(body) if ast.unparse(n) == f"{OBS}.phase('hidden')"), None)
    end_mark = repr(_END_MARK)
    if start is None:
        tree.body = [n for n in body if ast.unparse(n) != end_mark]
        return tree
    end = next((i for i, n in enumerate(body) if i > start and ast.unparse(n) == end_mark), len(body))
    hidden = body[start + 1:end] or [ast.Pass()]
    scope = ast.FunctionDef(name=HIDDEN_SCOPE, args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                                defaults=[]),
                            body=hidden, decorator_list=[], returns=None, type_params=[])
    run = ast.parse(f"{HIDDEN_SCOPE}()\ndel {HIDDEN_SCOPE}").body
    tree.body = [*body[: start + 1], scope, *run, *(n for n in body[end:] if ast.unparse(n) != end_mark)]
    return tree


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
            out.append(f"{indent}{_END_MARK!r}")
        else:
            out.append(line)
    text = "\n".join(out)
    visible, _ = cells.split_hidden(source)
    try:
        tree = ast.parse(text)
    except SyntaxError:  # not Python (a magic?): run as written; its checks still observe
        body, messages = text, {}
    else:
        transformer = _Asserts(visible)
        tree = _scoped(transformer.visit(tree))
        ast.fix_missing_locations(tree)
        body, messages = ast.unparse(tree), transformer.messages
    code = (
        f"import course_utils.observe as {OBS}\n"
        f"{OBS}.begin({grade_id!r}, {seed_of(grade_id)})\n"
        f"{body}\n"
        f"{OBS}.end()\n"
    )
    return TestSource(grade_id, code, messages)


def chapter_tests(source_nb: NotebookNode, settings: dict | None = None,
                  hint_table: dict[str, dict[str, str]] | None = None) -> dict[str, TestSource]:
    """Every test cell of a chapter's source notebook, rewritten, by grade_id; with the rules of
    the chapter's ``grading.toml`` data ``settings`` (see :mod:`grader.verdict.rules`) and the hints of its
    ``hints.toml`` table ``hint_table`` (see :mod:`grader.verdict.hints`) on their tests."""
    from grader.verdict import hints
    from grader.verdict.rules import rule as rules

    found = rules.from_settings(settings or {}, source_nb)
    tests = {
        cells.grade_id(c): rewrite(cells.grade_id(c), cells.source_text(c))
        for c in source_nb.cells
        if cells.is_test(c) and cells.grade_id(c)
    }
    for gid, rule in found.items():
        if gid in tests:
            tests[gid].rule = rule
    for gid, table in hints.by_test(hint_table or {}, source_nb).items():
        if gid in tests:
            tests[gid].hints = table
    return tests


def apply(nb: NotebookNode, tests: dict[str, TestSource]) -> NotebookNode:
    """Replace the source of every test cell of ``nb`` by the grader's version of it.

    A test cell the chapter does not have keeps its source but is not graded (its
    observations are never read).
    """
    for cell in nb.cells:
        if cells.is_test(cell) and cells.grade_id(cell) in tests:
            cell.source = tests[cells.grade_id(cell)].code
    return nb
