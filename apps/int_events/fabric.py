"""A simulated leaf-spine fabric that emits INT 2.1 INT-MD packets: the telemetry source.

Topology: `leaves` leaf switches (node ids 1..L), `spines` spine switches (101..100+S) and
`hosts_per_leaf` hosts under each leaf. Each host's NIC is the INT source (host-based INT,
node id 1001+host): it adds the shim and MD header and pushes its own record, then every
switch on the path pushes one. A flow inside one rack crosses NIC, leaf (2 hops); a flow
between racks crosses NIC, leaf, spine (ECMP by a hash of the 5-tuple), leaf (4 hops).
The packet that reaches the collector carries the whole stack, the last leaf on top: that
top record is what camus matches (as the paper did), so the anomalies that matter here are
congestion on a leaf's downlink queue toward a host, the classic incast spot.

Units are the simulated device's choice, as the INT spec leaves them: hop latency in
microseconds, queue occupancy in 80-byte cells drained at 25 Gb/s (25.6 ns a cell).
Latency = a lognormal per-hop processing time + the queueing time of the occupancy found.

Traffic: Poisson arrivals over Zipf-weighted flows between random hosts, plus incast
bursts: during each `Burst`, extra flows from many senders converge on one host, and the
victim leaf's queue fills (fast rise, linear drain) far past its normal few dozen cells.
Rare independent microbursts on any queue add stray anomalies across the fabric.
Everything follows from one seed.
"""

from __future__ import annotations

import itertools
import math
import random
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from apps.int_events.int_md import INT_UDP_PORT, Hop, IntStack
from switch.packet import udp_frame

CELL_BYTES = 80
LINK_GBPS = 25
CELL_US = CELL_BYTES * 8 / (LINK_GBPS * 1000)  # one cell's drain time, microseconds
SPINE_BASE = 100
NIC_BASE = 1000
SOURCE_HOP_BUDGET = 8  # Remaining Hop Count set by the source: the domain's diameter and margin
PAYLOAD = struct.Struct("!QQ")  # the sender's own payload: packet number, send time (ns)


@dataclass(frozen=True)
class Burst:
    """Congestion on one leaf's downlink queue: incast toward `host` (index under the leaf)."""

    leaf: int
    host: int
    queue_id: int
    start: float  # fraction of the run's duration
    length: float  # fraction of the run's duration
    peak_cells: int

    def occupancy(self, t: float) -> float:
        """Cells added at run fraction `t`: a fast rise (first 20%), then a linear drain."""
        x = (t - self.start) / self.length
        if not 0.0 <= x < 1.0:
            return 0.0
        return self.peak_cells * (x / 0.2 if x < 0.2 else (1.0 - x) / 0.8)


DEFAULT_BURSTS = (
    Burst(leaf=2, host=3, queue_id=0, start=0.22, length=0.05, peak_cells=12000),
    Burst(leaf=3, host=5, queue_id=1, start=0.50, length=0.03, peak_cells=7000),
    Burst(leaf=2, host=6, queue_id=0, start=0.72, length=0.04, peak_cells=9000),
)


@dataclass(frozen=True)
class FabricConfig:
    leaves: int = 4
    spines: int = 2
    hosts_per_leaf: int = 8
    flows: int = 96
    mean_gap_ns: int = 5000  # mean time between telemetry packets on the collector link
    incast_share: float = 0.03  # fraction of all packets that belong to incast flows
    microburst_rate: float = 2e-4  # chance that a hop record meets an independent microburst
    normal_cells: float = 24.0  # mean occupancy of an uncongested queue
    bursts: tuple[Burst, ...] = DEFAULT_BURSTS


@dataclass(frozen=True)
class Flow:
    src: int  # global host index
    dst: int
    src_port: int
    dst_port: int
    queue_id: int


@dataclass(frozen=True)
class TelemetryPacket:
    number: int
    time_ns: int
    flow: Flow
    stack: IntStack
    frame: bytes = field(repr=False)


def host_ip(host: int, hosts_per_leaf: int) -> int:
    leaf, index = divmod(host, hosts_per_leaf)
    return (10 << 24) | ((leaf + 1) << 8) | (index + 1)  # 10.0.<leaf>.<host>


class Fabric:
    def __init__(self, config: FabricConfig = FabricConfig(), seed: int = 1):
        self.config = config
        self.rng = random.Random(seed)
        for b in config.bursts:
            if not (1 <= b.leaf <= config.leaves and 0 <= b.host < config.hosts_per_leaf):
                raise ValueError(f"burst {b} names a leaf or host outside the fabric")
        n_hosts = config.leaves * config.hosts_per_leaf
        self.flows = [self._flow(self.rng.randrange(n_hosts), None) for _ in range(config.flows)]
        # Zipf-like weights: a few elephant flows carry most packets.
        self.flow_cum_weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(config.flows)))

    def _flow(self, src: int, dst: int | None, queue_id: int | None = None) -> Flow:
        n_hosts = self.config.leaves * self.config.hosts_per_leaf
        while dst is None or dst == src:
            dst = self.rng.randrange(n_hosts)
        if queue_id is None:
            queue_id = self.rng.choices((0, 1, 2), weights=(0.7, 0.2, 0.1))[0]
        return Flow(src, dst, self.rng.randrange(32768, 61000), self.rng.choice((5201, 9000, 4791, 8080)), queue_id)

    def packets(self, n: int) -> Iterator[TelemetryPacket]:
        """`n` packets in time order over a run of n * mean_gap_ns."""
        cfg = self.config
        duration = n * cfg.mean_gap_ns
        n_incast = round(n * cfg.incast_share) if cfg.bursts else 0
        # Arrival times as run fractions, each with the flow it belongs to.
        arrivals = [(self.rng.random(), None) for _ in range(n - n_incast)]
        total_len = sum(b.length for b in cfg.bursts)
        for _ in range(n_incast):
            b = self._pick_burst(total_len)
            victim = (b.leaf - 1) * cfg.hosts_per_leaf + b.host
            sender = self.rng.randrange(cfg.leaves * cfg.hosts_per_leaf)
            arrivals.append((b.start + self.rng.random() * b.length, self._flow(sender, victim, b.queue_id)))
        arrivals.sort(key=lambda a: a[0])
        for number, (t, flow) in enumerate(arrivals):
            if flow is None:
                flow = self.rng.choices(self.flows, cum_weights=self.flow_cum_weights)[0]
            yield self._packet(number, t, int(t * duration), flow)

    def _pick_burst(self, total_len: float) -> Burst:
        x = self.rng.random() * total_len
        for b in self.config.bursts:
            if x < b.length:
                return b
            x -= b.length
        return self.config.bursts[-1]

    def path(self, flow: Flow) -> list[tuple[int, int, int]]:
        """(node id, ingress port, egress port) per hop, source first. Ports are 1-based;
        a NIC's host side is port 0. Leaf ports 1..H face hosts, H+1..H+S face spines."""
        h = self.config.hosts_per_leaf
        src_leaf, src_i = divmod(flow.src, h)
        dst_leaf, dst_i = divmod(flow.dst, h)
        hops = [(NIC_BASE + 1 + flow.src, 0, 1)]
        if src_leaf == dst_leaf:
            hops.append((src_leaf + 1, src_i + 1, dst_i + 1))
            return hops
        key = struct.pack("!IIHHB", flow.src, flow.dst, flow.src_port, flow.dst_port, 17)
        spine = zlib.crc32(key) % self.config.spines
        hops.append((src_leaf + 1, src_i + 1, h + 1 + spine))
        hops.append((SPINE_BASE + 1 + spine, src_leaf + 1, dst_leaf + 1))
        hops.append((dst_leaf + 1, h + 1 + spine, dst_i + 1))
        return hops

    def _occupancy(self, node: int, egress: int, queue_id: int, t: float) -> int:
        cells = self.rng.expovariate(1.0 / self.config.normal_cells)
        if self.rng.random() < self.config.microburst_rate:
            cells += self.rng.uniform(1500, 9000)
        for b in self.config.bursts:
            if node == b.leaf and egress == b.host + 1 and queue_id == b.queue_id:
                cells += b.occupancy(t) * self.rng.uniform(0.9, 1.0)
        return min(int(cells), 0xFFFFFF)

    def _packet(self, number: int, t: float, time_ns: int, flow: Flow) -> TelemetryPacket:
        stack = IntStack(original_port=flow.dst_port, remaining_hop_count=SOURCE_HOP_BUDGET)
        for node, ingress, egress in self.path(flow):
            if node > NIC_BASE:
                cells, processing = self.rng.randrange(4), self.rng.lognormvariate(math.log(0.3), 0.3)
            else:
                cells = self._occupancy(node, egress, flow.queue_id, t)
                processing = self.rng.lognormvariate(math.log(0.9), 0.3)
            latency = round(processing + cells * CELL_US)
            stack = stack.push(Hop(node, ingress, egress, latency, flow.queue_id, cells))
        h = self.config.hosts_per_leaf
        payload = stack.encode() + PAYLOAD.pack(number, time_ns)
        frame = udp_frame(payload, dst_port=INT_UDP_PORT, src_port=flow.src_port,
                          src_ip=host_ip(flow.src, h), dst_ip=host_ip(flow.dst, h))
        return TelemetryPacket(number, time_ns, flow, stack, frame)


def packet_number(udp_payload_after_int: bytes) -> tuple[int, int]:
    """(packet number, send time ns) from the original payload that follows the INT stack."""
    return PAYLOAD.unpack_from(udp_payload_after_int, 0)
