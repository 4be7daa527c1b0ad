"""Autograd graphs as plain data and as pictures (graphviz when installed, else matplotlib)."""

from __future__ import annotations

import io
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

# Introduced in chapter 06 (autograd).

_LEAF_COLOUR = "#d9f2d9"
_OP_COLOUR = "#dce6f7"
_OUTPUT_EDGE = "#c0392b"


def _fmt_shape(shape: tuple[int, ...]) -> str:
    if not shape:
        return "scalar"
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _name_lookup(
    names: Mapping[str, torch.Tensor] | None, keep_alive: list[Any]
) -> tuple[dict[int, str], dict[int, str], dict[int, tuple[int, ...]]]:
    """Split ``names`` into {id(leaf): name}, {id(grad_fn): name} and {id(grad_fn): shape}.

    The ``grad_fn`` objects are appended to ``keep_alive``: while they live, torch hands back
    the same Python object for that node, so their ids stay valid.
    """
    by_leaf: dict[int, str] = {}
    by_fn: dict[int, str] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    for name, t in (names or {}).items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"names[{name!r}] should be a tensor, not a {type(t).__name__}")
        fn = t.grad_fn
        if fn is not None:
            keep_alive.append(fn)
            by_fn[id(fn)] = name
            shapes[id(fn)] = tuple(t.shape)
        else:
            by_leaf[id(t)] = name
    return by_leaf, by_fn, shapes


def graph_nodes(
    tensor: torch.Tensor, names: Mapping[str, torch.Tensor] | None = None
) -> dict[str, list[Any]]:
    """Walk ``tensor.grad_fn.next_functions`` and return the autograd graph as plain data.

    Args:
        tensor: a tensor that requires grad (usually a loss).
        names: optional labels, e.g. ``{"x": x, "z": z}``. A leaf is matched by identity,
            any other tensor by its ``grad_fn``.

    Returns:
        ``{"nodes": [...], "edges": [...]}``. Each node is a dict with ``id`` (its index in
        the list), ``kind`` (``"leaf"`` for a tensor you created, ``"op"`` for a recorded
        operation), ``op`` (the class name, e.g. ``"MulBackward0"`` or ``"AccumulateGrad"``),
        ``name`` (from ``names``, else None), ``shape`` (a tuple for leaves and named
        tensors, else None), ``output`` (True for the node of ``tensor``) and ``label``.
        Nodes come in topological order: every node after all the nodes that feed it.
        Each edge is a ``(src, dst)`` pair of ids meaning "src is an input of dst"; there is
        one edge per entry of ``next_functions``, so an input used twice gives two edges.
        Inputs that do not require grad (constants) are not part of the graph.

    Raises:
        ValueError: when ``tensor`` does not require grad (autograd recorded nothing).
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"graph_nodes takes a torch.Tensor, not a {type(tensor).__name__}")
    if not tensor.requires_grad:
        raise ValueError(
            "this tensor does not require grad, so autograd recorded no graph for it. Create "
            "its inputs with requires_grad=True, and do not compute it under torch.no_grad()."
        )
    keep_alive: list[Any] = []
    by_leaf, by_fn, shapes = _name_lookup(names, keep_alive)

    def node(
        k: int, kind: str, op: str, name: str | None, shape: tuple[int, ...] | None
    ) -> dict[str, Any]:
        lines = [name] if name else []
        if kind == "leaf":
            lines = lines or ["leaf"]
            lines.append(_fmt_shape(shape or ()))
        else:
            lines.append(op)
        return {
            "id": k,
            "kind": kind,
            "op": op,
            "name": name,
            "shape": shape,
            "output": False,
            "label": "\n".join(lines),
        }

    if tensor.grad_fn is None:  # a leaf on its own: a graph of one node
        only = node(0, "leaf", "AccumulateGrad", by_leaf.get(id(tensor)), tuple(tensor.shape))
        only["output"] = True
        return {"nodes": [only], "edges": []}

    # Iterative post-order depth-first walk (no recursion limit): a node is emitted after all
    # of its inputs. Everything visited stays referenced (stack, order), so ids stay valid.
    order: list[Any] = []
    index: dict[int, int] = {}
    stack: list[tuple[Any, int]] = [(tensor.grad_fn, 0)]
    while stack:
        fn, i = stack.pop()
        inputs = [f for f, _ in fn.next_functions if f is not None]
        if i < len(inputs):
            stack.append((fn, i + 1))
            if id(inputs[i]) not in index:
                stack.append((inputs[i], 0))
            continue
        if id(fn) not in index:
            index[id(fn)] = len(order)
            order.append(fn)

    nodes: list[dict[str, Any]] = []
    edges: list[tuple[int, int]] = []
    for k, fn in enumerate(order):
        op = type(fn).__name__
        if hasattr(fn, "variable"):  # AccumulateGrad: the node of a leaf tensor
            leaf = fn.variable
            nodes.append(node(k, "leaf", op, by_leaf.get(id(leaf)), tuple(leaf.shape)))
        else:
            nodes.append(node(k, "op", op, by_fn.get(id(fn)), shapes.get(id(fn))))
        edges.extend((index[id(f)], k) for f, _ in fn.next_functions if f is not None)
    nodes[-1]["output"] = True
    return {"nodes": nodes, "edges": edges}


def _graphviz_available() -> bool:
    """True when the ``graphviz`` Python package imports and the ``dot`` program is on PATH."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


@dataclass(repr=False)
class GraphPicture:
    """A drawn autograd graph. Jupyter shows it when it is the last expression of a cell.

    Attributes:
        data: the plain data from :func:`graph_nodes`.
        backend: ``"graphviz"`` or ``"matplotlib"``.
        source: the ``graphviz.Digraph`` (graphviz backend), else None.
        figure: the matplotlib ``Figure`` (matplotlib backend), else None.
        ax: the matplotlib ``Axes`` drawn on (matplotlib backend), else None.
    """

    data: dict[str, list[Any]]
    backend: str
    source: Any = None
    figure: Any = None
    ax: Any = None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self.source is not None:
            svg = self.source.pipe(format="svg", encoding="utf-8")
            return {"image/svg+xml": svg, "text/plain": repr(self)}
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        return {"image/png": buf.getvalue(), "text/plain": repr(self)}

    def __repr__(self) -> str:
        n, e = len(self.data["nodes"]), len(self.data["edges"])
        return f"<GraphPicture: {n} nodes, {e} edges, drawn with {self.backend}>"


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


def _draw_matplotlib(data: dict[str, list[Any]], ax: Any, title: str | None) -> tuple[Any, Any]:
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


def _draw_graphviz(data: dict[str, list[Any]], title: str | None) -> Any:
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


def draw_graph(
    tensor: torch.Tensor,
    names: Mapping[str, torch.Tensor] | None = None,
    *,
    backend: str = "auto",
    ax: Any = None,
    title: str | None = None,
) -> GraphPicture:
    """Draw the autograd graph that ends in ``tensor``: inputs on the left, ``tensor`` on the right.

    Leaves (tensors you created with ``requires_grad=True``) are green boxes with their name
    and shape; recorded operations are blue boxes named after their ``grad_fn``; the output
    has a red border. Works headless (no display needed).

    Args:
        tensor: a tensor that requires grad (usually a loss).
        names: optional labels, e.g. ``{"x": x, "L": L}``.
        backend: ``"auto"`` uses graphviz when both the ``graphviz`` package and its ``dot``
            program are installed, else matplotlib; or force ``"graphviz"`` / ``"matplotlib"``.
        ax: a matplotlib Axes to draw on (matplotlib backend only).
        title: a title above the picture.

    Returns:
        A :class:`GraphPicture`; put it last in a cell to show it.

    Raises:
        ValueError: when ``tensor`` does not require grad, or ``backend`` is unknown.
        RuntimeError: when ``backend="graphviz"`` but graphviz is not installed.
    """
    data = graph_nodes(tensor, names)
    if backend not in ("auto", "graphviz", "matplotlib"):
        raise ValueError(f"backend must be 'auto', 'graphviz' or 'matplotlib', not {backend!r}")
    if backend == "auto":
        backend = "graphviz" if ax is None and _graphviz_available() else "matplotlib"
    if backend == "graphviz":
        if not _graphviz_available():
            raise RuntimeError(
                "backend='graphviz' needs the graphviz Python package and its `dot` program "
                "(pip install graphviz; apt install graphviz). Use backend='matplotlib' instead."
            )
        return GraphPicture(data, "graphviz", source=_draw_graphviz(data, title))
    fig, ax = _draw_matplotlib(data, ax, title)
    return GraphPicture(data, "matplotlib", figure=fig, ax=ax)
