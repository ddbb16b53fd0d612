"""The data path on a target that reports later: the same deliveries as inline, in order.

`HeldBack` keeps the embedded switch's reports until `flush()`, with or without each copy's
input frame index (a remote target knows only what its ports emitted); everything the data
path hands to `then` must equal what it hands over with the switch reporting inline."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from shim.datapath import DataPath
from shim.protocol.records import Record, decode_batches, encode_batch
from shim.schema import parse_schema
from shim.subscriptions import view_filter

from .later import HeldBack
from .test_reframe_native import json_records


def through(dp: DataPath, batches, flush_every: int):
    """Every (partition, shift, records) through `dp` with a view and a member (as a batch
    framed from its body, and as records replayed into the view only): what `then` got, in
    the order it got it, and the stats."""
    schema = parse_schema("sel:u8=$.sel,h:u16=header:h")
    view, member = dp.allocate_port(), dp.allocate_port()
    dp.subscribe(view, 1, None, view_filter(dp.spec, schema, "sel == 7"))
    dp.subscribe(member, 1, frozenset([0]), view_filter(dp.spec, schema, "h > 2"), log=False)
    got = []
    for k, (p, shift, recs) in enumerate(batches):
        [b] = decode_batches(encode_batch(recs), records=False)
        dp.send_batch(1, p, schema, b, then=got.append, shift=shift)
        dp.send(1, p, schema, recs, then=got.append, only=view)
        dp.after(lambda k=k: got.append(k))
        if isinstance(dp.target, HeldBack) and k % flush_every == 0:
            dp.target.flush()
    if isinstance(dp.target, HeldBack):
        dp.target.flush()
    return got, dp.stats


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1000), json_records.filter(bool)),
                max_size=5),
       st.integers(1, 3), st.booleans())
def test_reports_made_later_deliver_what_inline_reports_deliver(batches, flush_every, indexed):
    from .inline import data_path

    inline = through(data_path("native"), batches, flush_every)
    assert through(DataPath(HeldBack("native", indexed)), batches, flush_every) == inline


def test_after_waits_for_what_is_under_way():
    dp = DataPath(HeldBack())
    view = dp.allocate_port()
    dp.subscribe(view, 1)
    events = []
    dp.send(1, 0, None, [Record(5, 1, None, b"x")], then=lambda out: events.append(out))
    dp.after(lambda: events.append("after"))
    assert events == []
    dp.target.flush()
    assert [o for o, _ in events[0][view]] == [5] and events[1:] == ["after"]
    dp.after(lambda: events.append("now"))  # nothing under way
    assert events[-1] == "now"


def test_a_released_port_is_reused_only_once_its_copies_are_reported():
    dp = DataPath(HeldBack())
    old = dp.allocate_port()
    dp.subscribe(old, 1)
    got = []
    dp.send(1, 0, None, [Record(0, 1, None, json.dumps({"n": 1}).encode())], then=got.append)
    dp.unsubscribe(old)
    new = dp.allocate_port()
    assert new != old  # copies for the old endpoint are still under way
    dp.target.flush()
    assert list(got[0]) == [old]  # judged by the endpoints of its time
    assert dp.allocate_port() not in (old, new)  # the target's entries still send to it
    dp.sync()
    assert dp.allocate_port() == old


def test_a_copy_without_its_input_frame_is_reassembled():
    dp = DataPath(HeldBack(indexed=False))
    view = dp.allocate_port()
    dp.subscribe(view, 3)
    big = Record(0, 5, b"k", b"x" * 100_000, (("h", b"v"),))  # 72 fragments
    got = []
    dp.send(3, 0, None, [big], then=got.append)
    dp.target.flush()
    assert got == [{view: [(0, big)]}] and dp.stats.deliveries == 1
