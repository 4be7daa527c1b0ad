"""IPython's per-cell work in a fork child, skipped only where it provably cannot change the result.

Before running a cell, IPython tokenizes it to look for its own syntax (``%magic``, ``!shell``,
``obj?``), compiles it once more to see whether it awaits at top level, and a kernel's compiler
hashes it to name it. On a chapter-01 submission that is ~30 ms of a ~290 ms child, nearly all
of it on cells that hold none of that syntax. Each shortcut here returns what IPython would
return, and defers to IPython whenever it cannot be sure (``tests/test_quickshell.py`` compares
both on every cell of the course and on generated text).
"""

from __future__ import annotations

import ast
import os
import struct

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


def parses(text: str) -> bool:
    """Whether ``text`` is Python the parser accepts; then IPython's tokenizer cannot fail on it
    either (a cell it fails on, e.g. with a dedent to no enclosing level, gets IPython's own error)."""
    try:
        compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST, True)
    except Exception:
        return False
    return True


class QuickTransformerManager(it2.TransformerManager):
    """IPython's input transformer, without its tokenizing pass on cells it would leave unchanged
    (parsing a cell costs a third of tokenizing it)."""

    def do_token_transforms(self, lines: list[str]) -> list[str]:
        if (self.token_transformers == DEFAULT_TOKEN_TRANSFORMS and not may_need_token_transform(lines)
                and parses("".join(lines))):
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
    """A kernel's compiler (cells named as a kernel names them), with the faster hash."""

    def get_code_name(self, raw_code, code, number) -> str:
        name = os.environ.get("IPYKERNEL_CELL_NAME")
        if name is not None:
            return name
        digest = murmur2(raw_code, kernel_compiler.get_tmp_hash_seed())
        return kernel_compiler.get_tmp_directory() + os.sep + str(digest) + ".py"
