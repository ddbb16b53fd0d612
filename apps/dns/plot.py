"""The demo's picture: latency CDFs of queries answered by the switch and by the server, and
the server's load with and without the switch's answers."""

from __future__ import annotations

from pathlib import Path

from apps.dns.demo import MODES, Demo
from apps.dns.report import latencies, percentile
from apps.figures import pyplot, save

STYLES = {("cache", "switch"): ("#1f77b4", "-"), ("cache", "server"): ("#ff7f0e", "-"),
          ("baseline", "server"): ("#d62728", "--")}
LABELS = {"cache": "with the cache rules", "baseline": "baseline (no rules)"}


def write_png(demo: Demo, path: Path) -> Path:
    import numpy as np

    fig, (cdf, load) = pyplot().subplots(1, 2, figsize=(12, 4.6), dpi=110,
                                         gridspec_kw={"width_ratios": [2, 1]})
    for (mode, by), (colour, style) in STYLES.items():
        xs = np.sort(np.asarray(latencies(demo.runs[mode], by), dtype=float))
        if not len(xs):
            continue
        ys = np.arange(1, len(xs) + 1) / len(xs)
        cdf.step(xs, ys, where="post", color=colour, linestyle=style, linewidth=1.8,
                 label=f"{LABELS[mode]}: answered by the {by} ({len(xs)}), p50 {percentile(list(xs), 50):.2f} ms")
    cdf.set_xscale("log")  # the paths differ by fractions of a ms; the shared machine's tail by tens
    cdf.set_xlabel("query latency at the client, dnspython send to answer (ms, log scale)")
    cdf.set_ylabel("fraction of queries")
    cdf.set_ylim(0, 1.005)
    cdf.grid(True, alpha=0.3)
    cdf.legend(loc="lower right", fontsize=7.5)
    cdf.set_title("latency: answered at the switch vs forwarded to dnsmasq", fontsize=10)

    logged = [len(demo.runs[m].server_log) for m in MODES]
    relayed = [demo.runs[m].relayed for m in MODES]
    at = np.arange(len(MODES))
    load.bar(at - 0.2, logged, 0.4, label="queries in dnsmasq's log", color="#2ca02c")
    load.bar(at + 0.2, relayed, 0.4, label="query frames the relay carried", color="#98df8a")
    for x, n in zip(at, logged):
        load.annotate(str(n), (x - 0.2, n), ha="center", va="bottom", fontsize=8)
    load.set_xticks(at, [LABELS[m] for m in MODES], fontsize=8)
    load.set_ylabel("queries the server received")
    load.legend(loc="upper left", fontsize=7.5)
    load.grid(True, axis="y", alpha=0.3)
    load.set_title("server load", fontsize=10)
    w = demo.workload
    fig.suptitle(f"DNS through camus: {w.queries} queries over {w.names} names (Zipf {w.zipf:g}), "
                 f"{w.cache} cached names answered by the switch (answerDNS)", fontsize=10)
    fig.tight_layout()
    return save(fig, path)
