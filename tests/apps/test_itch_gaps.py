"""MoldUDP64 gap detection and repair, and telling loss from filtering in a camus-filtered stream.

Unit tests drive the sequence tracker and the retransmission server's answers without
sockets; the integration tests run the demo's publisher, switch, server and subscriber
processes on 127.0.0.1 with packets dropped deterministically on the publisher's link.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from apps.itch_filter import messages as itch, moldudp64
from apps.itch_filter.demo import prepare, run_mode
from apps.itch_filter.receiver import coalesce
from apps.itch_filter.retransmit import Store, answer
from apps.itch_filter.sequence import IntervalSet, Tracker
from apps.itch_filter.subscription import DEMO_SUBSCRIPTIONS, Subscription, itch_spec, rules_text
from compiler.compile import compile_rules
from compiler.rules import parse_rules
from switch.dataplane import load

S = moldudp64.session_id("T1")


def add(stock: str, price: int = 1_000_000) -> bytes:
    return itch.encode("A", stock=stock, price=price, shares=100, buy_sell_indicator="B")


def test_interval_set_merges_and_finds_gaps():
    s = IntervalSet()
    for lo, hi in [(1, 3), (5, 6), (3, 4), (10, 12), (6, 8), (0, 1)]:
        s.add(lo, hi)
    assert list(s.gaps(0, 14)) == [(4, 5), (8, 10), (12, 14)]
    s.add(2, 11)
    assert list(s.gaps(0, 14)) == [(12, 14)] and len(s) == 1
    assert 11 in s and 12 not in s


def test_tracker_accounts_for_zero_length_blocks_and_flags_jumps():
    t = Tracker()
    d = itch.encode("D", order_reference_number=1)
    # A filtered copy: messages 1 and 3 kept, 2 filtered out (a zero-length block).
    assert t.receive(moldudp64.decode(moldudp64.encode(S, 1, [add("GOOGL"), b"", add("GOOGL")]))) == \
        [(1, add("GOOGL")), (3, add("GOOGL"))]
    s = t.session(S)
    assert s.unexplained() == []
    # The next copy starts at 7: 4..6 were filtered or lost, nobody can tell yet.
    t.receive(moldudp64.decode(moldudp64.encode(S, 7, [d])))
    assert s.unexplained() == [(4, 3)] and not s.complete
    # A heartbeat announces 9 as the next number: 8 is unexplained too.
    t.receive(moldudp64.decode(moldudp64.heartbeat(S, 9)))
    assert s.unexplained() == [(4, 3), (8, 1)]
    # An answer accounts for every number it covers; a duplicate is counted, not returned.
    assert t.receive(moldudp64.decode(moldudp64.encode(S, 3, [add("GOOGL"), b"", b"", b""]))) == []
    assert s.duplicates == 1
    t.receive(moldudp64.decode(moldudp64.end_of_session(S, 9)))
    assert s.unexplained() == [(8, 1)] and s.ended and not s.complete
    t.receive(moldudp64.decode(moldudp64.encode(S, 8, [b""])))
    assert s.complete


def test_coalesce_merges_small_gaps_into_bounded_requests():
    assert coalesce([(1, 2), (5, 1), (9, 3)], span=100) == [(1, 11)]
    assert coalesce([(1, 2), (500, 1)], span=100) == [(1, 2), (500, 1)]
    assert coalesce([(1, 250)], span=100) == [(1, 100), (101, 100), (201, 50)]


def test_retransmission_answers_in_full_or_as_the_port_sees_the_feed():
    spec = itch_spec()
    subs = (Subscription("g", 'stock == "GOOGL"', 1), Subscription("m", 'stock == "MSFT"', 2))
    c = compile_rules(spec, parse_rules(rules_text(subs), spec))
    store = Store(capacity=300)
    msgs = [add("GOOGL" if i % 3 == 0 else "MSFT") for i in range(400)]
    store.add(S, 1, msgs[:250])
    store.add(S, 251, msgs[250:])
    with pytest.raises(ValueError):
        store.add(S, 1000, msgs[:1])  # not the next number
    # Unfiltered: the messages themselves, numbered as requested, at most 1400 bytes a packet.
    wire = answer(store, moldudp64.request(S, 150, 200), None)
    full = [moldudp64.decode(p) for p in wire]
    # (1400 - 20) // (36 + 2) = 36 messages a packet: 6 packets for 200.
    assert all(len(p) <= 1400 for p in wire) and len(full) == 6
    assert [p.sequence for p in full] == [150 + 36 * i for i in range(6)]
    assert [b for p in full for b in p.blocks] == msgs[149:349]
    # As port 1 sees it: every MSFT message is a zero-length block, trailing ones included.
    seen = [moldudp64.decode(p) for p in answer(store, moldudp64.request(S, 150, 200),
                                           (load(c.pipeline, c.entries), 1))]
    blocks = [b for p in seen for b in p.blocks]
    assert len(blocks) == 200 and seen[0].sequence == 150
    assert [p.sequence for p in seen] == [150 + sum(len(q.blocks) for q in seen[:i]) for i in range(len(seen))]
    assert blocks == [m if m == add("GOOGL") else b"" for m in msgs[149:349]]
    # Only the last 300 are held: a request for evicted numbers gets what is left.
    old = [moldudp64.decode(p) for p in answer(store, moldudp64.request(S, 90, 20), None)]
    assert [(p.sequence, len(p.blocks)) for p in old] == [(101, 9)]
    assert answer(store, moldudp64.request(S, 1, 50), None) == []


def small_demo(n=2500):
    subs = (DEMO_SUBSCRIPTIONS[0], DEMO_SUBSCRIPTIONS[1], DEMO_SUBSCRIPTIONS[4])
    # Paced (not as fast as possible) so that no subscriber socket overflows: the only loss
    # is the one the test makes.
    return prepare(n, seed=5, rate=20000, subscriptions=subs)


def lost_messages(demo, dropped: set[int]) -> set[int]:
    return {seq + k for i, (seq, msgs) in enumerate(demo.packets) if i in dropped for k in range(len(msgs))}


def test_filtered_stream_without_loss_recovers_nothing():
    """Gaps in a filtered stream are checked, and all turn out to be filtering."""
    demo = small_demo()
    run = run_mode(demo, "camus")
    for s in demo.subscriptions:
        r = run.results[s.name]
        assert r.complete and sorted(r.received) == demo.expected[s.name]
        assert r.recovered == [] and r.unwanted == 0
        assert r.requests > 0  # the gaps between its copies were asked about
    assert run.retransmit_requests == sum(r.requests for r in run.results.values())


@pytest.mark.parametrize("mode", ["camus", "host"])
def test_dropped_packets_are_all_recovered(mode):
    demo = small_demo()
    # Every 7th packet lost before the switch, and the last one, which only the end of
    # session reveals.
    dropped = set(range(3, len(demo.packets), 7)) | {len(demo.packets) - 1}
    lost = lost_messages(demo, dropped)
    run = run_mode(demo, mode, drop=lambda i: i in dropped,
                   request_interval=0.05 if mode == "host" else None)
    for s in demo.subscriptions:
        r = run.results[s.name]
        expected = demo.expected[s.name]
        assert r.complete and r.unexplained == []
        assert sorted(r.received) == expected  # every gap filled
        # Loss, told from filtering: every one of its own lost messages came back, and nothing
        # else did but messages it selects (a socket overflow on a loaded machine may add some).
        mine_lost = lost & set(expected)
        assert mine_lost, "the drop pattern must hit each subscriber"
        assert mine_lost <= set(r.recovered) <= set(expected)
        assert not set(r.live) & set(r.recovered)
        if mode == "camus":
            assert r.unwanted == 0


def test_copies_lost_on_one_subscribers_link_come_back_to_that_subscriber_only():
    demo = small_demo()
    victim = demo.subscriptions[1]
    run = run_mode(demo, "camus", drop_copy=lambda i, port: port == victim.port and i % 3 == 0)
    lost = lost_messages(demo, set(range(0, len(demo.packets), 3))) & set(demo.expected[victim.name])
    assert lost
    for s in demo.subscriptions:
        r = run.results[s.name]
        assert r.complete and sorted(r.received) == demo.expected[s.name] and r.unwanted == 0
        if s is victim:
            assert lost <= set(r.recovered)
        else:
            assert r.recovered == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8)), max_size=30))
def test_interval_set_agrees_with_a_set_of_numbers(spans):
    s, model = IntervalSet(), set()
    for lo, n in spans:
        s.add(lo, lo + n)
        model |= set(range(lo, lo + n))
    assert [x for x in range(-1, 72) if x in s] == sorted(model)
    assert [x for lo, hi in s.gaps(0, 70) for x in range(lo, hi)] == \
        [x for x in range(0, 70) if x not in model]
