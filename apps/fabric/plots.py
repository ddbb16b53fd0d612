"""The fabric demo: measure (apps.fabric.measure), check deliveries, draw, summarise."""

from __future__ import annotations

import sys
from pathlib import Path

from apps.figures import pyplot, save
from apps.fabric import measure
from compiler.semantics import holds
from switch.packet import read_mold, read_udp

ROOT = Path(__file__).resolve().parents[2]


def check_deliveries(point: measure.FatTreePoint, packets) -> int:
    """Every host got exactly the packets one of its subscriptions matches; the count of
    deliveries checked (AssertionError naming the first wrong one)."""
    from controller.network import Fabric

    net = point.net
    fabric = Fabric.of(net)
    wants = {h: net.routing.wants(h) for h in net.topo.hosts}
    n = 0
    for i, (sender, frame) in enumerate(packets):
        got = sorted(h for h, _ in fabric.inject(sender, frame))
        _, _, (msg,) = read_mold(read_udp(frame).payload)
        values = {"itch_order.stock": int.from_bytes(msg[24:32], "big"),
                  "itch_order.price": int.from_bytes(msg[32:36], "big"),
                  "itch_order.shares": int.from_bytes(msg[20:24], "big"),
                  "itch_order.buy_sell_indicator": msg[19],
                  "itch_order.message_type": msg[0]}
        want = sorted(h for h, fs in wants.items()
                      if h != sender and any(holds(f, values) for f in fs))
        if got != want:
            raise AssertionError(f"packet {i} from {sender}: delivered to {got}, wanted by {want}")
        n += len(got)
    return n


def run_demo(sizes, alphas, n_packets, n_changes, graph, out: Path, seed: int) -> int:
    from compiler.spec import load_spec
    from controller.topology import TopologyError, fat_tree

    out.mkdir(parents=True, exist_ok=True)
    spec = load_spec(ROOT / "p4" / "itch" / "itch.p4")
    topo = fat_tree(4)
    hosts = list(topo.hosts)
    packets = measure.traffic(hosts, n_packets, seed + 1)
    lines = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    plt = pyplot()
    # Fig. 13a/b: entries per layer as subscriptions grow, MR vs TR.
    growth = {}
    for n in sizes:
        subs = measure.subscriptions(spec, hosts, n, seed)
        for policy in ("mr", "tr"):
            p = measure.fat_tree_point(spec, topo, subs, policy, 1, packets[:100])
            growth[policy, n] = p
            say(f"{n} subscriptions, {policy}: entries per layer (sum/max) "
                + ", ".join(f"{layer} {a}/{m}" for layer, (a, m) in p.per_layer.items())
                + f"; compiled in {p.compile_seconds:.2f} s")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, policy in zip(axes, ("mr", "tr")):
        for layer in measure.LAYERS:
            ax.plot(sizes, [growth[policy, n].per_layer[layer][1] for n in sizes], marker="o", label=layer)
        ax.set(title=f"{policy.upper()}: largest switch per layer", xlabel="subscriptions",
               xscale="log")
        ax.legend()
    axes[0].set_ylabel("table entries")
    save(fig, out / "fig13ab-entries-per-layer.png")

    # Fig. 13c/d: alpha's entries and core traffic, at the largest size, TR and MR.
    subs = measure.subscriptions(spec, hosts, sizes[-1], seed)
    by_alpha = {}
    for policy in ("mr", "tr"):
        for alpha in alphas:
            by_alpha[policy, alpha] = p = measure.fat_tree_point(spec, topo, subs, policy, alpha, packets)
            say(f"alpha {alpha}, {policy}: {p.total} entries, {p.core_packets} packets on core links")
    checked = check_deliveries(by_alpha["tr", alphas[-1]], packets)
    say(f"checked: {checked} deliveries of {len(packets)} packets (TR, alpha {alphas[-1]}) are "
        "exactly what the subscriptions ask for")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for policy in ("mr", "tr"):
        a1.plot(alphas, [by_alpha[policy, a].total for a in alphas], marker="o", label=policy.upper())
        base = by_alpha[policy, alphas[0]].core_packets or 1
        a2.plot(alphas, [by_alpha[policy, a].core_packets / base for a in alphas], marker="o",
                label=policy.upper())
    a1.set(title=f"entries, {sizes[-1]} subscriptions", xlabel="alpha", xscale="log", ylabel="entries")
    a2.set(title="core traffic relative to alpha = 1", xlabel="alpha", xscale="log", ylabel="ratio")
    a1.legend()
    a2.legend()
    save(fig, out / "fig13cd-alpha.png")

    # Fig. 14: each change's cost.
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in ("mr", "tr"):
        for alpha in (alphas[0], alphas[-1]):
            costs = measure.change_costs(by_alpha[policy, alpha].net, n_changes, seed + 3)
            ms = sorted(r.seconds * 1000 for _, r in costs)
            touched = sum(len(r.reached) for _, r in costs) / len(costs)
            say(f"changes, {policy}, alpha {alpha}: median {ms[len(ms) // 2]:.0f} ms, "
                f"{touched:.1f} switches compiled incrementally on average")
            ax.plot(ms, [(i + 1) / len(ms) for i in range(len(ms))], label=f"{policy.upper()}, alpha {alpha}")
    ax.set(title=f"one subscription changed ({sizes[-1]} subscriptions)", xlabel="ms", ylabel="CDF")
    ax.legend()
    save(fig, out / "fig14-change-time.png")

    # Fig. 15: MST vs MST++.
    if graph:
        g = measure.power_law_graph(graph[0], graph[1], seed)
        try:
            gt = measure.graph_topology(g, 500, seed)
        except TopologyError as exc:
            say(f"graph {graph}: skipped ({exc})")
        else:
            gsubs = measure.subscriptions(spec, list(gt.hosts), 2000, seed)
            points = [measure.tree_point(spec, gt, gsubs, kind, 10) for kind in ("mst", "mst++")]
            for p in points:
                say(f"{p.kind} on {graph[0]} nodes / {graph[1]} edges: max entries {p.max_entries} "
                    f"(tree degree {p.at_degree})")
            fig, ax = plt.subplots(figsize=(5, 4))
            ax.bar([p.kind.upper() for p in points], [p.max_entries for p in points])
            ax.set(title="largest switch on a power-law graph", ylabel="entries")
            save(fig, out / "fig15-mst.png")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out}/*.png and summary.txt", file=sys.stderr)
    return 0
