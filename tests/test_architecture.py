"""The grader's shape: no import circle, no module over 350 lines, every module in a stage, and the
picture of it (docs/architecture.svg, drawn by ci/architecture.py) as the code has it."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import architecture
import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 350


@pytest.mark.parametrize("package", ["grader", "course_utils"])
def test_no_module_imports_itself_through_others(package):
    """Every import counts, a late one inside a function and one for type checkers only too: a
    late import is a dependency all the same, only deferred."""
    assert architecture.cycles(architecture.graph(package)) == []


def test_the_circle_finder_finds_a_circle_of_late_imports():
    edges = {"a": {"b": architecture.TOP}, "b": {"c": architecture.LATE}, "c": {"a": architecture.TYPING},
             "d": {"a": architecture.TOP}}
    assert architecture.cycles(edges) == [["a", "b", "c"]]


def test_imports_inside_functions_and_for_type_checkers_are_read():
    edges = architecture.graph()
    assert edges["grader.execute.dispatch"]["grader.execute.distributed"] == architecture.LATE
    assert edges["grader.execute.dispatch"]["grader.execute.watchdog"] == architecture.TOP
    assert edges["grader.pages.report_html"]["grader.pages.report_tables"] == architecture.TOP
    assert edges["grader.record.fingerprints"]["grader.intake.workspace"] == architecture.TYPING


@pytest.mark.parametrize("package", ["grader", "course_utils"])
def test_no_module_is_over_350_lines(package):
    long = {name: n for name, path in architecture.modules(package).items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these along a seam they have: {long}"


def test_every_module_of_the_grader_has_its_stage_and_no_stage_names_a_module_that_is_gone():
    placed = architecture.stage_of()
    found = set(architecture.modules())
    assert found - set(placed) == set(), "place each new module in ci/architecture.py's STAGES"
    assert set(placed) - found == set()
    names = [m for _, (_, modules) in architecture.STAGES.items() for m in modules]
    assert len(names) == len(set(names)), "a module in two stages"


def test_the_dot_source_has_a_cluster_per_stage_and_an_arrow_per_import():
    edges = architecture.graph()
    source = architecture.dot_source(edges)
    for stage in ("commands", "intake", "prepare", "execute", "verdict", "record", "pages", "shared"):
        assert f"subgraph cluster_{stage} {{" in source
    assert source.count(" -> ") == sum(len(t) for t in edges.values())
    assert '"grader.grade" -> "grader.execute.dispatch";' in source
    assert '"grader.execute.dispatch" -> "grader.execute.distributed" [style=dashed];' in source


def _svg_titles(svg: str) -> tuple[set[str], set[str], set[str]]:
    """(nodes, edges, clusters) of a graphviz SVG, by their titles."""
    ns = {"svg": "http://www.w3.org/2000/svg"}
    found: dict[str, set[str]] = {"node": set(), "edge": set(), "cluster": set()}
    for group in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"):
        title = group.find("svg:title", ns)
        if group.get("class") in found and title is not None:
            found[group.get("class")].add(title.text)
    return found["node"], found["edge"], found["cluster"]


def test_the_committed_picture_shows_the_import_graph_the_code_has():
    """docs/architecture.svg is regenerated with `python ci/architecture.py` after a module or an
    import changes; its nodes, arrows and stages are compared here, not its layout (which the
    version of graphviz decides)."""
    edges = architecture.graph()
    nodes, arrows, clusters = _svg_titles(architecture.SVG.read_text(encoding="utf-8"))
    assert nodes == set(edges), "run `python ci/architecture.py` and commit docs/architecture.svg"
    assert arrows == {f"{m}->{t}" for m, targets in edges.items() for t in targets}, \
        "run `python ci/architecture.py` and commit docs/architecture.svg"
    assert clusters == {f"cluster_{stage}" for stage in architecture.STAGES}


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed (make test-deps)")
def test_the_script_draws_the_picture_with_dot(tmp_path):
    source = architecture.dot_source()
    out = architecture.render(source, tmp_path / "architecture.svg")
    nodes, _, clusters = _svg_titles(out.read_text(encoding="utf-8"))
    assert "grader.grade" in nodes and "cluster_verdict" in clusters


def test_the_committed_pipeline_picture_has_every_stage_and_the_imports_between_stages():
    """docs/pipeline.svg: the stages as boxes, an arrow where one stage's modules import another's."""
    nodes, arrows, _ = _svg_titles(architecture.PIPELINE_SVG.read_text(encoding="utf-8"))
    assert nodes == set(architecture.STAGES), "run `python ci/architecture.py` and commit docs/pipeline.svg"
    assert arrows == {f"{a}->{b}" for a, b in architecture.stage_edges()}, \
        "run `python ci/architecture.py` and commit docs/pipeline.svg"
    assert ("commands", "intake") in architecture.stage_edges()


def test_the_folders_show_the_stages_and_few_modules_lie_loose():
    """A stage's modules live in its folder of grader/ (intake/, prepare/, execute/ and engines/,
    verdict/, record/, pages/, cli/), and at most ten modules lie loose beside grade.py's pipeline."""
    for module, stage in architecture.stage_of().items():
        parts = module.split(".")
        if len(parts) == 2:
            assert stage in ("commands", "shared"), f"{module} lies loose in grader/ but is in stage {stage}"
        else:
            assert parts[1] in architecture.FOLDERS[stage], f"{module} is in stage {stage}, not in its folder"
    loose = [m for m in architecture.modules() if m.count(".") == 1]
    assert "grader.grade" in loose and len(loose) <= 10, loose


def test_the_engines_are_three_packages_and_what_confines_serves_both():
    """``engines/`` holds what both engines share (``execution.py``) beside three packages:
    ``kernel/``, ``fork/`` and ``isolation/``. Isolation imports neither engine, and neither engine
    the other, so docs/isolation.md's subject is one package that both engines use."""
    loose = [m for m in architecture.modules() if m.startswith("grader.engines.") and m.count(".") == 2]
    assert loose == ["grader.engines.execution"]

    def package(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) == 4 and parts[1] == "engines" else None

    assert {package(m) for m in architecture.modules()} - {None} == {"kernel", "fork", "isolation"}
    forbidden = {"isolation": {"kernel", "fork"}, "kernel": {"fork"}, "fork": {"kernel"}}
    crossing = [(m, t) for m, targets in architecture.graph().items() for t in targets
                if package(t) in forbidden.get(package(m), set())]
    assert crossing == []
