"""Fixed expectations: what each exercise's answer must give, known without its solution, checked on the solution.

The reference run (:mod:`grader.verdict.reference`) makes the chapter's solution the oracle of
every hidden test; a wrong solution would then fail every correct learner. So each exercise
keeps, in ``solutions/<chapter>/expectations.toml``, expectations that do not come from the
solution: the statement's worked example, a literal of the visible test, a property (a shape,
idempotence)::

    [[expect.ex1_tensor_bytes]]
    expr = "tensor_bytes(torch.zeros(3, 4))"   # run in the solution's namespace
    equals = 48                                # omitted: the expression must be True
    why = "the statement's example"

They run in the reference's own process (pristine: no learner code) after the solution's cells,
one cell appended there and nowhere else; the coordinator compares what that cell printed. A
chapter whose solution fails one is not graded (:func:`grader.verdict.reference.run`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import tomllib
from nbformat import NotebookNode

FILE = "expectations.toml"
MARK = "COURSE-FIXED-EXPECTATIONS "
_TRUE = object()  # no ``equals``: the expression must be True


@dataclass(frozen=True)
class Fixed:
    """One expectation of an exercise (its answer cell's grade id)."""

    exercise: str
    expr: str
    equals: Any = _TRUE
    tol: float = 1e-6
    why: str = ""

    def wanted(self) -> str:
        return "True" if self.equals is _TRUE else json.dumps(self.equals)


def path(chapter_dir: Path) -> Path:
    return Path(chapter_dir) / FILE


def load(chapter_dir: Path) -> list[Fixed]:
    """The expectations of a chapter ([] without the file).

    Raises:
        OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError: the file is there but malformed.
    """
    file = path(chapter_dir)
    if not file.is_file():
        return []
    data = tomllib.loads(file.read_text(encoding="utf-8")).get("expect", {})
    found = []
    for exercise, items in data.items():
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, dict) or not isinstance(item.get("expr"), str):
                raise ValueError(f"{file}: expect.{exercise}: each expectation needs an expr")
            found.append(Fixed(exercise, item["expr"], item.get("equals", _TRUE), float(item.get("tol", 1e-6)),
                               str(item.get("why", ""))))
    return found


def cell(checks: list[Fixed]) -> NotebookNode:
    """The cell appended to the reference's notebook: each expression evaluated in the solution's
    namespace, its value printed as plain data (tensors and arrays as lists, a dtype or a device as text)."""
    exprs = json.dumps([c.expr for c in checks])
    source = f'''\
def __course_fixed():
    import json as _json

    def plain(v):
        if hasattr(v, "tolist") and callable(v.tolist):
            v = v.tolist()
        if isinstance(v, (list, tuple)) or type(v).__name__ == "Size":
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {{str(k): plain(x) for k, x in v.items()}}
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        return str(v)

    out = []
    for expr in _json.loads({exprs!r}):
        try:
            out.append({{"value": plain(eval(expr, globals()))}})
        except Exception as exc:  # noqa: BLE001
            out.append({{"raised": type(exc).__name__ + ": " + str(exc)[:200]}})
    print({MARK!r} + _json.dumps(out, default=str))


__course_fixed()
'''
    return nbformat.v4.new_code_cell(source, metadata={"course": {"fixed_expectations": True}})


def same(actual: Any, expected: Any, tol: float) -> bool:
    """Whether ``actual`` is ``expected``: numbers within ``tol`` (bools exactly), lists item by item."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual is expected
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(actual, expected, rel_tol=tol, abs_tol=tol) or (math.isnan(actual) and math.isnan(expected))
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(same(a, e, tol) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(same(actual[k], expected[k], tol) for k in expected)
    return actual == expected


def failures(nb: NotebookNode, checks: list[Fixed]) -> list[str]:
    """What the solution's run got wrong: one line per expectation it failed (or all, when the
    appended cell printed nothing readable)."""
    if not checks:
        return []
    printed = ""
    for c in nb.cells:
        if (c.get("metadata", {}).get("course") or {}).get("fixed_expectations"):
            printed = "".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream")
    line = next((x[len(MARK):] for x in printed.splitlines() if x.startswith(MARK)), None)
    try:
        got = json.loads(line) if line is not None else None
    except ValueError:
        got = None
    if not isinstance(got, list) or len(got) != len(checks):
        return [f"{checks[0].exercise}: the expectations' cell printed nothing readable"]
    wrong = []
    for check, result in zip(checks, got, strict=True):
        if "raised" in result:
            wrong.append(f"{check.exercise}: {check.expr} raised {result['raised']}")
        elif not same(result.get("value"), True if check.equals is _TRUE else check.equals, check.tol):
            shown = json.dumps(result.get("value"), default=str)[:200]
            wrong.append(f"{check.exercise}: {check.expr} gave {shown}, expected {check.wanted()}"
                         + (f" ({check.why})" if check.why else ""))
    return wrong
