"""The demo's picture: request latency CDFs (the paper's Fig. 11) and the forwarder's load.

Left: the latency CDF of cold browsing requests, camus against the baseline (solid), with
every browsing request's (dotted) for context. Right: the forwarder's
packets handled per 100 ms over each mode's first run, and the streams' answers per 100 ms
(dashed): what the forwarder gives the closed-loop clients.
"""

from __future__ import annotations

from pathlib import Path

from apps.figures import pyplot, save
from apps.hicn.demo import MODES, Demo
from apps.hicn.report import classify, mode_stats, percentile

COLOURS = {"camus": "#1f77b4", "baseline": "#d62728"}
LABELS = {"camus": "camus (meter decides)", "baseline": "baseline (all to the forwarder)"}
BIN_NS = 100_000_000


def write_png(demo: Demo, path: Path) -> Path:
    import numpy as np

    fig, (cdf, load) = pyplot().subplots(1, 2, figsize=(12, 4.6), dpi=110)
    for mode in MODES:
        st = mode_stats(demo, mode)
        for cls, style, width in (("cold", "-", 2.0), ("browsing", ":", 1.3)):
            xs = np.sort(np.asarray(st.latencies[cls], dtype=float))
            if not len(xs):
                continue
            ys = np.arange(1, len(xs) + 1) / len(xs)
            label = (f"{LABELS[mode]}, cold: p50 {percentile(xs, 50):.2f} ms, p95 {percentile(xs, 95):.2f} ms"
                     if cls == "cold" else f"{mode}, all browsing requests")
            cdf.step(xs, ys, where="post", color=COLOURS[mode], linestyle=style, linewidth=width, label=label)
    tails = [percentile(mode_stats(demo, m).latencies["cold"], 99.5) for m in MODES]
    tails = [t for t in tails if t == t]  # a mode without cold requests has none
    cdf.set_xlim(0, 1.1 * max(tails) if tails else None)  # the last half percent is the machine's noise
    cdf.set_xlabel("request latency, client to answer (ms)")
    cdf.set_ylabel("fraction of requests")
    cdf.set_ylim(0, 1.005)
    cdf.axhline(0.95, color="0.6", linewidth=0.8, linestyle="--")
    cdf.grid(True, which="both", alpha=0.3)
    cdf.legend(loc="lower right", fontsize=7.5)
    cdf.set_title("latency of requests for cold content (Fig. 11)", fontsize=10)

    for mode in MODES:
        run = next((r for r in demo.runs if r.mode == mode), None)
        if run is None:
            continue
        bins = max(1, run.duration_ns // BIN_NS)
        edges = [i * BIN_NS / 1e9 for i in range(bins + 1)]
        handled = [(t - run.t0) / 1e9 for t in run.forwarder["handled"] if run.t0 <= t < run.end]
        classes = classify(demo, run)
        streams = [(t - run.t0) / 1e9 for n, t, _ in run.answers
                   if run.t0 <= t < run.end and classes.get(n) == "stream"]
        scale = 1e9 / BIN_NS  # per bin -> per second
        for values, style, what in ((handled, "-", "forwarder packets"), (streams, "--", "stream answers")):
            counts, _ = np.histogram(values, bins=edges)
            load.step(edges[1:], counts * scale, where="pre", color=COLOURS[mode], linestyle=style,
                      linewidth=1.4, label=f"{mode}: {what}")
    load.axhline(1e6 / demo.settings.service_us, color="0.4", linewidth=0.8, linestyle=":",
                 label="forwarder capacity")
    load.set_xlabel("time in the run (s)")
    load.set_ylabel("per second (100 ms bins)")
    load.set_ylim(bottom=0)
    load.grid(True, alpha=0.3)
    load.legend(loc="lower right", fontsize=7.5)
    load.set_title("forwarder load and stream throughput", fontsize=10)
    w = demo.settings.workload
    fig.suptitle(f"hICN through camus: {w.rate:,.0f} browsing requests/s over {w.contents:,} contents "
                 f"(Zipf {w.zipf:g}), {w.streams} streams; switch {demo.settings.switch}", fontsize=10)
    fig.tight_layout()
    return save(fig, path)
