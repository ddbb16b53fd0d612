"""Topologies: the fat tree's shape and numbering, graph files and their errors."""

from __future__ import annotations

import pytest

from controller.spanning import spanning_tree, tree_sides
from controller.topology import Topology, TopologyError, fat_tree, format_graph, parse_graph


def test_the_k4_fat_tree_is_the_papers_figure_3():
    t = fat_tree(4)
    layers = [t.layers[s] for s in t.switches]
    assert (layers.count("core"), layers.count("aggregation"), layers.count("tor")) == (4, 8, 8)
    assert len(t.hosts) == 16 and len(t.links()) == 32
    # ToR: hosts on 1..2, aggregation switches on 3..4 (its up ports).
    assert t.host_ports("t0_0") == {1: "h0", 2: "h1"}
    assert (t.ports["t0_0"][3].name, t.ports["t0_0"][4].name) == ("a0_0", "a0_1")
    assert t.up["t0_0"] == (3, 4) and t.up["a1_1"] == (3, 4) and "c0" not in t.up
    # Core port p+1 leads to pod p; every link is recorded from both ends.
    assert [t.ports["c3"][p].name for p in (1, 2, 3, 4)] == ["a0_1", "a1_1", "a2_1", "a3_1"]
    for a, pa, b, pb in t.links():
        assert t.ports[b][pb].name == a and t.ports[b][pb].port == pa
    assert Topology.from_json(t.to_json()).to_json() == t.to_json()
    assert len(fat_tree(8).hosts) == 128


@pytest.mark.parametrize("k", [0, 3, 66])
def test_bad_fat_tree_parameters_are_refused(k):
    with pytest.raises(TopologyError, match="even k"):
        fat_tree(k)


def test_graph_files_number_ports_in_file_order():
    t = parse_graph("# two switches\nA B\nhost h1 A  # a host\nB C\nhost h2 C\n")
    assert t.ports["A"][1].name == "B" and t.ports["A"][2].name == "h1"
    assert t.ports["B"][1].port == 1 and t.ports["B"][2].name == "C"
    assert t.hosts == {"h1": ("A", 2), "h2": ("C", 2)}
    again = parse_graph(format_graph(t))
    assert again.hosts.keys() == t.hosts.keys() and len(again.links()) == 2


@pytest.mark.parametrize("text, message", [
    ("A B\nA\n", ":2: expected `A B`"),
    ("A A\n", ":1: a link from 'A' to itself"),
    ("A B\nB A\n", ":2: link B A is listed twice"),
    ("A B\nhost h A\nhost h B\n", ":3: host 'h' is attached twice"),
    ("A B\nhost A B\n", ":2: 'A' is already a switch"),
    ("host h1 A B\n", ":1: expected `host HOST SWITCH`"),
    ("# nothing\n", "no switches"),
])
def test_bad_graph_files_name_the_line(text, message):
    with pytest.raises(TopologyError) as err:
        parse_graph(text, "g.txt")
    assert message in str(err.value) and str(err.value).startswith("g.txt")


def test_mst_plus_plus_avoids_links_between_hubs():
    # A triangle of hubs (each with leaves) and a path around it: MST++ drops hub-hub links.
    lines = ["H1 H2", "H2 H3", "H1 H3", "H1 X", "X H2"]
    lines += [f"H{i} L{i}{j}" for i in (1, 2, 3) for j in range(4)]
    t = parse_graph("\n".join(lines) + "\nhost h L10\n")
    plus = spanning_tree(t.graph(), "mst++")
    assert not plus.has_edge("H1", "H2")
    for kind in ("mst", "mst++"):
        tree = spanning_tree(t.graph(), kind)
        assert tree.number_of_edges() == len(t.switches) - 1
        sides = tree_sides(t, tree)
        # The leaf's tree port carries nobody (h is its own host); the hub's port to it, h.
        assert sides["L10"] == {1: frozenset(), 2: frozenset({"h"})}
        hub_port = next(p for p, peer in t.ports["H1"].items() if peer.name == "L10")
        assert sides["H1"][hub_port] == frozenset({"h"})
