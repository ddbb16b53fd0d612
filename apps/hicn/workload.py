"""The request workload: a catalogue of content identifiers with Zipf popularity, and when each
request is made.

Two kinds of clients share the switch, as in the paper's experiment (§V, Fig. 10): *browsing*
requests, an open-loop Poisson stream over the whole catalogue whose content is drawn with
Zipf popularity (rank r is requested with probability proportional to 1 / r^s), so a few
identifiers are hot and the long tail is cold; and *streams*, closed-loop clients that keep a
window of requests outstanding for one identifier each (what the paper's `hiperf` clients do),
whose throughput is what the forwarder can give them. Only the browsing schedule is drawn in
advance (here, from the seed); a stream's next request goes out when an answer comes back,
so its sends are recorded by the client process as they happen.

Identifiers are random 64-bit numbers (distinct; a seeded generator), as hICN names are
arbitrary: two of them may agree in their low 16 bits and so share a meter bucket of the
rules (docs/stateful.md, keyed state); the demo counts how often that sent cold content to
the forwarder instead of hiding it.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class WorkloadConfig:
    rate: float = 100.0  # browsing requests per second (Poisson)
    duration: float = 6.0  # seconds of requests
    contents: int = 20000  # identifiers in the catalogue
    zipf: float = 1.0  # the popularity exponent s
    streams: int = 2  # closed-loop streaming clients
    window: int = 2  # requests each stream keeps outstanding
    seed: int = 1

    def check(self) -> None:
        """ValueError naming the first parameter out of its range."""
        if not self.rate > 0:
            raise ValueError("--rate must be positive")
        if not self.duration > 0:
            raise ValueError("--duration must be positive")
        if self.contents < 1:
            raise ValueError("--contents must be at least 1")
        if self.zipf < 0:
            raise ValueError("--zipf must not be negative")
        if self.streams < 0 or (self.streams and self.window < 1):
            raise ValueError("--streams must not be negative and --window must be at least 1")


@dataclass(frozen=True)
class Catalogue:
    """Identifiers by popularity rank (index 0 is rank 1) and the Zipf weights' running sums."""

    ids: tuple[int, ...]
    cum_weights: tuple[float, ...]
    stream_id: int  # the identifier the streams request: not in the browsing catalogue

    def share(self, rank: int) -> float:
        """The fraction of browsing requests that go to the content of `rank` (1-based)."""
        before = self.cum_weights[rank - 2] if rank > 1 else 0.0
        return (self.cum_weights[rank - 1] - before) / self.cum_weights[-1]

    def rank_of(self) -> dict[int, int]:
        return {c: r for r, c in enumerate(self.ids, 1)}


def catalogue(config: WorkloadConfig) -> Catalogue:
    rng = random.Random(f"hicn-catalogue-{config.seed}")
    ids: set[int] = set()
    while len(ids) < config.contents + 1:
        ids.add(rng.getrandbits(64))
    ordered = sorted(ids)
    rng.shuffle(ordered)
    weights = itertools.accumulate(1.0 / (r ** config.zipf) for r in range(1, config.contents + 1))
    return Catalogue(tuple(ordered[:-1]), tuple(weights), ordered[-1])


def browsing(config: WorkloadConfig, cat: Catalogue) -> list[tuple[int, int]]:
    """The browsing requests: (send time in microseconds from the start, content), in time
    order, Poisson arrivals at `config.rate` over `config.duration` seconds."""
    rng = random.Random(f"hicn-browsing-{config.seed}")
    out: list[tuple[int, int]] = []
    t = 0.0
    end = config.duration * 1e6
    total = cat.cum_weights[-1]
    while True:
        t += rng.expovariate(config.rate) * 1e6
        if t >= end:
            return out
        rank = bisect.bisect_left(cat.cum_weights, rng.random() * total)
        out.append((int(t), cat.ids[min(rank, len(cat.ids) - 1)]))


def hot_ranks(config: WorkloadConfig, cat: Catalogue, threshold: float) -> int:
    """How many of the most popular identifiers are requested, on average, at least
    `threshold` times a second by the browsing client: the ones the meter should find hot."""
    n = 0
    while n < len(cat.ids) and config.rate * cat.share(n + 1) >= threshold:
        n += 1
    return n
