"""Lean, inert HTML: a notebook's cells as markup that loads nothing and runs nothing.

Used by feedback pages (:mod:`grader.pages.feedback`). A notebook is read through :func:`valid_cells`
first, which holds it to nbformat's schema, so that no output of the wrong type stops a page.
What a page may contain: escaped text,
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
from typing import Any

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
#: The cell metadata a page reads (tags and nbgrader's), with the types nbformat and nbgrader give them.
_NBGRADER = {"grade_id": str, "grade": bool, "solution": bool, "locked": bool, "task": bool, "points": (int, float)}


def multiline(value: Any) -> str | None:
    """nbformat's multi-line string (a str, or a list of str) as one str; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


def valid_output(out: Any) -> dict | None:
    """One output as nbformat's schema (v4) has it, its text joined into one str; None for an
    output that cannot be made so (left out of the page). A MIME type whose value has the wrong
    type is dropped; JSON data (``*json``) is kept as it came, and never shown."""
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        text = multiline(out.get("text"))
        return None if text is None else {"output_type": kind, "name": "stderr" if out.get("name") == "stderr"
                                          else "stdout", "text": text}
    if kind == "error":
        tb = out.get("traceback")
        return {"output_type": kind, "ename": out.get("ename") if isinstance(out.get("ename"), str) else "",
                "evalue": out.get("evalue") if isinstance(out.get("evalue"), str) else "",
                "traceback": [line for line in tb if isinstance(line, str)] if isinstance(tb, list) else []}
    if kind not in ("display_data", "execute_result") or not isinstance(out.get("data"), dict):
        return None
    data = {}
    for mime, value in out["data"].items():
        if isinstance(mime, str) and mime.endswith("json"):
            data[mime] = value
        elif isinstance(mime, str) and multiline(value) is not None:
            data[mime] = multiline(value)
    return {"output_type": kind, "data": data, "metadata": {}}


def _metadata(meta: Any) -> dict:
    out: dict = {}
    if isinstance(meta, dict) and isinstance(meta.get("tags"), list):
        out["tags"] = [t for t in meta["tags"] if isinstance(t, str)]
    if isinstance(meta, dict) and isinstance(meta.get("nbgrader"), dict):
        out["nbgrader"] = {k: v for k, v in meta["nbgrader"].items() if k in _NBGRADER and isinstance(v, _NBGRADER[k])}
    return out


def valid_cells(nb: Any) -> list[dict]:
    """A notebook's cells (its parsed JSON) as the pages read them: each cell and output held to
    nbformat's schema (:func:`valid_output`), text joined, metadata cut to what a page reads.
    A cell of no known type is left out; a source of the wrong type is empty."""
    found = nb.get("cells") if isinstance(nb, dict) else None
    kept = []
    for c in found if isinstance(found, list) else []:
        if not isinstance(c, dict) or c.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        cell = {"cell_type": c["cell_type"], "source": multiline(c.get("source")) or "",
                "metadata": _metadata(c.get("metadata"))}
        if cell["cell_type"] == "code":
            outs = c.get("outputs")
            cell["outputs"] = [o for o in map(valid_output, outs if isinstance(outs, list) else []) if o is not None]
            count = c.get("execution_count")
            cell["execution_count"] = count if type(count) is int else None
        kept.append(cell)
    return kept


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
