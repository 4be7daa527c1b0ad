"""Lint of claims: a chapter that says something is faster or smaller measures it.

Every sentence of a chapter must be true on the machine that runs it, so a claim about speed
or size is measured, or asserted, by code that runs. Rules, per markdown cell of a chapter's
source notebook (``solutions/*/*.ipynb``):

1. **Claims.** The cell's prose (fenced code blocks, inline code and LaTeX left out) claims a
   *speed* when it says fast(er), slow(er), quicker, speed-up, "N× / Nx / N times / several
   times" followed by a comparative (faster, smaller, less, ...), "orders of magnitude", a
   throughput (GB/s, MB/s, FLOP/s, it/s), a duration ("0.3 ms", "2 s", "under a second"),
   "instant(ly)", "immediately", "(takes) no time", "a speed cost"; it claims a *size* when it
   gives an amount of memory ("64 MiB", "40 GB", "4000 bytes"), says that something halves or
   doubles the memory / size / time, "twice the" / "half the" memory, "less / more / extra /
   no memory", "costs / saves / wastes ... memory / bytes / an allocation", "takes / uses /
   needs <an amount> memory"; "cheap(er)", "expensive", "costly", "is free", "for free",
   "costs nothing" claim either. A word in another sense ("rounds halves to even", "6x" in a
   formula, "used several times") is not a claim.
2. **Measurements.** The first code cell after it (markdown cells and a learner's prediction,
   ``guess = ...``, in between are skipped)
   measures a speed when it calls a clock or a timer: ``time.perf_counter`` (and ``time``,
   ``monotonic``, ``process_time``, their ``_ns`` forms), ``timeit``, ``torch.utils.benchmark``
   (``Timer``, ``blocked_autorange``, ``adaptive_autorange``, ``timeit``), ``%timeit``, or a
   function an earlier code cell of the notebook defined that calls one. It measures a size
   when an ``assert`` or a check (``check_tensor``, ``check_value``, ``check_shape``, any
   ``check_*``) mentions ``numel``, ``element_size``, ``nbytes``, ``itemsize``,
   ``untyped_storage``, ``getsizeof``, ``tracemalloc``, ``memory_allocated``,
   ``memory_reserved``, ``max_memory_allocated``, ``mem_get_info`` or ``total_memory``, or
   ``data_ptr`` / ``shares_memory`` (the measure of "no copy", "saves an allocation").
   A claim of "either" kind is satisfied by either measurement.
3. **Silencing.** Where the lint is wrong (a claim measured in another cell, a statement about
   hardware the notebook cannot have, a word used in another sense), the markdown cell says why
   in its metadata: ``{"course": {"claims_ok": "measured in section 9's cell"}}``. The reason
   must be a non-empty string; an empty or missing reason, or a silence on a cell that claims
   nothing, is itself an error (a silence must not outlive its claim).

Code cells' comments are not checked: they sit next to the code that runs.

Usage: ``python ci/claim_lint.py [NOTEBOOK ...]`` (default: every chapter's source).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPEED, SIZE, EITHER = "speed", "size", "either"

_UNIT = r"(?:[KMGT]i?B|bytes?|[KMGT]B)"
_MORE = r"(?:faster|slower|quicker|cheaper|smaller|larger|bigger|less|more|fewer|as fast|as slow)"
_QUANTITY = r"(?:\d[\d,.]*\s*\w*|no|less|more|twice|half|extra|little|a lot of|much)"
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (SPEED, re.compile(r"\b(?:faster|slower|quicker|fastest|slowest)\b", re.I)),
    (SPEED, re.compile(r"\b(?:slow|fast)\b", re.I)),
    (SPEED, re.compile(r"\bspeed(?:s|ed)?[- ]?ups?\b", re.I)),
    (SPEED, re.compile(rf"\b\d+(?:\.\d+)?\s*(?:×|x)\s+{_MORE}\b", re.I)),
    (SPEED, re.compile(rf"\b(?:[\d,.]+|two|three|four|five|ten|hundreds?|thousands?|many|several)\s+times"
                       rf"\s+{_MORE}\b", re.I)),
    (SPEED, re.compile(r"\borders? of magnitude\b", re.I)),
    (SPEED, re.compile(r"\b(?:[KMGT]i?B|[KMGT]?FLOPS?|it|samples|bytes)/s\b")),
    (SPEED, re.compile(r"\b\d+(?:\.\d+)?(?:\s*(?:ns|µs|us|ms)|\s+(?:s|sec|seconds?|minutes?))\b")),
    (SPEED, re.compile(r"\b(?:under|within|less than|about) (?:a|one) (?:second|millisecond|minute)\b", re.I)),
    (SPEED, re.compile(r"\b(?:instant(?:ly|aneous)?|immediately|(?:in|takes?|costs?|and) no time)\b", re.I)),
    (SPEED, re.compile(r"\b(?:speed|performance|time) (?:cost|penalty|price)s?\b", re.I)),
    (SIZE, re.compile(rf"\b\d[\d,_.]*\s*{_UNIT}(?![/\w])")),
    (SIZE, re.compile(r"\b(?:halv(?:e|es|ed|ing)|doubl(?:e|es|ed|ing)|quadruples?)\b(?:\s+[\w-]+){0,3}?"
                      r"\s+(?:memory|size|bytes|time|speed|cost|footprint|throughput)\b", re.I)),
    (SIZE, re.compile(r"\b(?:twice|half) the (?:memory|size|bytes|space)\b", re.I)),
    (SIZE, re.compile(r"\b(?:less|more|extra|no|twice as much|half as much) memory\b", re.I)),
    (SIZE, re.compile(r"\b(?:costs?|saves?|saving|wastes?)\b[^.;:,]{0,40}?\b(?:memory|bytes|allocations?)\b", re.I)),
    (SIZE, re.compile(rf"\b(?:takes?|uses?|needs?|occup(?:y|ies))\s+{_QUANTITY}\s+(?:memory|bytes)\b", re.I)),
    (EITHER, re.compile(r"\b(?:cheap|cheaper|cheapest|expensive|costly|for free|costs? nothing)\b", re.I)),
    (EITHER, re.compile(r"\b(?:is|are|be|being|stays?|comes?) (?:almost |nearly |essentially )?free\b", re.I)),
]

TIMERS = {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns",
          "process_time", "process_time_ns", "timeit", "repeat", "Timer", "blocked_autorange",
          "adaptive_autorange"}
TIMER_MODULES = {"time", "timeit", "benchmark"}
TIMER_METHODS = {"timeit", "blocked_autorange", "adaptive_autorange"}  # on any object: a Timer's
#: A learner's prediction (``guess = ...``) measures nothing: the code cell after it does.
GUESS = re.compile(r"guess = \.\.\.(?:  #[^\n]*)?")
SIZE_WORDS = {"numel", "element_size", "nbytes", "itemsize", "untyped_storage", "getsizeof",
              "tracemalloc", "memory_allocated", "memory_reserved", "max_memory_allocated",
              "mem_get_info", "total_memory", "data_ptr", "shares_memory"}


@dataclass(frozen=True)
class Claim:
    """One phrase of a markdown cell that claims a speed or a size."""

    kind: str
    text: str


def prose(markdown: str) -> str:
    """The cell's text without fenced code, inline code, LaTeX and link targets."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", " ", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


def claims_in(markdown: str) -> list[Claim]:
    """Every phrase of ``markdown`` that claims a speed or a size, in order."""
    text = prose(markdown)
    found = []
    for kind, pattern in PATTERNS:
        for m in pattern.finditer(text):
            found.append((m.start(), m.end(), Claim(kind, " ".join(m.group(0).split()))))
    out, last_end = [], -1
    for start, end, claim in sorted(found, key=lambda f: (f[0], f[0] - f[1])):
        if start >= last_end:  # of overlapping phrases, the first and longest
            out.append(claim)
            last_end = end
    return out


def _parse(code: str) -> ast.AST | None:
    lines = [("pass  # " + ln) if ln.lstrip().startswith(("%", "!")) else ln for ln in code.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def names_in(node: ast.AST) -> set[str]:
    """Every name and attribute name in ``node``."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def _called(node: ast.Call) -> tuple[str, str]:
    """(owner, name) of a call: ``time.perf_counter()`` -> ("time", "perf_counter")."""
    func = node.func
    if isinstance(func, ast.Attribute):
        owner = func.value
        owner_name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
        return owner_name, func.attr
    return "", func.id if isinstance(func, ast.Name) else ""


def _is_timer_call(node: ast.Call, timers: set[str]) -> bool:
    owner, name = _called(node)
    if name in TIMER_METHODS:
        return True
    if owner in TIMER_MODULES:
        return name in TIMERS
    return not owner and (name in timers or name in TIMERS - {"time", "repeat"})


def measures(code: str, timers: set[str] = frozenset()) -> set[str]:
    """What a code cell measures: {"speed", "size"} or a part of it.

    ``timers`` are functions defined earlier in the notebook that read a clock.
    """
    if re.search(r"^\s*%%?timeit\b", code, re.M):
        return {SPEED} | (measures(re.sub(r"^\s*%%?timeit.*$", "", code, flags=re.M), timers) & {SIZE})
    tree = _parse(code)
    if tree is None:
        return set()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_timer_call(node, set(timers)):
            out.add(SPEED)
        checked = isinstance(node, ast.Assert) or (
            isinstance(node, ast.Call) and _called(node)[1].startswith("check_"))
        if checked and names_in(node) & SIZE_WORDS:
            out.add(SIZE)
    return out


def timer_functions(code: str, timers: set[str]) -> set[str]:
    """Names of the functions ``code`` defines that read a clock (directly or through ``timers``)."""
    tree = _parse(code)
    if tree is None:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
            if any(_is_timer_call(c, timers | found) for c in calls):
                found.add(node.name)
    return found


def silence(cell: Any) -> tuple[bool, str | None]:
    """(whether the cell silences the lint, the problem with its reason or None)."""
    course = cell.get("metadata", {}).get("course", {})
    if not isinstance(course, dict) or "claims_ok" not in course:
        return False, None
    reason = course["claims_ok"]
    if not isinstance(reason, str) or not reason.strip():
        return True, "metadata.course.claims_ok must give a reason (a non-empty string)"
    return True, None


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def problems_in_cells(cells: list[Any], label: str = "") -> list[str]:
    """Every rule broken by a notebook's cells (dicts or nbformat nodes)."""
    out = []
    timers: set[str] = set()
    code_after: list[str | None] = [None] * len(cells)
    nxt = None
    for i in range(len(cells) - 1, -1, -1):
        code_after[i] = nxt
        if cells[i].get("cell_type") == "code" and not GUESS.fullmatch(_source(cells[i]).strip()):
            nxt = _source(cells[i])
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code":
            timers |= timer_functions(_source(cell), timers)
            continue
        if cell.get("cell_type") != "markdown":
            continue
        where = f"{label}cell {i}"
        silenced, bad_reason = silence(cell)
        claims = claims_in(_source(cell))
        if bad_reason:
            out.append(f"{where}: {bad_reason}")
        if silenced:
            if not claims:
                out.append(f"{where}: metadata.course.claims_ok silences a cell that claims no speed or size")
            continue
        following = code_after[i]
        measured = measures(following, timers) if following is not None else set()
        unmeasured = [c for c in claims if not (measured & ({SPEED, SIZE} if c.kind == EITHER else {c.kind}))]
        if unmeasured:
            phrases = ", ".join(dict.fromkeys(f"{c.text!r} ({c.kind})" for c in unmeasured))
            out.append(f"{where}: claims {phrases}, but the next code cell does not measure it:"
                       " time it or assert the size there, reword, or set metadata.course.claims_ok"
                       " to the reason it holds")
    return out


def problems(notebook: Path) -> list[str]:
    """Every rule broken by one source notebook."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    return problems_in_cells(nb.cells)


def main(argv: list[str]) -> int:
    from hidden_lint import run  # the same command line as the hidden-test lint

    return run(problems, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
