"""Drawing an autograd graph's plain data (:func:`course_utils.graph.graph_nodes`): a layered
layout drawn with matplotlib, or a graphviz ``Digraph``."""

from __future__ import annotations

from typing import Any

# Introduced in chapter 06 (autograd), with course_utils.graph.

_LEAF_COLOUR = "#d9f2d9"
_OP_COLOUR = "#dce6f7"
_OUTPUT_EDGE = "#c0392b"


def _layout(data: dict[str, list[Any]]) -> tuple[list[list[Any]], dict[tuple[int, int], list[Any]]]:
    """Layered layout: inputs left, output right, rows ordered to limit crossings.

    Returns the columns (node ids, plus dummy ids where a long edge crosses a column) and,
    for each distinct edge, the ids it passes through from source to destination.
    """
    nodes, edges = data["nodes"], data["edges"]
    preds: dict[int, list[int]] = {n["id"]: [] for n in nodes}
    succs: dict[int, list[int]] = {n["id"]: [] for n in nodes}
    for s, d in edges:
        preds[d].append(s)
        succs[s].append(d)
    layer: dict[Any, int] = {}
    for n in nodes:  # topological order: every input already has its layer
        layer[n["id"]] = 1 + max((layer[p] for p in preds[n["id"]]), default=-1)
    for n in reversed(nodes):  # pull each source next to its first consumer
        if not preds[n["id"]] and succs[n["id"]]:
            layer[n["id"]] = min(layer[s] for s in succs[n["id"]]) - 1
    paths: dict[tuple[int, int], list[Any]] = {}
    left: dict[Any, list[Any]] = {n["id"]: [] for n in nodes}
    right: dict[Any, list[Any]] = {n["id"]: [] for n in nodes}
    for s, d in dict.fromkeys(edges):  # distinct edges, in order
        path: list[Any] = [s] + [("dummy", s, d, k) for k in range(layer[s] + 1, layer[d])] + [d]
        for k, p in enumerate(path[1:-1]):
            layer[p] = layer[s] + 1 + k
            left[p], right[p] = [], []
        for a, b in zip(path, path[1:], strict=False):
            right[a].append(b)
            left[b].append(a)
        paths[(s, d)] = path
    columns: list[list[Any]] = [[] for _ in range(max(layer.values()) + 1)]
    for v in layer:
        columns[layer[v]].append(v)
    row = {v: r for col in columns for r, v in enumerate(col)}

    def sweep(cols: list[list[Any]], nbrs: dict[Any, list[Any]]) -> None:
        # Barycentre heuristic: order a column by the mean row of its neighbours in the
        # column just placed; a node without such neighbours keeps its row.
        for col in cols:
            col.sort(
                key=lambda v: (
                    sum(row[u] for u in nbrs[v]) / len(nbrs[v]) if nbrs[v] else row[v],
                    row[v],
                )
            )
            row.update({v: r for r, v in enumerate(col)})

    for _ in range(2):
        sweep(columns[1:], left)
        sweep(columns[-2::-1], right)
    return columns, paths


def draw_matplotlib(data: dict[str, list[Any]], ax: Any, title: str | None) -> tuple[Any, Any]:
    """The graph drawn on ``ax`` (a new headless ``Figure`` when None); returns (figure, axes)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    columns, paths = _layout(data)
    nodes = data["nodes"]
    labels = [n["label"].split("\n") for n in nodes]
    box_w = 0.3 + 0.085 * max(len(line) for lines in labels for line in lines)  # inches
    box_h = 0.25 + 0.17 * max(len(lines) for lines in labels)
    dx, dy = box_w + 0.7, box_h + 0.35
    height = max(len(c) for c in columns)
    xy: dict[Any, tuple[float, float]] = {}
    for c, col in enumerate(columns):
        for r, v in enumerate(col):
            xy[v] = (c * dx, ((len(col) - 1) / 2 - r) * dy)
    x_lo, x_hi = -box_w / 2 - 0.1, (len(columns) - 1) * dx + box_w / 2 + 0.1
    y_hi = (height - 1) / 2 * dy + box_h / 2 + 0.1
    if ax is None:
        top = 0.35 if title else 0.0
        fig = Figure(figsize=(x_hi - x_lo, 2 * y_hi + top))
        ax = fig.add_axes((0, 0, 1, 2 * y_hi / (2 * y_hi + top)))
    fig = ax.figure
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(-y_hi, y_hi)
    ax.set_aspect("equal")
    ax.axis("off")
    style = {"color": "#555555", "lw": 1.2}
    for (s, d), path in paths.items():
        count = data["edges"].count((s, d))
        for k in range(count):  # an input used twice gets two parallel arrows
            off = 0.12 * (k - (count - 1) / 2)
            pts = [(xy[s][0] + box_w / 2, xy[s][1] + off)]
            for v in path[1:-1]:  # a long edge runs straight through the columns it crosses
                pts += [
                    (xy[v][0] - box_w / 2, xy[v][1] + off),
                    (xy[v][0] + box_w / 2, xy[v][1] + off),
                ]
            pts.append((xy[d][0] - box_w / 2, xy[d][1] + off))
            if len(pts) > 2:
                ax.plot([p[0] for p in pts[:-1]], [p[1] for p in pts[:-1]], **style)
            ax.annotate(
                "",
                xy=pts[-1],
                xytext=pts[-2],
                arrowprops={"arrowstyle": "-|>", "shrinkA": 0, "shrinkB": 0, **style},
            )
    for n in nodes:
        x, y = xy[n["id"]]
        ax.add_patch(
            FancyBboxPatch(
                (x - box_w / 2, y - box_h / 2),
                box_w,
                box_h,
                boxstyle="round,pad=0,rounding_size=0.08",
                facecolor=_LEAF_COLOUR if n["kind"] == "leaf" else _OP_COLOUR,
                edgecolor=_OUTPUT_EDGE if n["output"] else "#333333",
                linewidth=2.2 if n["output"] else 1,
            )
        )
        ax.text(
            x,
            y,
            n["label"],
            ha="center",
            va="center",
            family="monospace",
            fontsize=9,
            fontweight="bold" if n["name"] else "normal",
        )
    if title:
        fig.suptitle(title, fontsize=10)
    return fig, ax


def draw_graphviz(data: dict[str, list[Any]], title: str | None) -> Any:
    """The graph as a ``graphviz.Digraph``, inputs left, output right."""
    import graphviz

    dot = graphviz.Digraph(
        graph_attr={"rankdir": "LR", "label": title or "", "labelloc": "t"},
        node_attr={
            "shape": "box",
            "style": "filled,rounded",
            "fontname": "monospace",
            "fontsize": "10",
        },
    )
    for n in data["nodes"]:
        dot.node(
            str(n["id"]),
            n["label"],
            fillcolor=_LEAF_COLOUR if n["kind"] == "leaf" else _OP_COLOUR,
            color=_OUTPUT_EDGE if n["output"] else "black",
            penwidth="2" if n["output"] else "1",
        )
    for s, d in data["edges"]:
        dot.edge(str(s), str(d))
    return dot
