"""A statement promises only what is observed: every requirement an exercise states about the
device, the order of steps, autograd, loops or what not to create is listed in its chapter's
``grading.toml`` (``[requirements.<answer cell>]``, phrase = observer) with the test or the rule
that observes it, and each listed observer is really there.

An observer is ``rule: <field>`` (the exercise's rule sets that field), ``test: <text>`` (the
exercise's test cell holds that text: the case that reveals the requirement), ``none: <why>`` (the
sentence states no requirement: it describes the reference, or says where to start) or ``open: <why>``
for a known gap, pinned in :data:`OPEN`.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from grader import cells, project

#: the kinds of requirement that values on ordinary inputs cannot reveal: each needs a case of its own
KINDS = re.compile(r"in that order|autograd|loop|not\*\* create|not create|device", re.I)
HEADING = re.compile(r"##+ Exercise \d+\b")
#: promises stated and not yet observed (a device case is missing): each is a known gap, listed
#: here so that a new one is a decision and a fixed one is taken off. None is open: a promise no
#: case can observe fairly is not stated, and a meta-device case (which refuses an answer that
#: reads its data) is stated in the exercise's own statement (tests/test_chapters.py checks it).
OPEN: set[tuple[str, str]] = set()


def statements(chapter: str) -> dict[str, tuple[list[str], str]]:
    """Answer grade_id -> (the sentences of its statement that state a requirement of :data:`KINDS`,
    the source of its test cell)."""
    nb = nbformat.read(str(project.source_notebook(chapter)), as_version=4)
    out, start, answer = {}, None, None
    for i, c in enumerate(nb.cells):
        if c.cell_type == "markdown" and HEADING.match(c.source):
            start = i
        elif cells.is_solution(c) and start is not None:
            text = "\n".join(x.source for x in nb.cells[start:i] if x.cell_type == "markdown")
            text = re.sub(r"```.*?```", "", text, flags=re.S)
            lines = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
            sentences = [" ".join(s.split()) for s in re.split(r"(?<=[.!?])\s+|\n\s*[-*] |\n\n", lines)]
            answer, start = cells.grade_id(c), None
            out[answer] = ([s for s in sentences if KINDS.search(s)], "")
        elif cells.is_test(c) and answer is not None:
            out[answer] = (out[answer][0], cells.source_text(c))
            answer = None
    return out


@pytest.mark.parametrize("chapter", project.chapters())
def test_every_stated_requirement_is_listed_with_what_observes_it(chapter):
    settings = project.grading_settings(project.source_notebook(chapter).parent)
    listed = settings.get("requirements", {})
    unlisted = [(gid, s) for gid, (sentences, _) in statements(chapter).items() for s in sentences
                if not any(phrase in s for phrase in listed.get(gid, {}))]
    assert not unlisted, f"{chapter}: list these in grading.toml [requirements.<answer>]: {unlisted}"


@pytest.mark.parametrize("chapter", project.chapters())
def test_every_listed_observer_is_there(chapter):
    settings = project.grading_settings(project.source_notebook(chapter).parent)
    rules = settings.get("rules", {})
    found = statements(chapter)
    for gid, table in settings.get("requirements", {}).items():
        assert gid in found, f"{chapter}: [requirements.{gid}] names no answer cell"
        sentences, test = found[gid]
        for phrase, observer in table.items():
            assert any(phrase in s for s in sentences), f"{chapter}:{gid}: {phrase!r} is in no statement sentence"
            kind, _, what = str(observer).partition(":")
            what = what.strip()
            if kind == "rule":
                assert rules.get(gid, {}).get(what), f"{chapter}:{gid}: no rule sets {what} ({phrase!r})"
            elif kind == "test":
                assert what and what in test, f"{chapter}:{gid}: the test holds no {what!r} ({phrase!r})"
            elif kind == "open":
                assert (chapter, gid) in OPEN and what, f"{chapter}:{gid}: {phrase!r} is observed by nothing"
            else:
                assert kind == "none" and len(what) > 10, f"{chapter}:{gid}: {phrase!r} -> {observer!r}"


def test_the_known_open_promises_are_the_listed_ones():
    found = {(chapter, gid) for chapter in project.chapters() for gid, table in project.grading_settings(
        project.source_notebook(chapter).parent).get("requirements", {}).items()
        if any(str(o).startswith("open:") for o in table.values())}
    assert found == OPEN
