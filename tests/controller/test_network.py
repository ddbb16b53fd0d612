"""Networks of switches deliver exactly what each host subscribed to (issue 14).

Every test compiles a whole network through the real compiler, runs it in the software
switches hop by hop (`controller.network.Fabric`), and compares every host's copies with the
brute-force expectation computed from the subscriptions alone (tests/controller/routing_helpers.py):
each host receives each packet once if one of its subscriptions matches one of its messages,
holding exactly those messages at their sequence numbers, never its own packets, no loops.
"""

from __future__ import annotations

import random

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.semantics import holds
from controller.network import Fabric, Network
from controller.policy import UP_PORT, Subscription
from controller.subscriptions import parse_subscriptions
from controller.topology import fat_tree, parse_graph
from tests.switch.switch_helpers import itch_values

from .routing_helpers import ITCH, expected, message, packet, received, seeds, subscriptions_text

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAT4 = fat_tree(4)


def check_traffic(net: Network, fabric: Fabric, rng: random.Random, n: int = 40,
                  reachable=lambda a, b: True, senders=None) -> None:
    wants = {h: net.routing.wants(h) for h in net.topo.hosts}
    senders = senders or list(net.topo.hosts)
    for i in range(n):
        sender = rng.choice(senders)
        frame, msgs = packet(rng, 1000 * i + 1)
        got = received(fabric.inject(sender, frame))
        want = expected(wants, sender, 1000 * i + 1, msgs, reachable)
        assert got == want, f"packet {i} from {sender}"


def check_filter_sets(net: Network, rng: random.Random, n: int = 60) -> None:
    """Soundness at host ports, completeness everywhere, checked on random messages."""
    r = net.routing
    for _ in range(n):
        values = itch_values(message(rng))
        wanted = {h for h in net.topo.hosts if any(holds(f, values) for f in r.wants(h))}
        for s, sides in r.sides.items():
            for p, hosts in sides.items():
                carried = any(holds(f, values) for f in r.filter_set(s, p))
                if hosts is None:
                    assert carried  # MR's up port: true
                    continue
                if p != UP_PORT and net.topo.ports[s][p].kind == "host":
                    assert carried == (next(iter(hosts)) in wanted), (s, p)
                elif any(h in hosts for h in wanted):  # hosts: a set, or AllBut on a TR up port
                    assert carried, (s, p)


FAT = {k: fat_tree(k) for k in (2, 4, 6)}


@SETTINGS
@given(seeds, st.sampled_from(("mr", "tr")), st.sampled_from((1, 10, 100, 1000)),
       st.integers(1, 60), st.sampled_from((2, 4, 4, 6)))
def test_a_fat_tree_delivers_exactly_the_subscriptions(seed, policy, alpha, n_subs, k):
    rng = random.Random(seed)
    topo = FAT[k]
    subs = parse_subscriptions(subscriptions_text(rng, list(topo.hosts), n_subs), ITCH)
    net = Network(ITCH, topo, subs, policy, alpha)
    check_filter_sets(net, rng)
    check_traffic(net, Fabric.of(net), rng)


def test_both_data_planes_route_alike():
    rng = random.Random(7)
    subs = parse_subscriptions(subscriptions_text(rng, list(FAT4.hosts), 40), ITCH)
    net = Network(ITCH, FAT4, subs, "tr", 10)
    for impl in ("native", "python"):
        check_traffic(net, Fabric.of(net, impl), random.Random(8), 30)


def test_mr_sends_every_packet_up_and_tr_only_what_is_wanted_above():
    rng = random.Random(3)
    # Only h0 and h1 (both on t0_0) subscribe: under TR nothing needs to leave their ToR.
    subs = parse_subscriptions("h0: price > 100\nh1: stock == \"IBM\"\n", ITCH)
    core = {}
    for policy in ("mr", "tr"):
        net = Network(ITCH, FAT4, subs, policy)
        fabric = Fabric.of(net)
        for i in range(20):
            fabric.inject("h1", packet(rng, i)[0])
        core[policy] = sum(c[0] for (a, b), c in fabric.links.items() if b.startswith("c"))
    assert core["mr"] == 20 and core["tr"] == 0


def random_graph(rng: random.Random, n: int, extra: int, hosts: int) -> str:
    g = nx.random_labeled_tree(n, seed=rng.randint(0, 1 << 30)) if hasattr(nx, "random_labeled_tree") \
        else nx.random_tree(n, seed=rng.randint(0, 1 << 30))
    g = nx.Graph(g)
    while extra and g.number_of_edges() < n * (n - 1) // 2:
        a, b = rng.sample(range(n), 2)
        if not g.has_edge(a, b):
            g.add_edge(a, b)
            extra -= 1
    lines = [f"s{a} s{b}" for a, b in g.edges]
    lines += [f"host h{i} s{rng.randrange(n)}" for i in range(hosts)]
    return "# a random graph\n" + "\n".join(lines) + "\n"


@SETTINGS
@given(seeds, st.sampled_from(("mst", "mst++")), st.sampled_from((1, 100)), st.integers(2, 9))
def test_a_general_graph_routes_on_its_spanning_tree_and_survives_failures(seed, tree, alpha, n):
    rng = random.Random(seed)
    topo = parse_graph(random_graph(rng, n, rng.randint(0, n), rng.randint(2, 8)))
    subs = parse_subscriptions(subscriptions_text(rng, list(topo.hosts), rng.randint(1, 30)), ITCH)
    net = Network(ITCH, topo, subs, "tr", alpha, tree)
    fabric = Fabric.of(net)
    check_filter_sets(net, rng)
    check_traffic(net, fabric, rng, 25)
    for _ in range(2):  # fail links (or a switch), rewrite only what changed, check again
        live = net._live_graph()
        if rng.random() < 0.3 and live.number_of_nodes() > 1:
            victim = rng.choice(sorted(live.nodes))
            before = {s: fabric.switches[s].entries() for s in topo.switches}
            report = net.fail(switch=victim, fabric=fabric)
        elif live.number_of_edges():
            link = rng.choice(sorted(live.edges))
            report = net.fail(link=link, fabric=fabric)
        else:
            break
        live = net._live_graph()
        alive = [h for h, (s, _) in topo.hosts.items() if s in live]
        component = {s: i for i, c in enumerate(nx.connected_components(live)) for s in c}

        def reachable(a, b):
            sa, sb = topo.hosts[a][0], topo.hosts[b][0]
            return sa in component and sb in component and component[sa] == component[sb]

        check_filter_sets(net, rng)
        if alive:
            check_traffic(net, fabric, rng, 20, reachable, senders=alive)
        # What the fabric holds is what a fresh compile of the same state gives.
        for s in topo.switches:
            assert sorted(map(repr, fabric.switches[s].entries())) == \
                sorted(map(repr, net.compiled[s]["table_entries"])), s
        assert set(report.switches) <= set(topo.switches)


@SETTINGS
@given(seeds, st.sampled_from(("mr", "tr")), st.sampled_from((1, 10, 1000)))
def test_changes_rewrite_only_what_differs_and_stay_exact(seed, policy, alpha):
    rng = random.Random(seed)
    hosts = list(FAT4.hosts)
    subs = parse_subscriptions(subscriptions_text(rng, hosts, 30), ITCH)
    net = Network(ITCH, FAT4, subs, policy, alpha)
    fabric = Fabric.of(net)
    live = list(subs)
    for step in range(6):
        if live and rng.random() < 0.4:
            sub = live.pop(rng.randrange(len(live)))
            report = net.remove(sub, fabric)
        else:
            sub = parse_subscriptions(subscriptions_text(rng, hosts, 1), ITCH)[0]
            live.append(sub)
            report = net.add(sub, fabric)
        access = FAT4.hosts[sub.host][0]
        # Only switches with a port towards the host (or, under TR, an up port above it) change.
        assert set(report.switches) <= {s for s, ps in net.routing.sides.items()
                                        if any(hs and sub.host in hs for hs in ps.values())}
        if policy == "mr":
            assert not any(s.startswith("t") and s != access for s in report.switches)
        # Against a from-scratch compile (compile_rules) of the subscriptions now: the
        # incremental documents byte for byte, and what the running fabric holds.
        fresh = Network(ITCH, FAT4, live, policy, alpha, incremental=False)
        assert set(report.switches) <= set(report.reached)
        for s in FAT4.switches:
            assert net.compiled[s] == fresh.compiled[s], (step, s)
            assert sorted(map(repr, fabric.switches[s].entries())) == \
                sorted(map(repr, fresh.compiled[s]["table_entries"])), (step, s)
        check_traffic(net, fabric, rng, 10)


@SETTINGS
@given(seeds, st.sampled_from(("mst", "mst++")), st.sampled_from((1, 100)), st.integers(3, 8),
       st.integers(4, 10))
def test_changes_and_failures_interleaved_equal_a_fresh_compile(seed, tree, alpha, n, n_ops):
    """Subscriptions come and go through the switches' incremental compilers while links
    and switches fail (which rebuild the switches they change): after every step, each
    switch's entries equal a from-scratch compile of the network as it now is, and hosts
    receive exactly what they subscribed to."""
    rng = random.Random(seed)
    topo = parse_graph(random_graph(rng, n, rng.randint(1, n), rng.randint(3, 8)))
    hosts = list(topo.hosts)
    live = parse_subscriptions(subscriptions_text(rng, hosts, rng.randint(0, 20)), ITCH)
    net = Network(ITCH, topo, live, "tr", alpha, tree)
    fabric = Fabric.of(net)
    for step in range(n_ops):
        r = rng.random()
        graph = net._live_graph()
        if r < 0.15 and graph.number_of_edges():
            net.fail(link=rng.choice(sorted(graph.edges)), fabric=fabric)
        elif r < 0.5 and live:
            net.remove(live.pop(rng.randrange(len(live))), fabric)
        else:
            sub = parse_subscriptions(subscriptions_text(rng, hosts, 1), ITCH)[0]
            live.append(sub)
            net.add(sub, fabric)
        failed = {"links": [sorted(link) for link in net.failed_links], "switches": []}
        fresh = Network(ITCH, topo, live, "tr", alpha, tree, failed=failed, incremental=False)
        for s in topo.switches:
            assert net.compiled[s] == fresh.compiled[s], (step, s)
            assert sorted(map(repr, fabric.switches[s].entries())) == \
                sorted(map(repr, fresh.compiled[s]["table_entries"])), (step, s)
    graph = net._live_graph()
    component = {s: i for i, c in enumerate(nx.connected_components(graph)) for s in c}
    check_traffic(net, fabric, rng, 15,
                  lambda a, b: component[topo.hosts[a][0]] == component[topo.hosts[b][0]])


def test_a_removed_subscription_must_exist():
    subs = parse_subscriptions("h0: price > 5\n", ITCH)
    net = Network(ITCH, FAT4, subs, "tr")
    with pytest.raises(KeyError, match="h3"):
        net.remove(Subscription("h3", subs[0].filter))


def test_a_filter_too_wide_for_the_incremental_compiler_compiles_whole():
    """A filter whose normal form is too large for the incremental compiler (built directly,
    an `and` of 18 two-field `or`s) makes the switches it reaches compile whole (as a
    formula); their entries equal a from-scratch compile, and later changes still apply."""
    from compiler.ast import And
    subs = parse_subscriptions("h0: price > 5\nh5: price < 100\n", ITCH)
    net = Network(ITCH, FAT4, subs, "tr", 10)
    fabric = Fabric.of(net)
    ors = [parse_subscriptions(f"h0: price == {i} or shares == {i}\n", ITCH)[0].filter
           for i in range(18)]  # 2^18 alternatives
    wide = Subscription("h3", And(tuple(ors)))
    extra = parse_subscriptions("h3: price > 50\n", ITCH)[0]
    live = list(subs)
    for op, sub in (("add", wide), ("add", extra), ("remove", subs[0]), ("remove", wide)):
        report = net.add(sub, fabric) if op == "add" else net.remove(sub, fabric)
        live = [*live, sub] if op == "add" else [x for x in live if x is not sub]
        fresh = Network(ITCH, FAT4, live, "tr", 10, incremental=False)
        for s in FAT4.switches:
            assert net.compiled[s] == fresh.compiled[s], (op, s)
            assert sorted(map(repr, fabric.switches[s].entries())) == \
                sorted(map(repr, fresh.compiled[s]["table_entries"])), (op, s)
        assert set(report.switches) <= set(report.reached)
    check_traffic(net, fabric, random.Random(1), 20)


@pytest.mark.parametrize("policy", ["mr", "tr"])
@pytest.mark.parametrize("k", [2, 4, 6])
def test_a_hosts_carriers_are_the_ports_whose_sides_hold_it(policy, k):
    """A fat tree's carriers are found by climbing, not listed: the same pairs as asking
    every port's side, on the whole network and on a part of it (`only`)."""
    from controller.policy import Routing

    topo = FAT[k]
    for only in (None, topo.switches[::3]):
        r = Routing(topo, [], policy, only=only)
        for h in topo.hosts:
            want = {(s, p) for s, sides in r.sides.items() for p, hosts in sides.items()
                    if hosts is not None and h in hosts}
            got = r.carriers(h)
            assert len(got) == len(set(got)) and set(got) == want, (h, only)


@pytest.mark.parametrize("policy", ["mr", "tr"])
def test_a_fat_trees_routing_grows_with_its_hosts_not_k5(policy):
    """Doubling k multiplies hosts by 8 and (hosts x switches) by 32: the routing of one
    subscription held every host's name per up port and every host's ports (x 25-29 from
    k = 8 to 16) until up ports kept the hosts they do not carry and carriers were found by
    climbing (x 7)."""
    import tracemalloc

    from controller.policy import Routing

    def held(k: int) -> int:
        topo = fat_tree(k)
        subs = parse_subscriptions('h0: stock == "GOOGL"\n', ITCH, set(topo.hosts))
        tracemalloc.start()
        try:
            routing = Routing(topo, subs, policy)
            size = tracemalloc.get_traced_memory()[0]
            del routing
            return size
        finally:
            tracemalloc.stop()

    assert held(16) / held(8) < 12
