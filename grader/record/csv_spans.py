"""A CSV file read with where each cell lies in its text, so that one cell is replaced and every other byte kept.

An LMS's own file (Canvas's gradebook, Moodle's grading worksheet) goes back to the LMS: its
quoting, line ends (Moodle writes CRLF), byte-order mark and columns the grader does not know
must stay as they were. :func:`read` gives each record's cells with their spans; :func:`replaced`
writes new values into chosen cells and copies the rest of the text unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.exceptions import LmsFileError


@dataclass(frozen=True)
class Cell:
    value: str
    start: int
    end: int


def delimiter(text: str) -> str:
    """The delimiter of a CSV text: the one of ``,``, ``;`` and tab its first line holds most of."""
    first = text.split("\n", 1)[0]
    return max(",;\t", key=first.count)


def read(text: str, sep: str = ",") -> list[list[Cell]]:
    """The records of ``text``, each a list of cells with their spans (a quoted cell's span
    includes its quotes). A last line end ends the last record; it opens no empty one.

    Raises:
        LmsFileError: a quote left open, or text after a closing quote.
    """
    records: list[list[Cell]] = []
    record: list[Cell] = []
    i, n = 0, len(text)
    while i < n:
        start = i
        if text[i] == '"':
            parts, j = [], i + 1
            while True:
                k = text.find('"', j)
                if k < 0:
                    raise LmsFileError(f"a quote opened at character {start} is never closed")
                parts.append(text[j:k])
                if text.startswith('""', k):
                    parts.append('"')
                    j = k + 2
                    continue
                j = k + 1
                break
            value, end = "".join(parts), j
        else:
            end = i
            while end < n and text[end] not in (sep, "\r", "\n"):
                end += 1
            value = text[i:end]
        record.append(Cell(value, start, end))
        if end >= n:
            break
        if text[end] == sep:
            i = end + 1
            if i == n:  # a last empty cell
                record.append(Cell("", n, n))
            continue
        if text[end] not in "\r\n":
            raise LmsFileError(f"text after a closing quote at character {end}")
        records.append(record)
        record = []
        i = end + (2 if text.startswith("\r\n", end) else 1)
    if record:
        records.append(record)
    return records


def quoted(value: str, sep: str) -> str:
    """``value`` as a CSV cell: quoted only where it must be."""
    if any(c in value for c in (sep, '"', "\r", "\n")):
        return '"' + value.replace('"', '""') + '"'
    return value


def replaced(text: str, changes: dict[tuple[int, int], str], records: list[list[Cell]], sep: str) -> str:
    """``text`` with the cell at each (record, column) of ``changes`` holding its new value."""
    spans = sorted(((records[r][c], value) for (r, c), value in changes.items()), key=lambda cv: cv[0].start)
    out, at = [], 0
    for cell, value in spans:
        out += [text[at:cell.start], quoted(value, sep)]
        at = cell.end
    return "".join(out) + text[at:]
