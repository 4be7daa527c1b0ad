"""IPython's per-cell work in a fork child, skipped only where it provably cannot change the result.

Before running a cell, IPython tokenizes it to look for its own syntax (``%magic``, ``!shell``,
``obj?``), compiles it once more to see whether it awaits at top level, and a kernel's compiler
hashes it to name it, then parses it. On a chapter-01 submission that was ~40 ms of a ~290 ms
child, nearly all of it on cells that hold none of that syntax. Each shortcut here returns what
IPython would return, and defers to IPython whenever it cannot be sure (``tests/test_quickshell.py``
compares both on every cell of the course and on generated text).
"""

from __future__ import annotations

import ast
import os
import re
import struct
import tokenize

from ipykernel import compiler as kernel_compiler
from IPython.core import inputtransformer2 as it2

#: IPython's own token transforms, in its order: the shortcut applies only while these are the
#: ones installed (a learner's extension may add others; then IPython tokenizes as usual).
DEFAULT_TOKEN_TRANSFORMS = [it2.MagicAssign, it2.SystemAssign, it2.EscapedCommand, it2.HelpEnd]
#: Each token transform starts at a token ``%``, ``!`` or ``?`` anywhere ...
_MARKS = ("%", "!", "?")
#: ... or at one of these as the first token of a logical line, which is the first non-blank
#: character of a physical line (``str.lstrip`` removes at least what the tokenizer skips).
_LINE_STARTS = (",", ";", "/")


def may_need_token_transform(lines: list[str]) -> bool:
    """False only when none of IPython's token transforms can apply to ``lines``."""
    return any(mark in line for line in lines for mark in _MARKS) or any(
        line.lstrip()[:1] in _LINE_STARTS for line in lines
    )


def parse(text: str, flags: int = 0) -> ast.Module | None:
    """``text`` parsed as IPython's compiler parses a cell with ``flags``, or None where the parser
    refuses it. A cell the parser accepts is one IPython's tokenizer cannot fail on either (a cell it
    fails on, e.g. with a dedent to no enclosing level, gets IPython's own error)."""
    try:
        return compile(text, "<cell>", "exec", flags | ast.PyCF_ONLY_AST, True)
    except Exception:
        return None


def parses(text: str) -> bool:
    """Whether ``text`` is Python the parser accepts (see :func:`parse`)."""
    return parse(text) is not None


_NUMBER = re.compile(tokenize.Number)


def warns_when_parsed(text: str) -> bool:
    """False only when parsing ``text`` cannot warn. The parser warns about an escape sequence it
    does not know (which needs a backslash) and about a number followed at once by a keyword
    (``1if``, ``0x1for``: here, a number followed by a letter or a digit, whatever they are; digits
    right after a letter or ``_`` are a name's, never a number)."""
    if "\\" in text:
        return True
    for m in _NUMBER.finditer(text):
        if m.start() and text[m.start() - 1].isidentifier():
            continue
        follows = text[m.end():m.end() + 1]
        if follows and (follows.isidentifier() or follows.isdigit()):
            return True
    return False


class QuickTransformerManager(it2.TransformerManager):
    """IPython's input transformer, without its tokenizing pass on cells it would leave unchanged
    (parsing a cell costs a third of tokenizing it).

    ``compiler``: the shell's (a :class:`QuickCompiler`): the parse made here, with its flags, is
    handed to it, so that the cell is parsed once, not twice."""

    def __init__(self, compiler: QuickCompiler | None = None):
        super().__init__()
        self.compiler = compiler

    def do_token_transforms(self, lines: list[str]) -> list[str]:
        if self.token_transformers == DEFAULT_TOKEN_TRANSFORMS and not may_need_token_transform(lines):
            text = "".join(lines)
            flags = self.compiler.flags if self.compiler is not None else 0
            tree = parse(text, flags)
            if tree is not None:
                if self.compiler is not None and not warns_when_parsed(text):
                    self.compiler.parsed = (text, flags, tree)
                return lines
        return super().do_token_transforms(lines)


def may_be_async(cell: str) -> bool:
    """False only when ``cell`` cannot await at top level (IPython then compiles it to be sure):
    ``await``, ``async for``, ``async with`` and async comprehensions all spell ``await`` or ``async``."""
    return "await" in cell or "async" in cell


def murmur2(text: str, seed: int) -> int:
    """ipykernel's ``murmur2_x86`` (which names a cell's file, e.g. ``2707655447.py``), on whole
    4-byte words rather than byte by byte: the same value, ~2.5x faster."""
    m = 0x5BD1E995
    data = text.encode("utf8")
    length = len(data)
    h = seed ^ length
    words = length >> 2
    for k in struct.unpack_from(f"<{words}I", data):
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        h = ((h * m) & 0xFFFFFFFF) ^ ((k * m) & 0xFFFFFFFF)
    tail = data[words * 4:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


class QuickCompiler(kernel_compiler.XCachingCompiler):
    """A kernel's compiler (cells named as a kernel names them), with the faster hash, that takes a
    cell's parse from :class:`QuickTransformerManager` where it has one.

    ``parsed``: (text, flags, tree), the last parse handed over; it is used once, for that very text
    with the very flags it was parsed with (``compile`` gives the same tree for the same text and
    flags, whatever the file's name), and only where parsing it could not warn (a warning would
    otherwise come from the first parse, under another file name, not from this one)."""

    parsed: tuple[str, int, ast.Module] | None = None

    def ast_parse(self, source: str, filename: str = "<unknown>", symbol: str = "exec") -> ast.AST:
        parsed, self.parsed = self.parsed, None
        if parsed is not None and symbol == "exec" and parsed[1] == self.flags and parsed[0] == source:
            return parsed[2]
        return super().ast_parse(source, filename, symbol)

    def get_code_name(self, raw_code, code, number) -> str:
        name = os.environ.get("IPYKERNEL_CELL_NAME")
        if name is not None:
            return name
        digest = murmur2(raw_code, kernel_compiler.get_tmp_hash_seed())
        return kernel_compiler.get_tmp_directory() + os.sep + str(digest) + ".py"
