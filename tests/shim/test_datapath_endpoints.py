"""Log endpoints (views) get records; count-only endpoints (group members) get counted."""

from __future__ import annotations

import json

import pytest

from shim.protocol.records import Record
from shim.schema import parse_schema
from shim.subscriptions import view_filter

from .inline import data_path, delivered


@pytest.mark.parametrize("impl", ["python", "native"])
def test_member_ports_are_counted_not_decoded(impl):
    dp = data_path(impl)
    schema = parse_schema("price:u32=$.price")
    view, member = dp.allocate_port(), dp.allocate_port()
    dp.subscribe(view, 1, None, view_filter(dp.spec, schema, "price > 100"))
    dp.subscribe(member, 1, frozenset([0]), log=False)
    recs = [Record(i, 1, None, json.dumps({"price": p}).encode())
            for i, p in enumerate([50, 150, 250, 20])]
    out = delivered(dp.send, 1, 0, schema, recs)
    assert list(out) == [view]
    assert [o for o, _ in out[view]] == [1, 2]
    assert out[view][0][1].value == recs[1].value
    assert dp.stats.packets_out == {view: 2, member: 4}
    out = delivered(dp.send, 1, 1, schema, recs)  # the view takes every partition
    assert list(out) == [view] and [o for o, _ in out[view]] == [1, 2]
    assert dp.stats.packets_out[member] == 4  # partition 1 is not the member's
    dp.unsubscribe(member)
    assert member not in dp.stats.packets_out
