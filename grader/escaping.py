"""Text for the tool that opens it: one escaping helper per medium the grader writes (CSV, Markdown, HTML).

Names (a student's folder), reasons and notes can hold any text a submission brought in. Every
cell of a CSV file, every cell of a Markdown table and every piece of text in an HTML page goes
through the helper of its medium, so that what was text when written is text when opened.
"""

from __future__ import annotations

import html
import re

#: What starts a formula in a spreadsheet (OWASP's CSV injection list, plus a line feed and the
#: full-width forms some spreadsheets read alike).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)
#: Markdown's characters that open code, a link, raw HTML or a table column, with what stands for each.
_MARKDOWN = str.maketrans({
    "\\": "\\\\", "`": "\\`", "|": "\\|", "[": "\\[", "]": "\\]",
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": " ", "\n": " ",
})


def csv_cell(value: object) -> object:
    """``value`` as a CSV cell a spreadsheet reads as text, never as a formula.

    Numbers stay numbers (an int or a float, or text that is one number, such as ``-1.5``);
    None is an empty cell; any other text that begins with a character in
    :data:`FORMULA_START` gets a single quote in front, as OWASP's guidance on CSV injection
    says (the quote shows, and the cell is text).
    """
    if value is None:
        return ""
    if type(value) in (int, float):
        return value
    text = str(value)
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def md_cell(value: object) -> str:
    """``value`` as the text of a Markdown table cell: one line, its backslashes, backticks, brackets,
    pipes and ``& < >`` escaped, so that it opens no code span, link, HTML tag or column."""
    return str(value).translate(_MARKDOWN)


def html_text(value: object) -> str:
    """``value`` as HTML text or an attribute's value (quotes escaped too)."""
    return html.escape(str(value), quote=True)
