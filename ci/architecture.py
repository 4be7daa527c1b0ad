"""The grader's module import graph, read from the code and drawn by the pipeline's stages.

Every module of ``grader`` is found (:func:`modules`), its ``import grader...`` and
``from grader... import`` statements are read with :mod:`ast` -- at the top, inside functions
(imported late, drawn dashed) and under ``if TYPE_CHECKING:`` (dotted) -- and each module is
placed in its stage (:data:`STAGES`). The picture is ``docs/architecture.svg``; tests hold it to
the code (``tests/test_architecture.py``), which also finds no circle in the graph.

Usage: ``python ci/architecture.py`` writes ``docs/architecture.svg`` with graphviz's ``dot``
(``make test-deps`` installs it); ``--dot`` prints the DOT source instead.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SVG = ROOT / "docs" / "architecture.svg"
#: the same graph with each stage drawn as one box: the pipeline at a glance
PIPELINE_SVG = ROOT / "docs" / "pipeline.svg"

#: How an import is made: at the top of its module, inside a function (when it runs), or for
#: type checkers only (never at run time).
TOP, LATE, TYPING = "top", "late", "typing"

#: The pipeline's stages, in the order a submission meets them, each with the modules it holds
#: (as ``grader.`` names, without the prefix). Each stage but ``commands`` and ``shared`` is a folder
#: of ``grader/`` (``execute`` also holds ``engines/``); ``commands`` are what ``course`` runs
#: (``grade.py`` strings the stages together); ``shared`` is what every stage reads. A new module must
#: be placed here: ``tests/test_architecture.py`` fails on one that is not, or on one placed in
#: another stage than its folder's.
STAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "commands": ("the course CLI; grade.py strings the stages together", (
        "grade", "batch", "samples", "hygiene", "cli.app", "cli.base", "cli.grading", "cli.results")),
    "intake": ("submissions, LMS zips, ids, the workspace", (
        "intake.submissions", "intake.lms", "intake.lms_names", "intake.ids", "intake.workspace",
        "intake.interop")),
    "prepare": ("the release; read, sanitise, put the grader's tests in", (
        "prepare.submission", "prepare.parameters", "prepare.preprocessors",
        "prepare.pipeline", "prepare.stubs", "prepare.integrity", "prepare.release", "prepare.publish")),
    "execute": ("run prepared notebooks, watched (engines/: kernels, fork servers, isolation)", (
        "execute.dispatch", "execute.watchdog", "execute.distributed", "engines.execution",
        "engines.kernel.engine", "engines.kernel.client", "engines.kernel.forked", "engines.kernel.warm",
        "engines.fork.engine", "engines.fork.child", "engines.fork.pool", "engines.fork.start",
        "engines.fork.zygote", "engines.fork.server", "engines.fork.shell", "engines.fork.quickshell",
        "engines.fork.clean", "engines.fork.wire", "engines.fork.ledger",
        "engines.isolation.sandbox", "engines.isolation.ahead", "engines.isolation.mounts", "engines.isolation.confine",
        "engines.isolation.seccomp", "engines.isolation.budget", "engines.isolation.treewatch",
        "engines.isolation.namespaces", "engines.isolation.launch")),
    "verdict": ("how a test is scored, against the solution's run", (
        "verdict.judge", "verdict.outcome", "verdict.instrument", "verdict.comparison", "verdict.observations", "verdict.expectations",
        "verdict.reference", "verdict.fixed", "verdict.rules.rule", "verdict.rules.reading", "verdict.rules.bindings", "verdict.rules.names",
        "verdict.rules.checks", "verdict.hints", "verdict.library_messages", "verdict.verdicts", "verdict.syntax")),
    "record": ("the gradebook, result files, CSV exports", (
        "record.results", "record.scores", "record.gradebook", "record.fingerprints", "record.review",
        "record.export", "record.lms_export", "record.csv_spans")),
    "pages": ("feedback pages and the class report", (
        "pages.feedback", "pages.markup", "pages.report", "pages.report_html", "pages.report_tables",
        "pages.report_plot")),
    "shared": ("read by every stage", (
        "cells", "exceptions", "jsonio", "project", "escaping")),
}

#: The folder of ``grader/`` each stage lives in (``commands`` and ``shared`` are the loose modules).
FOLDERS = {"intake": ("intake",), "prepare": ("prepare",), "execute": ("execute", "engines"),
           "verdict": ("verdict",), "record": ("record",), "pages": ("pages",), "commands": ("cli",)}

_COLOURS = {"commands": "#f2f2f2", "intake": "#e8f1fb", "prepare": "#eaf7ea", "execute": "#fdf0e1",
            "verdict": "#fbe9e9", "record": "#f1eafa", "pages": "#fcf8e3", "shared": "#f7f7f7"}


def modules(package: str = "grader") -> dict[str, Path]:
    """Every module of ``package`` (packages' ``__init__`` left out), by dotted name, found where
    Python imports it from without running any of it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{package} is not an installed package: run `make venv`")
    found = {}
    for info in pkgutil.walk_packages(spec.submodule_search_locations, package + "."):
        if not info.ispkg:
            found[info.name] = Path(info.module_finder.find_spec(info.name, None).origin)
    return dict(sorted(found.items()))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(nodes: list[ast.AST], kind: str = TOP):
    """(import statement, how it is made) for every import in ``nodes`` and below."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.body, TYPING)
            yield from _imports(node.orelse, kind)
        else:
            inner = LATE if kind == TOP and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else kind
            yield from _imports(list(ast.iter_child_nodes(node)), inner)


def _targets(node: ast.Import | ast.ImportFrom, name: str, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    base = node.module or ""
    if node.level:  # relative: from the module's own package
        package = name.split(".")[: -node.level]
        base = ".".join(package + ([base] if base else []))
    out = []
    for alias in node.names:
        if f"{base}.{alias.name}" in known:  # from grader.engines.fork import engine
            out.append(f"{base}.{alias.name}")
        elif base in known:  # from grader.engines.kernel.engine import execute
            out.append(base)
    return out


def graph(package: str = "grader") -> dict[str, dict[str, str]]:
    """{module: {module of the package it imports: how}} for every module of ``package``; of
    several imports of one module, the earliest kind counts (top before late before typing)."""
    known = modules(package)
    rank = {TOP: 0, LATE: 1, TYPING: 2}
    edges: dict[str, dict[str, str]] = {name: {} for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, kind in _imports(tree.body):
            for target in _targets(node, name, known):
                current = edges[name].get(target)
                if target != name and (current is None or rank[kind] < rank[current]):
                    edges[name][target] = kind
    return edges


def cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """The graph's circles: each strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def stage_of() -> dict[str, str]:
    """{module: its stage} for the modules :data:`STAGES` places."""
    return {f"grader.{m}": stage for stage, (_, names) in STAGES.items() for m in names}


def dot_source(edges: dict[str, dict[str, str]] | None = None) -> str:
    """The import graph as DOT: a cluster per stage, an arrow from each module to what it imports."""
    edges = graph() if edges is None else edges
    where = stage_of()
    lines = [
        "digraph grader {",
        '  graph [rankdir=TB, newrank=true, fontname="Helvetica", fontsize=12, nodesep=0.12, ranksep=0.9,'
        ' label="grader: modules by pipeline stage; an arrow points to what a module imports'
        ' (dashed: inside a function, dotted: for type checkers only)", labelloc=t];',
        '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="Helvetica", fontsize=10, height=0.25];',
        '  edge [color="#00000055", arrowsize=0.5];',
    ]
    for stage, (what, names) in STAGES.items():
        lines.append(f"  subgraph cluster_{stage} {{")
        lines.append(f'    label="{stage}: {what}"; style="rounded,filled"; fillcolor="{_COLOURS[stage]}";'
                     ' color="#999999"; fontsize=11;')
        for m in names:
            module = f"grader.{m}"
            if module in edges:
                lines.append(f'    "{module}" [label="{m.replace(".", "/")}.py"];')
        lines.append("  }")
    for module in sorted(edges):
        if module not in where:
            lines.append(f'  "{module}" [label="{module}", color=red];')
    style = {TOP: "", LATE: " [style=dashed]", TYPING: " [style=dotted]"}
    for module, targets in sorted(edges.items()):
        for target, kind in sorted(targets.items()):
            lines.append(f'  "{module}" -> "{target}"{style[kind]};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def stage_edges(edges: dict[str, dict[str, str]] | None = None) -> dict[tuple[str, str], int]:
    """{(stage, stage it imports from): how many module imports} -- imports inside a stage, and of
    the shared helpers every stage uses, left out."""
    edges = graph() if edges is None else edges
    where = stage_of()
    counts: dict[tuple[str, str], int] = {}
    for module, targets in edges.items():
        for target in targets:
            a, b = where.get(module), where.get(target)
            if a and b and a != b and b != "shared":  # everything uses the shared helpers: said, not drawn
                counts[(a, b)] = counts.get((a, b), 0) + 1
    return counts


def pipeline_source(edges: dict[str, dict[str, str]] | None = None) -> str:
    """The stages as DOT, one box each (its modules listed), an arrow per stage it imports from."""
    lines = [
        "digraph pipeline {",
        '  graph [rankdir=LR, fontname="Helvetica", fontsize=12, nodesep=0.3, ranksep=0.6,'
        ' label="grader: its stages; an arrow points to a stage whose modules it imports (how many imports);'
        ' every stage uses the shared helpers",'
        ' labelloc=t];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [color="#00000088", fontname="Helvetica", fontsize=9];',
    ]
    for stage, (what, names) in STAGES.items():
        listed = "\\n".join(n.replace(".", "/") for n in names[:8]) + ("\\n..." if len(names) > 8 else "")
        lines.append(f'  "{stage}" [label="{stage}\\n({what})\\n\\n{listed}", fillcolor="{_COLOURS[stage]}"];')
    for (a, b), n in sorted(stage_edges(edges).items()):
        lines.append(f'  "{a}" -> "{b}" [label="{n}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(source: str, dest: Path = SVG) -> Path:
    """``source`` drawn by graphviz's ``dot`` into ``dest`` (SVG)."""
    svg = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True, check=True).stdout
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(svg, encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dot", action="store_true", help="print the DOT source instead of writing the SVG")
    args = parser.parse_args(argv)
    edges = graph()
    source = dot_source(edges)
    if args.dot:
        print(source, end="")
        return 0
    render(pipeline_source(edges), PIPELINE_SVG)
    print(f"wrote {PIPELINE_SVG.relative_to(ROOT)} and {render(source).relative_to(ROOT)}: {len(edges)} modules, "
          f"{sum(len(t) for t in edges.values())} imports, {len(cycles(edges))} circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
