"""Autograd graphs as plain data and as pictures (graphviz when installed, else matplotlib)."""

from __future__ import annotations

import io
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from course_utils.graph_draw import draw_graphviz, draw_matplotlib

# Introduced in chapter 06 (autograd).


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
        return GraphPicture(data, "graphviz", source=draw_graphviz(data, title))
    fig, ax = draw_matplotlib(data, ax, title)
    return GraphPicture(data, "matplotlib", figure=fig, ax=ax)
