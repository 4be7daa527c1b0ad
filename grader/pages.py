"""Lean, inert HTML: a notebook's cells as markup that loads nothing and runs nothing.

Used by feedback pages (:mod:`grader.feedback`). What a page may contain: escaped text,
tables, links, and PNG/JPEG pictures inlined as ``data:`` URIs. Never a script, an event
handler, HTML or SVG from a notebook, nor anything fetched from a network: markdown's raw HTML
is escaped, a remote image becomes its alt text, and math stays as its TeX source
(``$e^w$``), set in a monospace font. The style lives in one stylesheet the pages link.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from pathlib import Path

import mistune

STYLESHEET = Path(__file__).with_name("templates") / "feedback.css"
#: No script, frame, plugin, form or fetch; pictures only from the page itself.
CSP = ("default-src 'none'; style-src 'self' file: 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'")
#: What of a learner's text output a page shows (a cell could print megabytes).
MAX_TEXT = 20_000
#: Largest picture (base64 characters) a page inlines.
MAX_IMAGE = 1_500_000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg);base64,[A-Za-z0-9+/=]+")


class _Renderer(mistune.HTMLRenderer):
    """Markdown with raw HTML escaped, math kept as TeX text, and no remote picture."""

    def inline_math(self, text: str) -> str:
        return f'<code class="math">${html.escape(text)}$</code>'

    def block_math(self, text: str) -> str:
        return f'<pre class="math">$${html.escape(text)}$$</pre>\n'

    def image(self, text: str, url: str, title: str | None = None) -> str:
        if _DATA_IMAGE.fullmatch(url or ""):
            return f'<img src="{url}" alt="{html.escape(text)}">'
        return f'<span class="alt">[picture: {html.escape(text)}]</span>' if text else ""


_markdown = mistune.create_markdown(renderer=_Renderer(escape=True), plugins=["math", "table", "strikethrough"])


@lru_cache(maxsize=512)
def markdown(text: str) -> str:
    """Markdown -> HTML (cached: every student's copy of a chapter has the same statements)."""
    if text.startswith("[![Open In Colab]"):  # the release's badge line: a remote picture
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return str(_markdown(text))


def text(value: object) -> str:
    """A notebook's multi-line string (a list of lines or a str), as one str."""
    return "".join(value) if isinstance(value, list) else str(value or "")


def pre(value: str, cls: str) -> str:
    """Escaped text in a ``<pre>``, ANSI colours removed, cut at :data:`MAX_TEXT` characters."""
    value = _ANSI.sub("", value)
    if len(value) > MAX_TEXT:
        value = value[:MAX_TEXT] + f"\n… ({len(value) - MAX_TEXT} more characters not shown)"
    return f'<pre class="{cls}">{html.escape(value)}</pre>'


def output(out: dict) -> str:
    """One output, inert: text, or a PNG/JPEG picture; nothing else is shown."""
    kind = out.get("output_type")
    if kind == "stream":
        return pre(text(out.get("text")), {"stderr": "err", "verdict": "verdict"}.get(out.get("name"), "out"))
    if kind == "error":
        tb = "\n".join(out.get("traceback") or []) or f"{out.get('ename')}: {out.get('evalue')}"
        return pre(tb, "err")
    data = out.get("data") or {}
    for mime in ("image/png", "image/jpeg"):
        b64 = text(data.get(mime, ""))
        if b64 and len(b64) <= MAX_IMAGE and _BASE64.fullmatch(b64):
            return f'<img src="data:{mime};base64,{"".join(b64.split())}" alt="picture output">'
    if "text/plain" in data:
        return pre(text(data["text/plain"]), "out")
    return ""


def cell(c: dict) -> str:
    """A cell: markdown rendered, code as escaped text with its outputs."""
    kind = c.get("cell_type")
    if kind == "markdown":
        return f'<div class="md">{markdown(text(c.get("source")))}</div>'
    if kind != "code":
        return pre(text(c.get("source")), "raw")
    outs = "".join(output(o) for o in c.get("outputs") or [])
    return f'<div class="cell">{pre(text(c.get("source")), "in")}{outs}</div>'


def page(title: str, head: str, cells: list[dict], stylesheet: str) -> str:
    """A whole page: ``head`` (our own HTML) on top, then the cells; ``stylesheet`` is a relative URL."""
    body = "\n".join(cell(c) for c in cells)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(title)}</title><link rel=\"stylesheet\" href=\"{html.escape(stylesheet)}\">"
        f"</head><body>\n<header>{head}</header>\n<main>\n{body}\n</main></body></html>\n"
    )
