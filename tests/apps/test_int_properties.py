"""Properties of the INT path: any stack round-trips through the encoder and the scapy layers
declared from the spec; and for random anomaly rules over the top record, the software switch
(native and Python reference) forwards each INT packet to exactly the ports
compiler.semantics.evaluate gives."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.int_events.int_md import INT_UDP_PORT, Hop, IntStack, decode, top_hop_values
from compiler.compile import compile_text
from compiler.semantics import evaluate
from switch.dataplane import IMPLEMENTATIONS, load
from switch.packet import read_udp, udp_frame
from tests.apps.int_layers import IntShimMd

ROOT = Path(__file__).resolve().parents[2]
INT_SPEC = (ROOT / "p4" / "int" / "int.p4").read_text()

# Values cluster around the constants the rules use, where an off-by-one would show.
NODES = st.sampled_from((1, 2, 3, 101, 1001, 0xFFFFFFFF))
LATENCIES = st.one_of(st.sampled_from((0, 99, 100, 101, 199, 200, 201, 0xFFFFFFFF)), st.integers(0, (1 << 32) - 1))
OCCUPANCIES = st.one_of(st.sampled_from((0, 3999, 4000, 4001, 0xFFFFFF)), st.integers(0, (1 << 24) - 1))
hops = st.builds(Hop, NODES, st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), LATENCIES,
                 st.integers(0, 255), OCCUPANCIES)

atoms = st.one_of(
    st.builds("switch_id == {}".format, st.sampled_from((1, 2, 3, 101))),
    st.builds("switch_id != {}".format, st.sampled_from((1, 2))),
    st.builds("hop_latency {} {}".format, st.sampled_from((">", ">=", "<", "<=")), st.sampled_from((0, 100, 200))),
    st.builds("queue_occupancy > {}".format, st.sampled_from((0, 4000, 0xFFFFFE))),
    st.builds("egress_port <= {}".format, st.sampled_from((0, 4, 0xFFFF))),
)
filters = st.lists(atoms, min_size=1, max_size=3).map(" and ".join)
rule_sets = st.lists(st.tuples(filters, st.integers(1, 6)), min_size=1, max_size=5).map(
    lambda rs: "".join(f"{f} : fwd({p})\n" for f, p in rs))


@settings(max_examples=150, deadline=None)
@given(stack_hops=st.lists(hops, min_size=1, max_size=6), budget=st.integers(0, 8),
       original_port=st.integers(0, 0xFFFF), payload=st.binary(max_size=24))
def test_any_stack_round_trips_through_scapy_and_the_decoder(stack_hops, budget, original_port, payload):
    stack = IntStack(original_port=original_port, remaining_hop_count=budget)
    for hop in reversed(stack_hops):  # the last one pushed ends on top
        stack = stack.push(hop)
    pushed = stack_hops[-min(budget, len(stack_hops)):] if budget else []
    assert list(stack.hops) == pushed
    assert stack.hop_count_exceeded == (len(stack_hops) > budget)
    wire = stack.encode() + payload
    parsed = IntShimMd(wire)
    assert parsed.length == 3 + 4 * len(pushed) and parsed.e == int(len(stack_hops) > budget)
    assert [(h.node_id, h.hop_latency, h.queue_occupancy) for h in parsed.stack] == \
        [(h.node_id, h.hop_latency, h.queue_occupancy) for h in pushed]
    assert decode(wire) == (stack, payload)


@settings(max_examples=60, deadline=None)
@given(rules_text=rule_sets, tops=st.lists(hops, min_size=1, max_size=8), impl=st.sampled_from(IMPLEMENTATIONS))
def test_switch_forwards_int_packets_as_the_semantics_say(rules_text, tops, impl):
    compiled = compile_text(INT_SPEC, rules_text, name="int")
    dp = load(compiled.pipeline, compiled.entries, impl=impl)
    for top in tops:
        stack = IntStack(original_port=5201, remaining_hop_count=8).push(Hop(1001, 0, 1, 1, 0, 0)).push(top)
        frame = udp_frame(stack.encode() + b"\0" * 16, dst_port=INT_UDP_PORT)
        want = evaluate(compiled.rules, top_hop_values(top))
        out = dp.process(frame, 10)
        assert sorted(p for p, _ in out) == sorted(want), (rules_text, top)
        for _, copy in out:
            assert decode(read_udp(copy).payload) == (stack, b"\0" * 16)  # copies carry the whole stack
