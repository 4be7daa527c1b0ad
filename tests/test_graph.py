"""Tests for course_utils.graph: the autograd graph as plain data, and its pictures."""

from __future__ import annotations

import sys
import types

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from course_utils import graph
from course_utils.graph import GraphPicture, draw_graph, graph_nodes


def classic():
    """x=2, y=3, z=x*y, w=z+x, L=w**2 (chapter 06's chain-rule example)."""
    x = torch.tensor(2.0, requires_grad=True)
    y = torch.tensor(3.0, requires_grad=True)
    z = x * y
    w = z + x
    L = w**2
    return {"x": x, "y": y, "z": z, "w": w, "L": L}


def labels(ax):
    """The node labels drawn on ``ax`` (arrows are Annotations, which are texts too)."""
    return [t for t in ax.texts if type(t).__name__ != "Annotation"]


def named_edges(data):
    names = [n["name"] for n in data["nodes"]]
    return sorted((names[s], names[d]) for s, d in data["edges"])


def test_classic_expression_has_the_expected_nodes_and_edges():
    """Leaves x, y; ops Mul (z), Add (w), Pow (L); x feeds both z and w."""
    t = classic()
    data = graph_nodes(t["L"], names=t)
    by_name = {n["name"]: n for n in data["nodes"]}
    assert set(by_name) == {"x", "y", "z", "w", "L"}
    assert by_name["x"]["kind"] == by_name["y"]["kind"] == "leaf"
    assert by_name["x"]["op"] == "AccumulateGrad"
    assert [by_name[k]["op"] for k in "zwL"] == ["MulBackward0", "AddBackward0", "PowBackward0"]
    assert named_edges(data) == sorted([("x", "z"), ("y", "z"), ("z", "w"), ("x", "w"), ("w", "L")])
    assert by_name["x"]["shape"] == () and by_name["L"]["shape"] == ()
    assert [n["output"] for n in data["nodes"]].count(True) == 1 and by_name["L"]["output"]


def test_nodes_are_in_topological_order_with_ids_equal_to_positions():
    """Every edge goes from an earlier node to a later one; the output is last."""
    t = classic()
    data = graph_nodes(t["L"])
    assert [n["id"] for n in data["nodes"]] == list(range(len(data["nodes"])))
    assert all(s < d for s, d in data["edges"])
    assert data["nodes"][-1]["output"] and data["nodes"][-1]["op"] == "PowBackward0"


def test_a_reused_node_appears_once_with_one_edge_per_use():
    """b = a + a; c = b + b: three nodes, and each input used twice gives two edges."""
    a = torch.tensor(1.0, requires_grad=True)
    b = a + a
    c = b + b
    data = graph_nodes(c, names={"a": a, "b": b, "c": c})
    assert [n["name"] for n in data["nodes"]] == ["a", "b", "c"]
    assert named_edges(data) == [("a", "b"), ("a", "b"), ("b", "c"), ("b", "c")]


def test_a_node_shared_by_two_consumers_appears_once():
    """A diamond (b feeds c and d) keeps a single node for b."""
    a = torch.tensor(1.0, requires_grad=True)
    b = a * a
    c = b + 1
    d = c * b
    data = graph_nodes(d, names={"a": a, "b": b, "c": c, "d": d})
    assert sorted(n["name"] for n in data["nodes"]) == ["a", "b", "c", "d"]
    assert named_edges(data) == sorted([("a", "b"), ("a", "b"), ("b", "c"), ("c", "d"), ("b", "d")])


def test_constants_and_detached_inputs_are_not_in_the_graph():
    """Inputs that do not require grad leave no node and no edge."""
    x = torch.ones(3, requires_grad=True)
    y = x * x.detach() + torch.arange(3.0)
    data = graph_nodes(y, names={"x": x})
    leaves = [n for n in data["nodes"] if n["kind"] == "leaf"]
    assert len(leaves) == 1 and leaves[0]["name"] == "x" and leaves[0]["shape"] == (3,)
    assert [n["op"] for n in data["nodes"] if n["kind"] == "op"] == ["MulBackward0", "AddBackward0"]
    assert len(data["edges"]) == 2


def test_unnamed_nodes_and_the_label_text():
    """Unnamed leaves say 'leaf' and their shape; ops show their grad_fn class name."""
    W = torch.zeros(2, 3, requires_grad=True)
    out = W.sum()
    data = graph_nodes(out)
    assert data["nodes"][0]["label"] == "leaf\n(2, 3)"
    assert data["nodes"][0]["name"] is None
    assert data["nodes"][1]["label"] == "SumBackward0"
    named = graph_nodes(out, names={"W": W, "loss": out})
    assert named["nodes"][0]["label"] == "W\n(2, 3)"
    assert named["nodes"][1]["label"] == "loss\nSumBackward0"
    assert named["nodes"][1]["shape"] == ()


def test_a_leaf_alone_is_a_one_node_graph():
    x = torch.zeros(4, requires_grad=True)
    data = graph_nodes(x, names={"x": x})
    assert data == {
        "nodes": [
            {
                "id": 0,
                "kind": "leaf",
                "op": "AccumulateGrad",
                "name": "x",
                "shape": (4,),
                "output": True,
                "label": "x\n(4,)",
            }
        ],
        "edges": [],
    }


def test_graph_is_still_walkable_after_backward():
    """backward frees saved tensors, not the structure: the walk gives the same graph."""
    t = classic()
    before = graph_nodes(t["L"], names=t)
    t["L"].backward()
    assert graph_nodes(t["L"], names=t) == before


def test_no_graph_raises_a_helpful_error():
    with pytest.raises(ValueError, match="requires_grad=True"):
        graph_nodes(torch.ones(3) * 2)
    with pytest.raises(TypeError, match="torch.Tensor"):
        graph_nodes([1.0, 2.0])
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="names\\['x'\\]"):
        graph_nodes(x * 2, names={"x": 1.0})


def test_deep_graph_does_not_hit_the_recursion_limit():
    """The walk is iterative: a chain longer than Python's recursion limit works."""
    x = torch.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(sys.getrecursionlimit() + 100):
        y = y * 1.0
    data = graph_nodes(y)
    assert len(data["nodes"]) == sys.getrecursionlimit() + 101
    assert all(s == d - 1 for s, d in data["edges"])


def test_matplotlib_drawing_has_one_box_and_label_per_node():
    t = classic()
    pic = draw_graph(t["L"], names=t, backend="matplotlib", title="classic")
    assert isinstance(pic, GraphPicture) and pic.backend == "matplotlib"
    assert pic.source is None and pic.figure is pic.ax.figure
    boxes = [p for p in pic.ax.patches if type(p).__name__ == "FancyBboxPatch"]
    assert len(boxes) == 5
    texts = {txt.get_text() for txt in labels(pic.ax)}
    assert len(texts) == 5
    assert {"x\nscalar", "z\nMulBackward0", "L\nPowBackward0"} <= texts
    # 5 edges: each ends in exactly one arrow head
    assert sum(type(c).__name__ == "Annotation" for c in pic.ax.get_children()) == 5
    bundle = pic._repr_mimebundle_()
    assert bundle["image/png"].startswith(b"\x89PNG")
    assert "5 nodes, 5 edges" in repr(pic)


def test_inputs_are_left_of_their_consumers_in_the_drawing():
    t = classic()
    pic = draw_graph(t["L"], names=t, backend="matplotlib")
    x_of = {txt.get_text().split("\n")[0]: txt.get_position()[0] for txt in labels(pic.ax)}
    assert x_of["x"] < x_of["z"] < x_of["w"] < x_of["L"]
    assert x_of["y"] < x_of["z"]


def test_draws_on_a_given_axes():
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2)
    try:
        x = torch.ones(2, requires_grad=True)
        pic = draw_graph((x * 2).sum(), ax=ax2)
        assert pic.ax is ax2 and pic.figure is fig and pic.backend == "matplotlib"
        assert len(labels(ax2)) == 3 and not ax1.texts
    finally:
        plt.close(fig)


def test_auto_falls_back_to_matplotlib_without_graphviz(monkeypatch):
    """With no graphviz package importable, 'auto' still draws (with matplotlib)."""
    monkeypatch.setitem(sys.modules, "graphviz", None)  # makes `import graphviz` fail
    assert graph._graphviz_available() is False
    t = classic()
    pic = draw_graph(t["L"], names=t)
    assert pic.backend == "matplotlib"
    with pytest.raises(RuntimeError, match="backend='matplotlib'"):
        draw_graph(t["L"], backend="graphviz")


def test_auto_falls_back_when_dot_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", types.ModuleType("graphviz"))
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    assert graph._graphviz_available() is False


class FakeDigraph:
    """Records what draw_graph asks graphviz to draw."""

    def __init__(self, graph_attr=None, node_attr=None):
        self.graph_attr = graph_attr
        self.nodes: list[tuple[str, str]] = []
        self.edges: list[tuple[str, str]] = []

    def node(self, name, label, **attrs):
        self.nodes.append((name, label))

    def edge(self, a, b):
        self.edges.append((a, b))

    def pipe(self, format, encoding):
        return f"<svg>{len(self.nodes)} nodes</svg>"


def test_graphviz_backend_emits_every_node_and_edge(monkeypatch):
    fake = types.ModuleType("graphviz")
    fake.Digraph = FakeDigraph
    monkeypatch.setitem(sys.modules, "graphviz", fake)
    monkeypatch.setattr(graph.shutil, "which", lambda name: "/usr/bin/dot")
    t = classic()
    pic = draw_graph(t["L"], names=t)
    assert pic.backend == "graphviz" and pic.figure is None
    dot = pic.source
    assert dot.graph_attr["rankdir"] == "LR"
    assert [label for _, label in dot.nodes] == [n["label"] for n in pic.data["nodes"]]
    assert sorted(dot.edges) == sorted((str(s), str(d)) for s, d in pic.data["edges"])
    assert pic._repr_mimebundle_()["image/svg+xml"] == "<svg>5 nodes</svg>"
    # an explicit Axes means matplotlib even when graphviz is there
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        assert draw_graph(t["L"], ax=ax).backend == "matplotlib"
    finally:
        plt.close(fig)


@pytest.mark.skipif(
    not graph._graphviz_available(), reason="graphviz (package and dot) not installed"
)
def test_real_graphviz_renders_svg():
    t = classic()
    svg = draw_graph(t["L"], names=t, backend="graphviz")._repr_mimebundle_()["image/svg+xml"]
    assert "<svg" in svg and "MulBackward0" in svg


def test_unknown_backend_is_refused():
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="backend must be"):
        draw_graph(x * 2, backend="ascii")
