"""The fork child's shortcuts through IPython's per-cell work give exactly what IPython gives."""

from __future__ import annotations
import __future__

import ast
import json
import warnings
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st
from ipykernel.compiler import get_file_name, murmur2_x86
from IPython.core import inputtransformer2 as it2
from IPython.core.async_helpers import _should_be_async
from IPython.core.compilerop import CachingCompiler
from IPython.core.inputtransformer2 import TransformerManager

from grader.engines.fork.quickshell import (
    QuickCompiler,
    QuickTransformerManager,
    may_be_async,
    may_need_token_transform,
    murmur2,
    parse,
    warns_when_parsed,
)

ROOT = Path(__file__).resolve().parent.parent
SEED = 0xC70F6907

#: Text where IPython's syntax hides: its escapes, brackets, quotes, comments, continuations,
#: blank and odd line breaks, prompts, an operator that looks like a magic.
SPECIAL = st.lists(st.sampled_from(
    list("%!?,;/ \t\n\r\f\x0b\\#'\"()[]{}=:.ax1") + ["await ", "async ", ">>> ", "In [1]: ", "...", "\u3000", "é"]
), max_size=60).map("".join)
LINES = st.lists(
    st.sampled_from(["x = 1", "  y = x", "%time x", "!ls", "a = !ls", "b = %pwd", "x?", "x??", ",f a b",
                     ";f a b", "/f a", "(1,", " 2)", "'''", "s = '%d' % 3", "x != 1", "# why?", "if x:",
                     "    pass", "\\", "", "await f()", "    %xmode Plain", "%%time", "f(a,", "/ 2)"]),
    max_size=8,
).map("\n".join)


def course_cells() -> list[str]:
    """Every code cell of every notebook in the repository (solutions, release, fixtures)."""
    sources = ["", "\n", "x = 1", "é = 'ü'  # not ASCII"]
    for path in sorted([*ROOT.glob("solutions/**/*.ipynb"), *ROOT.glob("notebooks/**/*.ipynb"),
                        *ROOT.glob("tests/fixtures/**/*.ipynb")]):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                sources.append("".join(cell["source"]))
    for path in sorted(ROOT.glob("tests/fixtures/*_answers/*.json")):  # learners' answers, right and wrong
        for item in json.loads(path.read_text(encoding="utf-8")):
            if isinstance(item, dict) and isinstance(item.get("source"), str):
                sources.append(item["source"])
    return sources


COURSE = course_cells()


def outcome(transform, cell: str) -> tuple[str, str]:
    try:
        return "ok", transform(cell)
    except Exception as exc:  # IPython raises on some malformed input: the shortcut must too
        return type(exc).__name__, str(exc)


def test_the_course_has_cells_to_compare():
    assert len(COURSE) > 300


#: Numbers, keywords and escapes side by side: where the parser warns (``1if``, ``"\\d"``) and where not.
NUMBERS = st.lists(st.sampled_from(
    ["1", "0x1f", "1e5", "1j", "1.", ".5", "0b1", "0o7", "1_0", "if", "else", "for", "in", "is", "or", "and",
     "not", " ", "x", "_", "é", "[", "]", "(", ")", "=", ",", "\n", "'\\d'", "'\\n'", "b'\\q'", "#"]
), max_size=12).map("".join)


def test_every_course_cell_is_transformed_as_ipython_does():
    ipython = TransformerManager()
    for quick in (QuickTransformerManager(), QuickTransformerManager(QuickCompiler())):
        differ = [c for c in COURSE if outcome(quick.transform_cell, c) != outcome(ipython.transform_cell, c)]
        assert differ == []


@settings(max_examples=400, deadline=None)
@given(st.one_of(SPECIAL, LINES))
@example("    pass\n  y = x\nx = 1")  # IPython's tokenizer raises IndentationError (a dedent to no level)
@example("if x:\n        a = 1\n    b = 2")
@example("x = \"\"\"\n%pwd")  # an open string: IPython tokenizes what it can
def test_generated_text_is_transformed_as_ipython_does(cell):
    expected = outcome(TransformerManager().transform_cell, cell)
    assert outcome(QuickTransformerManager().transform_cell, cell) == expected
    assert outcome(QuickTransformerManager(QuickCompiler()).transform_cell, cell) == expected


def test_a_course_cell_is_parsed_once_into_the_tree_ipython_parses():
    handed = 0
    for cell in COURSE:
        compiler = QuickCompiler()
        text = QuickTransformerManager(compiler).transform_cell(cell)
        if compiler.parsed is None:
            continue
        handed += 1
        tree = compiler.parsed[2]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a handed-over parse is one that could not warn
            expected = CachingCompiler().ast_parse(text, "1234.py")
        assert compiler.ast_parse(text, "1234.py") is tree, cell
        assert ast.dump(tree, include_attributes=True) == ast.dump(expected, include_attributes=True), cell
        assert compiler.parsed is None  # used once
        assert compiler.ast_parse(text, "1234.py") is not tree  # parsed afresh after that
    assert handed > len(COURSE) // 2


def test_a_parse_is_not_used_for_other_text_or_other_flags():
    compiler = QuickCompiler()
    quick = QuickTransformerManager(compiler)
    quick.transform_cell("x: int = 1\n")
    tree = compiler.parsed[2]
    assert compiler.ast_parse("x: int = 2\n") is not tree
    quick.transform_cell("x: int = 1\n")
    compiler.flags |= __future__.annotations.compiler_flag  # a cell ran ``from __future__ import annotations``
    assert compiler.ast_parse("x: int = 1\n") is not compiler.parsed
    assert compiler.parsed is None


@settings(max_examples=500, deadline=None)
@given(st.one_of(NUMBERS, SPECIAL, LINES))
@example("y = 1if x else 2\n")
@example("z = [0x1for x in ()]\n")
@example("a = 1.if 1 else 2\n")
@example("s = '\\d'\n")
def test_text_said_not_to_warn_parses_without_a_warning(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if parse(text) is None or warns_when_parsed(text):
            return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse(text) is not None


def test_the_tokenizer_is_skipped_only_without_ipython_syntax():
    assert not may_need_token_transform(["x = torch.ones(3)\n", "print(x.sum(), 'done.')\n"])
    for lines in (["x = %pwd\n"], ["!ls\n"], ["x?\n"], ["  ,f a\n"], ["; f a\n"], ["/f a\n"], ["y = 5 % 2\n"]):
        assert may_need_token_transform(lines), lines
    skipped = sum(not may_need_token_transform(c.splitlines(keepends=True)) for c in COURSE)
    assert skipped > len(COURSE) // 2  # the shortcut is taken on most of the course's cells


def test_a_learners_own_token_transform_is_still_applied():
    class Shout(it2.TokenTransformBase):  # a token transform of a learner's IPython extension
        @classmethod
        def find(cls, tokens_by_line):
            for line in tokens_by_line:
                for token in line:
                    if token.string == "quiet":
                        return cls(token.start)
            return None

        def transform(self, lines):
            return [line.replace("quiet", "LOUD") for line in lines]

    quick = QuickTransformerManager()
    quick.token_transformers.append(Shout)
    assert quick.transform_cell("quiet = 1\n") == "LOUD = 1\n"


def test_no_course_cell_is_wrongly_run_synchronously():
    assert [c for c in COURSE if not may_be_async(c) and _should_be_async(c)] == []


@settings(max_examples=400, deadline=None)
@given(st.one_of(SPECIAL, LINES))
def test_a_cell_that_awaits_is_always_recognised(cell):
    assert may_be_async(cell) or not _should_be_async(cell)


def test_top_level_await_forms_are_recognised():
    for cell in ("await f()", "async with a as b:\n    pass", "async for x in y:\n    pass",
                 "[x async for x in y]", "x = 1\nawait g()"):
        assert may_be_async(cell) and _should_be_async(cell), cell


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_cell_hash_is_ipykernels(text):
    assert murmur2(text, SEED) == murmur2_x86(text, SEED)


def test_cells_are_named_as_a_kernel_names_them():
    compiler = QuickCompiler()
    assert [compiler.get_code_name(c, c, 1) for c in COURSE] == [get_file_name(c) for c in COURSE]


def test_a_cell_name_given_by_the_environment_is_kept(monkeypatch):
    monkeypatch.setenv("IPYKERNEL_CELL_NAME", "<cell>")
    assert QuickCompiler().get_code_name("x = 1", "x = 1", 1) == "<cell>" == get_file_name("x = 1")
