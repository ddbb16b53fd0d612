"""Random programs, random traffic: the native data plane equals the reference on every table
kind (exact, range, lpm, ternary), after inserts, modifies and deletes, counters included."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from switch.dataplane import load
from pipeline.model import EntryError
from switch.packet import udp_frame
from switch_helpers import FLAT_GROUP, FLAT_PIPELINE, FLAT_PORT, ITCH_GROUP, ITCH_PIPELINE, add_order, ascii_int, itch_frame

STATES = st.integers(0, 3)
SYMBOLS = ["AAPL", "IBM", "MSFT"]


def action(kind_of_table: str):
    finals = st.one_of(
        st.builds(lambda p: ("fwd", {"port": p}), st.integers(1, 4)),
        st.builds(lambda b: ("mcast", {"ports": b}), st.integers(0, 63)),  # a bitmap of ports 0..5
    )
    if kind_of_table == "leaf":
        return finals
    return st.one_of(st.builds(lambda s: ("set_state", {"state": s}), STATES), finals)


def entry(table: str, key: dict | None, kind_of_table: str = "stage", priority=st.just(None)):
    def build(state, act, prio, k):
        match = {"state": {"exact": state}}
        if k is not None:
            match.update(k)
        e = {"table": table, "match": match, "action": act[0], "params": act[1]}
        if prio is not None:
            e["priority"] = prio
        return e
    return st.builds(build, STATES, action(kind_of_table), priority, st.just(None) if key is None else key)


def field_key(field: str, kind: str, values):
    if kind == "exact":
        return st.builds(lambda v: {field: {"exact": v}}, values)
    if kind == "range":
        return st.builds(lambda a, b: {field: {"range": [min(a, b), max(a, b)]}}, values, values)
    if kind == "lpm":
        return st.builds(lambda v, n: {field: {"lpm": [v, n]}}, values, st.integers(0, 32))
    return st.builds(lambda v, m: {field: {"ternary": [v, m]}}, values, st.sampled_from([0, 1, 3, 0xF0, 0xFFFF]))


# The applications' groups (ITCH_GROUP, FLAT_GROUP) and another that no decision reaches.
groups = st.lists(st.tuples(st.sampled_from([ITCH_GROUP, FLAT_GROUP, 3]), st.sets(st.tuples(st.integers(1, 4), st.integers(0, 2)), max_size=3)),
                  max_size=3)

prices = st.integers(0, 40)
itch_entries = st.one_of(
    entry("itch_stock", field_key("itch_order.stock", "exact", st.sampled_from([ascii_int(s) for s in SYMBOLS]))),
    entry("itch_price", field_key("itch_order.price", "range", prices), priority=st.integers(1, 3)),
    entry("itch_stock_default", None), entry("itch_price_default", None), entry("itch_leaf", None, "leaf"),
)
keys = st.sampled_from([0x0A000000, 0x0A010000, 0x0A010203, 0x0B000000, 0])
flags = st.sampled_from([0, 1, 2, 3, 0x10, 0xF1])
flat_entries = st.one_of(
    entry("flat_key", field_key("m.key", "lpm", keys)),
    entry("flat_flags", field_key("m.flags", "ternary", flags), priority=st.integers(1, 3)),
    entry("flat_key_default", None), entry("flat_flags_default", None), entry("flat_leaf", None, "leaf"),
)

def program(entries):
    """("insert" | "modify" | "delete", entry) writes; one that fails must fail in both planes."""
    return st.lists(st.tuples(st.sampled_from(["insert", "insert", "insert", "modify", "delete"]), entries),
                    max_size=25)


def apply(dp, groups_, ops) -> list[bool]:
    for gid, reps in groups_:
        dp.set_group(gid, sorted(reps))
    outcome = []
    for op, e in ops:
        try:
            getattr(dp, op)(e)
            outcome.append(True)
        except EntryError:
            outcome.append(False)
    return outcome


def check(pipeline, groups_, ops, frames):
    py, native = load(pipeline, impl="python"), load(pipeline, impl="native")
    assert apply(py, groups_, ops) == apply(native, groups_, ops)
    assert native.process_batch(frames, 0) == py.process_batch(frames, 0)
    assert native.counters() == py.counters()


itch_frames = st.lists(st.builds(lambda ms: itch_frame(ms), st.lists(
    st.builds(add_order, st.sampled_from(SYMBOLS + ["ZZ"]), prices), min_size=1, max_size=5)), min_size=1, max_size=5)
flat_frames = st.lists(st.builds(lambda k, f: udp_frame(struct.pack("!IHH", k, f, 0), dst_port=FLAT_PORT),
                                 st.one_of(keys, st.integers(0, 2 ** 32 - 1)), st.one_of(flags, st.integers(0, 0xFFFF))),
                       min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(groups, program(itch_entries), itch_frames)
def test_exact_and_range_tables_agree(groups_, ops, frames):
    check(ITCH_PIPELINE, groups_, ops, frames)


@settings(max_examples=150, deadline=None)
@given(groups, program(flat_entries), flat_frames)
def test_lpm_and_ternary_tables_agree(groups_, ops, frames):
    check(FLAT_PIPELINE, groups_, ops, frames)
