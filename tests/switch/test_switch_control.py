"""Programming the data plane: P4Runtime-like write semantics, validation, and their effect."""

from __future__ import annotations

import pytest

from switch.dataplane import load, new
from pipeline.model import EntryError, PipelineError
from switch_helpers import ITCH_GROUP, ITCH_PIPELINE, add_order, ascii_int, bits, itch_frame, leaf, rewrite, route, stage

MAX32 = (1 << 32) - 1


def price(state, lo, hi, nxt, prio=1):
    return stage("itch_price", state, "itch_order.price", {"range": [lo, hi]}, nxt, priority=prio)


def ports_for(dp, msg) -> list[int]:
    return [p for p, _ in dp.process(itch_frame([msg]), 0)]


def test_insert_modify_delete_change_forwarding(impl):
    dp = load(ITCH_PIPELINE, {"camus_entries": 2, "table_entries": [leaf("itch_leaf", 0, "fwd", 1)]}, impl=impl)
    assert ports_for(dp, add_order("X", 1)) == [1]
    dp.modify(leaf("itch_leaf", 0, "fwd", 2))
    assert ports_for(dp, add_order("X", 1)) == [2]
    dp.insert(price(0, 100, MAX32, 5))
    dp.insert(leaf("itch_leaf", 5, "mcast", bits(3, 4, 6)))
    dp.set_group(ITCH_GROUP, [(3, 0), (4, 0)])
    assert ports_for(dp, add_order("X", 100)) == [3, 4]
    dp.set_group(ITCH_GROUP, [(6, 0), (7, 0)])  # 7 is in the group, not in the bitmap
    assert ports_for(dp, add_order("X", 100)) == [6]
    dp.modify(leaf("itch_leaf", 5, "mcast", bits(7)))
    assert ports_for(dp, add_order("X", 100)) == [7]
    dp.delete_group(ITCH_GROUP)
    assert ports_for(dp, add_order("X", 100)) == []  # selected nothing, and no IPv4 route
    dp.delete({"table": "itch_price", "priority": 1,
               "match": {"state": {"exact": 0}, "itch_order.price": {"range": [100, MAX32]}}})
    assert ports_for(dp, add_order("X", 100)) == [2]
    assert sorted(e["table"] for e in dp.entries()) == ["itch_leaf", "itch_leaf"]


def test_write_errors_follow_p4runtime(impl):
    dp = new(ITCH_PIPELINE, impl)
    dp.insert(leaf("itch_leaf", 0, "fwd", 1))
    with pytest.raises(EntryError, match="already exists"):
        dp.insert(leaf("itch_leaf", 0, "fwd", 2))
    with pytest.raises(EntryError, match="no such entry"):
        dp.modify(leaf("itch_leaf", 1, "fwd", 2))
    with pytest.raises(EntryError, match="no such entry"):
        dp.delete({"table": "itch_leaf", "match": {"state": {"exact": 1}}})
    with pytest.raises(EntryError, match="no multicast group"):
        dp.delete_group(3)


def test_overlapping_ranges_in_one_state_are_refused(impl):
    dp = new(ITCH_PIPELINE, impl)
    dp.insert(price(0, 10, 20, 1))
    dp.insert(price(1, 15, 25, 1))  # another state: fine
    dp.insert(price(0, 21, 30, 2))
    for lo, hi in [(20, 21), (0, 10), (30, 40), (5, 35), (12, 13)]:
        with pytest.raises(EntryError, match="overlaps"):
            dp.insert(price(0, lo, hi, 3, prio=2))
    dp.delete(price(0, 10, 20, 1))
    dp.insert(price(0, 12, 13, 3, prio=2))


@pytest.mark.parametrize("entry, message", [
    ({"table": "nope", "match": {}, "action": "fwd", "params": {"port": 1}}, "no table"),
    (leaf("itch_leaf", 1 << 32, "fwd", 1), "does not fit"),
    (leaf("itch_leaf", 0, "set_state", 1) | {"params": {"state": 1}}, "not one of"),
    (stage("itch_stock", 0, "itch_order.stock", {"range": [1, 2]}, 1), "expected"),
    (stage("itch_stock", 0, "itch_order.price", {"exact": 1}, 1), "unexpected match key"),
    (price(0, 9, 3, 1), "empty range"),
    ({"table": "itch_leaf", "match": {"state": {"exact": 0}}, "action": "fwd", "params": {"group": 1}},
     "takes exactly"),
    (route(1, 40, 1), "prefix length"),
    ({"table": "egress_udp_rewrite", "match": {"egress_port": {"exact": 1}}, "action": "set_udp_port",
      "params": {"port": 1}}, "missing match key"),
    (rewrite(1, 0, 70000), "does not fit"),
    (leaf("itch_leaf", 0, "mcast", 1 << 512), "does not fit"),  # ports are 0..511
    ({"table": "itch_leaf", "match": {"state": {"exact": 0}}, "action": "mcast", "params": {"group": 1}},
     "takes exactly"),  # the camus_entries 1 shape
])
def test_invalid_entries_are_refused_with_a_reason(impl, entry, message):
    with pytest.raises(EntryError, match=message):
        new(ITCH_PIPELINE, impl).insert(entry)


def test_short_key_names_and_metadata_prefixes_are_accepted(impl):
    dp = new(ITCH_PIPELINE, impl)
    dp.insert(stage("itch_stock", 0, "stock", {"exact": ascii_int("AAPL")}, 1))
    dp.insert({"table": "egress_udp_rewrite", "action": "set_udp_port", "params": {"port": 5},
               "match": {"standard_metadata.egress_port": {"exact": 1},
                         "standard_metadata.egress_rid": {"exact": 0}}})
    dp.insert(leaf("itch_leaf", 1, "fwd", 1))
    (port, copy), = dp.process(itch_frame([add_order("AAPL", 1)]), 0)
    assert port == 1 and copy[14 + 20 + 2: 14 + 20 + 4] == b"\x00\x05"


def test_bad_pipelines_are_refused():
    for change, message in [
        ({"camus_ir": 1}, "camus_ir"),
        ({"ports_width": 513}, "ports_width"),
        ({"state_width": 0}, "state_width"),
        ({"ipv4_table": "itch_leaf"}, "used twice"),
    ]:
        with pytest.raises(PipelineError, match=message):
            new(ITCH_PIPELINE | change, "python")
    app = dict(ITCH_PIPELINE["applications"][0], stages=[
        {"table": "t", "default_table": "d", "field": "itch_order.nope", "match_kind": "exact"}])
    with pytest.raises(PipelineError, match="not a message field"):
        new(ITCH_PIPELINE | {"applications": [app]}, "python")


@pytest.mark.parametrize("gid", [0, 32768, 0xFFFF])
def test_group_ids_outside_what_bmv2_accepts_are_refused(impl, gid):
    """Issue 18: bmv2's P4Runtime server refuses group ids from 32768 on; 0 means no group."""
    with pytest.raises(EntryError, match=r"not in 1\.\.32767"):
        new(ITCH_PIPELINE, impl).set_group(gid, [(1, 0)])
    with pytest.raises(EntryError, match=r"not in 1\.\.32767"):
        load(ITCH_PIPELINE, {"camus_entries": 2, "multicast_groups": [{"id": gid, "replicas": []}]}, impl=impl)
    app = dict(ITCH_PIPELINE["applications"][0], multicast_group=gid)
    with pytest.raises(PipelineError, match="multicast group ids"):
        new(ITCH_PIPELINE | {"applications": [app]}, impl)
