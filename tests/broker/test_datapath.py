"""The data path without sockets: the entries diff, subscription changes, logs, producers."""

from __future__ import annotations

import json

from controller.diff import diff
from shim.log import PartitionLog
from shim.producers import Producers, Verdict
from shim.protocol.records import Record, encode_batch, read_batch_header
from shim.schema import parse_schema
from shim.subscriptions import view_filter

from ..shim.inline import data_path, delivered


def test_diff_orders_writes_and_is_empty_for_equal_documents():
    e1 = {"table": "t", "match": {"state": {"exact": 0}}, "action": "fwd", "params": {"port": 1}}
    e2 = {"table": "t", "match": {"state": {"exact": 1}}, "action": "fwd", "params": {"port": 2}}
    e1b = dict(e1, params={"port": 3})
    old = {"table_entries": [e1, e2], "multicast_groups": [{"id": 5, "replicas": [{"port": 1, "rid": 0}]}]}
    new = {"table_entries": [e1b], "multicast_groups": [{"id": 6, "replicas": [{"port": 2, "rid": 0}]}]}
    assert len(diff(old, old)) == 0
    steps = diff(old, new).steps()
    assert steps == [("delete", e2), ("set_group", (6, ((2, 0),))), ("modify", e1b),
                     ("delete_group", 5)]


def records(values, first=0):
    return [Record(first + i, 1000 + i, None, json.dumps(v).encode()) for i, v in enumerate(values)]


def test_subscription_change_writes_only_the_difference():
    dp = data_path("python")
    schema = parse_schema("price:u32=$.price")
    ports = [dp.allocate_port() for _ in range(3)]
    dp.subscribe(ports[0], 1, None, view_filter(dp.spec, schema, "price > 100"))
    dp.subscribe(ports[1], 1, frozenset([0]))
    full = dp.sync()
    dp.subscribe(ports[2], 2)  # another topic: the existing entries stay
    added = dp.sync()
    assert 0 < added < full + 2
    assert dp.sync() == 0  # nothing changed, nothing written
    out = delivered(dp.send, 1, 0, schema, records([{"price": 50}, {"price": 150}]))
    assert [o for o, _ in out[ports[0]]] == [1]
    assert [o for o, _ in out[ports[1]]] == [0, 1]
    assert ports[2] not in out
    dp.unsubscribe(ports[1])
    dp.sync()
    out = delivered(dp.send, 1, 1, schema, records([{"price": 500}], first=7))
    assert list(out) == [ports[0]] and out[ports[0]][0][1].offset == 7


def test_large_records_are_fragmented_and_reassembled():
    dp = data_path("python")
    port = dp.allocate_port()
    dp.subscribe(port, 3)
    big = Record(0, 5, b"k", b"x" * (1 << 20), (("h", b"v"),))
    out = delivered(dp.send, 3, 0, None, [big])
    assert out[port][0][1] == big
    assert dp.stats.packets_in > 700


def batch(offset, n, ts=1000):
    return encode_batch([Record(offset + i, ts, None, b"v" * 100) for i in range(n)])


def test_log_reads_whole_batches_and_survives_reopen(tmp_path):
    lg = PartitionLog(tmp_path / "p0", segment_bytes=1000)
    for i in range(10):
        b = batch(lg.next_offset, 3)
        lg.append(b, lg.next_offset + 2, 1000)
    assert lg.next_offset == 30 and len(lg.segments) > 2
    first = read_batch_header(lg.read(4, 1))
    assert (first.base_offset, first.last_offset) == (3, 5)  # the batch holding 4, past max_bytes
    with open(lg.segments[-1].path, "ab") as f:
        f.write(b"\x00\x01torn")  # a crash mid-append
    again = PartitionLog(tmp_path / "p0")
    assert (again.start_offset, again.next_offset) == (0, 30)
    assert again.read(0, 1 << 20) == lg.read(0, 1 << 20)


def test_log_retention_by_bytes_and_time(tmp_path):
    lg = PartitionLog(tmp_path / "p", retention_bytes=2000, segment_bytes=500)
    for _ in range(20):
        lg.append(batch(lg.next_offset, 2), lg.next_offset + 1, 1000)
    assert lg.size <= 2000 + 500 and lg.start_offset > 0
    assert read_batch_header(lg.read(lg.start_offset, 1)).base_offset == lg.start_offset
    old = PartitionLog(tmp_path / "q", retention_ms=1000, segment_bytes=10)
    old.append(batch(0, 2, ts=0), 1, 0)
    old.enforce_retention(now_ms=10_000)
    assert (old.start_offset, old.next_offset) == (2, 2)
    assert PartitionLog(tmp_path / "q").next_offset == 2  # the end survives a restart


def test_idempotent_sequences():
    p = Producers()
    pid, epoch = p.init()
    assert p.check(pid, epoch, "t", 0, 17, 3) == (Verdict.APPEND, -1)  # any first sequence
    p.record(pid, epoch, "t", 0, 17, 3, 100)
    assert p.check(pid, epoch, "t", 0, 17, 3) == (Verdict.DUPLICATE, 100)
    assert p.check(pid, epoch, "t", 0, 21, 1)[0] == Verdict.OUT_OF_ORDER
    assert p.check(pid, epoch, "t", 0, 20, 1)[0] == Verdict.APPEND
    assert p.check(pid, epoch - 1, "t", 0, 20, 1)[0] == Verdict.FENCED
    assert p.init(pid, epoch) == (pid, epoch + 1)


def test_offset_for_time_finds_the_first_record_at_or_after():
    lg = PartitionLog()
    lg.append(encode_batch([Record(0, 100, None, b"a"), Record(1, 200, None, b"b"),
                            Record(2, 300, None, b"c")]), 2, 300)
    assert lg.offset_for_time(150) == (1, 200)
    assert lg.offset_for_time(301) is None
    assert lg.max_timestamp() == (2, 300)


def test_every_advertised_api_has_a_handler():
    from shim.handlers import HANDLERS
    from shim.protocol import REGISTRY

    advertised = {api.name for api in REGISTRY}
    assert advertised == set(HANDLERS), (advertised ^ set(HANDLERS))


def test_a_refused_incremental_write_falls_back_to_a_full_reload():
    dp = data_path("python")
    a, b = dp.allocate_port(), dp.allocate_port()
    dp.subscribe(a, 1)
    dp.sync()
    # The switch loses its entries behind the data path's back (out of step with it).
    dp.target.load(dp.pipeline, {"camus_entries": 2, "table_entries": [], "multicast_groups": []})
    dp.subscribe(b, 1, frozenset([0]))
    dp.sync()  # rewriting an entry the switch no longer holds is refused; the reload repairs it
    out = delivered(dp.send, 1, 0, None, [Record(0, 1, None, b"x")])
    assert sorted(out) == [a, b]


def test_file_backed_log_keeps_no_batches_in_memory_and_reads_across_segments(tmp_path):
    lg = PartitionLog(tmp_path / "f", segment_bytes=700)
    mem = PartitionLog(segment_bytes=700)
    for _ in range(12):
        b = batch(lg.next_offset, 2)
        lg.append(b, lg.next_offset + 1, 1000)
        mem.append(b, mem.next_offset + 1, 1000)
    assert all(s.data is None for s in lg.segments) and len(lg.segments) > 3
    for offset in (0, 5, 11, 23):
        for budget in (1, 500, 1 << 20):
            assert lg.read(offset, budget) == mem.read(offset, budget)
    whole = lg.read(0, 1 << 20)
    assert [h.base_offset for h in lg.headers()] == list(range(0, 24, 2))
    assert len(whole) == lg.size
    view = PartitionLog()
    for o in (3, 9, 15):
        view.append(encode_batch([Record(o, 1000, None, b"x")]), o, 1000)
    view.drop_before(10)
    # The view now starts at 10 (its source's start), not at its first batch (15).
    assert view.start_offset == 10 and read_batch_header(view.read(10, 1)).base_offset == 15
