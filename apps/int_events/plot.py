"""The demo's picture and text summary: delivered anomaly events over time against the full stream.

Two panels share the time axis (the simulated run, in milliseconds). The top one counts
packets per time bin: the whole INT stream the switch saw, and what each subscriber got.
The bottom one shows every packet's top-hop latency (grey) with the events delivered to the
UDP subscribers on top in each one's colour, so the bursts, and what the rules cut out of them, are visible.
"""

from __future__ import annotations

from pathlib import Path

from apps.figures import pyplot, save
from apps.int_events.demo import DemoResult

BINS = 100
COLOURS = ("tab:red", "tab:blue", "tab:green", "tab:orange", "tab:purple")


def write_png(result: DemoResult, path: Path) -> None:
    ms = [t / 1e6 for t in result.times_ns]
    span = result.duration_ns / 1e6
    edges = [span * i / BINS for i in range(BINS + 1)]
    fig, (counts, latency) = pyplot().subplots(2, 1, figsize=(10, 7), sharex=True,
                                               gridspec_kw={"height_ratios": [1, 1.3]})
    counts.hist(ms, bins=edges, color="0.75", label=f"full INT stream ({result.packets} packets)")
    for colour, sub in zip(COLOURS, result.subscribers):
        # A Kafka view's consumer is dashed: it usually repeats a UDP subscriber's filter.
        kafka = sub.subscription.port is None
        counts.hist([e.time_ns / 1e6 for e in sub.delivered], bins=edges, histtype="step",
                    linewidth=2.4 if kafka else 1.6, linestyle="--" if kafka else "-", color=colour,
                    label=f"{sub.subscription.name}: {len(sub.delivered)} delivered")
    counts.set_yscale("log")
    counts.set_ylabel(f"packets per {span / BINS:.2f} ms")
    counts.legend(fontsize=8, loc="upper right")
    counts.set_title("camus INT anomaly subscriptions: delivered events vs the full telemetry stream")

    latency.scatter(ms, result.top_latency, s=2, color="0.7", linewidths=0, rasterized=True,
                    label="every packet's top hop")
    for colour, sub in zip(COLOURS, result.subscribers):
        if sub.subscription.port is None:
            continue  # the view's records are the same packets as a UDP subscriber's dots
        latency.scatter([e.time_ns / 1e6 for e in sub.delivered], [e.top.hop_latency for e in sub.delivered],
                        s=7, color=colour, linewidths=0, label=sub.subscription.filter, rasterized=True)
    # Symmetric log: normal hops report 0-3 µs (whole microseconds), bursts hundreds.
    latency.set_yscale("symlog", linthresh=10)
    latency.set_ylim(bottom=0)
    latency.set_ylabel("top-hop latency (µs)")
    latency.set_xlabel("simulated time (ms)")
    latency.legend(fontsize=8, loc="center right", markerscale=3)
    fig.tight_layout()
    save(fig, path, dpi=110)


def summary(result: DemoResult) -> str:
    lines = [f"INT 2.1 INT-MD over UDP {result.packets} packets, {result.duration_ns / 1e6:.1f} ms simulated, "
             f"{result.wall_seconds:.2f} s wall",
             f"{'subscriber':<20} {'port':>4} {'expected':>9} {'delivered':>9}  result  rule"]
    for s in result.subscribers:
        verdict = "equal" if s.equal else (f"DIFFERS (missing {len(s.expected - s.delivered_numbers)}, "
                                           f"extra {len(s.delivered_numbers - s.expected)}, "
                                           f"duplicates {s.duplicates}, undecodable {s.undecodable})")
        port = "-" if s.subscription.port is None else s.subscription.port
        lines.append(f"{s.subscription.name:<20} {port:>4} {len(s.expected):>9} "
                     f"{len(s.delivered):>9}  {verdict}  {s.subscription.filter}")
    lines.append(f"packets the switch delivered to at least one UDP subscriber: {result.packets_delivered} of {result.packets} "
                 f"({100 * result.packets_delivered / max(result.packets, 1):.2f}%)")
    lines.append(f"bytes delivered (all copies): {result.bytes_out} of {result.bytes_in} "
                 f"({100 * result.bytes_out / max(result.bytes_in, 1):.2f}%)")
    lines.append(f"switch drops: {result.switch_drops}  (no_route = matched no rule; no IPv4 route is installed)")
    lines.append("all subscribers got exactly what compiler.semantics.evaluate expects" if result.ok
                 else "MISMATCH between delivered and expected")
    return "\n".join(lines) + "\n"
