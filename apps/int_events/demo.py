"""`camus demo int`: the telemetry source, the software switch and the anomaly subscribers, live.

The run, in order: compile the subscriptions against p4/int/int.p4 into `OUT/switch/`
(the same pipeline.json and entries.json `camus compile` writes); load them into a software
switch `Device` whose egress ports 1..3 are `UdpPort`s sending to the subscribers' sockets on
127.0.0.1; generate the fabric's INT packets and hand each to the switch's ingress port
(in process: the tap on the collector link); wait for the copies; compare.

What should arrive is computed independently of the switch: every frame is decoded back to
its top hop record and `compiler.semantics.evaluate` (the definition of correct) says which
ports the rules select. Delivered and expected are compared as sets of packet numbers per
subscriber, so a missing copy, an extra one and a wrong one all show.

With `kafka`, the same reports are also produced to the topic `int-telemetry` of a
`camus serve` started for the run, and an ordinary Kafka consumer reads the view
`int-anomalies` (apps.int_events.kafka_view, run by apps.kafka_demo); its records are
checked the same way and written, rendered as JSON, to `int-anomalies.jsonl`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from apps.int_events import kafka_view
from apps.int_events.fabric import Fabric, FabricConfig, packet_number
from apps.int_events.int_md import NotIntMd, decode, top_hop_values
from apps.int_events.subscribers import Event, Subscription, UdpSubscriber
from apps.kafka_demo import through_views
from compiler.compile import compile_rules, write_outputs
from compiler.rules import parse_filter, parse_rules
from compiler.semantics import evaluate, holds
from compiler.spec import load_spec
from switch.device import Device, config_from_dir
from switch.packet import read_udp
from switch.ports import Ports, UdpPort

INT_SPEC = Path(__file__).resolve().parents[2] / "p4" / "int" / "int.p4"
INGRESS_PORT = 10  # the port the collector link (the tap carrying the INT stream) enters on

SUBSCRIPTIONS = (
    Subscription("leaf2-slow", "switch_id == 2 and hop_latency > 100", 1),
    Subscription("severe-anywhere", "hop_latency > 200", 2),
    Subscription("leaf3-queue", "switch_id == 3 and queue_occupancy > 4000", 3),
)
KAFKA_FILTER = "switch_id == 2 and hop_latency > 100"


@dataclass
class SubscriberResult:
    subscription: Subscription
    expected: set[int]
    delivered: list[Event]
    undecodable: int

    @property
    def delivered_numbers(self) -> set[int]:
        return {e.number for e in self.delivered}

    @property
    def duplicates(self) -> int:
        return len(self.delivered) - len(self.delivered_numbers)

    @property
    def equal(self) -> bool:
        return self.delivered_numbers == self.expected and not self.duplicates and not self.undecodable


@dataclass
class DemoResult:
    packets: int
    bytes_in: int
    bytes_out: int
    duration_ns: int  # the simulated run's length
    wall_seconds: float
    subscribers: list[SubscriberResult]
    # Per packet, for the picture: send time (ns) and top-hop latency.
    times_ns: list[int] = field(repr=False, default_factory=list)
    top_latency: list[int] = field(repr=False, default_factory=list)
    switch_drops: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s.equal for s in self.subscribers)

    @property
    def packets_delivered(self) -> int:
        """Packets the switch delivered to at least one UDP subscriber."""
        return len(set().union(*(s.delivered_numbers for s in self.subscribers if s.subscription.port is not None)))


def run(packets: int, out: Path, seed: int = 1, impl: str = "native",
        subscriptions: tuple[Subscription, ...] = SUBSCRIPTIONS,
        config: FabricConfig = FabricConfig(), kafka: bool = False,
        kafka_filter: str = KAFKA_FILTER) -> DemoResult:
    out.mkdir(parents=True, exist_ok=True)
    spec = load_spec(INT_SPEC)
    rules_text = "".join(s.rule + "\n" for s in subscriptions)
    (out / "int-anomalies.rules").write_text(rules_text)
    rules = parse_rules(rules_text, spec, source=str(out / "int-anomalies.rules"))
    write_outputs(compile_rules(spec, rules), out / "switch")
    # The view's filter, read as a rule over the same top-hop fields: its expected records.
    view_filter = parse_filter(kafka_filter, spec) if kafka else None
    view_expected: set[int] = set()
    reports: list[bytes] = []

    device = Device(impl)
    device.install(*config_from_dir(out / "switch"))
    ports = Ports(device)
    subscribers = [UdpSubscriber(s) for s in subscriptions]
    for sub in subscribers:
        ports.add(UdpPort(sub.subscription.port, sub.address))
    expected: dict[int, set[int]] = {s.port: set() for s in subscriptions}
    result = DemoResult(packets, 0, 0, packets * config.mean_gap_ns, 0.0, [])
    started = time.perf_counter()
    try:
        for sub in subscribers:
            sub.start()
        ports.start()
        for pkt in Fabric(config, seed).packets(packets):
            # Expected from the bytes, not from the generator's objects: decode, then evaluate.
            report = read_udp(pkt.frame).payload
            stack, rest = decode(report)
            number, time_ns = packet_number(rest)
            values = top_hop_values(stack.hops[0])
            for port in evaluate(rules, values):
                expected[port].add(number)
            if kafka:
                reports.append(report)
                if holds(view_filter, values):
                    view_expected.add(number)
            result.times_ns.append(time_ns)
            result.top_latency.append(values["int_hop.hop_latency"])
            result.bytes_in += len(pkt.frame)
            ports.forward(pkt.frame, INGRESS_PORT)
        for sub in subscribers:
            sub.wait(len(expected[sub.subscription.port]))
    finally:
        ports.stop()
        for sub in subscribers:
            sub.stop()
    with device.lock:
        result.switch_drops = dict(device.dataplane.counters()["drops"])
    for sub in subscribers:
        result.subscribers.append(SubscriberResult(sub.subscription, expected[sub.subscription.port],
                                                   sorted(sub.events, key=lambda e: e.number), sub.undecodable))
        result.bytes_out += sum(e.frame_bytes for e in sub.events)
    if kafka:
        result.subscribers.append(_through_kafka(out, reports, view_expected, kafka_filter))
    result.wall_seconds = time.perf_counter() - started
    return result


def _through_kafka(out: Path, reports: list[bytes], expected: set[int], view_filter: str) -> SubscriberResult:
    view = kafka_view.VIEW
    read = through_views(out / "broker.log", kafka_view.CLIENT, kafka_view.TELEMETRY_TOPIC,
                         kafka_view.SCHEMA, {view: view_filter}, reports, {view: len(expected)})
    records = read.received[view]
    events, undecodable = [], 0
    with open(out / "int-anomalies.jsonl", "w") as fh:
        for offset, value in records:
            try:
                stack, rest = decode(value)
                number, time_ns = packet_number(rest)
            except (NotIntMd, ValueError, IndexError):
                undecodable += 1
                continue
            events.append(Event(number, time_ns, stack.hops[0], len(stack.hops), len(value)))
            fh.write(json.dumps({"offset": offset, **kafka_view.render_json(value)}) + "\n")
    return SubscriberResult(Subscription(f"kafka:{kafka_view.VIEW}", view_filter, None), expected,
                            sorted(events, key=lambda e: e.number), undecodable)
