"""An answer cell's syntax error, told from the grader's own parse of its source (never from what the learner's process printed)."""

from __future__ import annotations

import ast

from nbformat import NotebookNode

from grader import cells


def syntax_error(nb: NotebookNode, test_index: int) -> str | None:
    """The reason for a test whose answer cell (the one before it) has a syntax error, from the
    grader's own parse of the cell's source (never from what the learner's process printed):
    "your answer cell has a syntax error at line N", N counted as the learner's cell shows it."""
    for cell in reversed(nb.cells[:test_index]):
        if cells.is_test(cell):
            return None
        if cells.is_solution(cell) and cell.get("cell_type") == "code":
            found = _parse_error(cells.source_text(cell))
            if found is not None:
                kind, line = found
                at = f" at line {line}" if line else ""
                return (f"your answer cell has a syntax error{at} ({kind}), so Python ran none of it and"
                        " nothing in it was defined: fix that line and run the cell again")
    return None


def _parse_error(source: str) -> tuple[str, int | None] | None:
    """(SyntaxError, IndentationError or TabError; its line) when ``source`` does not parse as
    a notebook cell (IPython's magics allowed); None when it does, or when the grader cannot tell."""
    try:
        ast.parse(source)
        return None
    except SyntaxError as exc:
        kind, line = type(exc).__name__, exc.lineno
    except (ValueError, RecursionError, MemoryError):
        return None
    try:  # a magic (`%time`, `!pip`) is no syntax error in a notebook: parse what IPython runs
        from IPython.core.inputtransformer2 import TransformerManager

        ast.parse(TransformerManager().transform_cell(source))
        return None
    except SyntaxError:
        return kind, line if isinstance(line, int) and 0 < line <= source.count("\n") + 1 else None
    except Exception:  # noqa: BLE001 - a cell IPython cannot transform: no claim either way
        return None
