"""The demo's picture: latency CDFs, camus filtering against host filtering (like the paper's Fig. 8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from apps.figures import pyplot, save

COLORS = {"camus": "#1f77b4", "host": "#d62728"}
LABELS = {"camus": "camus (switch filters)", "host": "host filtering (whole feed)"}


def latency_cdf(latencies_us: Mapping[str, Sequence[float]], path: str | Path, title: str) -> Path:
    """One CDF per mode of all its subscribers' message latencies (microseconds, log scale)."""
    import numpy as np

    fig, ax = pyplot().subplots(figsize=(7, 4.2), dpi=120)
    for mode, values in latencies_us.items():
        if not len(values):
            continue
        xs = np.sort(np.asarray(values, dtype=float))
        ys = np.arange(1, len(xs) + 1) / len(xs)
        p50, p99 = np.percentile(xs, [50, 99])
        ax.step(xs, ys, where="post", color=COLORS.get(mode), linewidth=1.8,
                label=f"{LABELS.get(mode, mode)}: p50 {p50:,.0f} us, p99 {p99:,.0f} us")
    ax.set_xscale("log")
    ax.set_xlabel("message latency, publisher to subscriber (us, log scale)")
    ax.set_ylabel("fraction of delivered messages")
    ax.set_ylim(0, 1.005)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return save(fig, path)
