"""The controller programs the software switch over real gRPC on 127.0.0.1 (ephemeral ports).

Each test starts the P4Runtime server around an in-process `Device`, connects
`controller.P4RuntimeClient` as primary and checks the effect where it matters: packets
through the same device's data plane, compared with `compiler.semantics.evaluate`.
"""

from __future__ import annotations

import time

import grpc
import pytest

from p4rt.entries import entry_dict, group_dict, table_entry
from p4rt.entry_key import entry_key
from p4rt.index import P4InfoIndex
from p4rt.protos import code_pb2, p4runtime_pb2
from controller.p4runtime_client import ArbitrationError, P4RuntimeClient, WriteError
from controller.push import TargetConfig, push
from p4runtime_helpers import RULES, add_order, compiled, expected_split, frame, messages, received_split, write_dir
from switch.device import Device
from switch.p4runtime_server import serve
from switch.packet import read_udp

Update = p4runtime_pb2.Update


@pytest.fixture
def switch():
    device = Device("native")
    server, port = serve(device, "127.0.0.1:0", max_workers=8)
    yield device, f"127.0.0.1:{port}"
    server.stop(0).wait(5)


def connect(target: str, election_id: int = 10) -> P4RuntimeClient:
    return P4RuntimeClient.primary(target, election_id=election_id, timeout=5)


def push_dir(client, tmp_path, c, name="cfg"):
    d = write_dir(c, tmp_path / name)
    return push(client, TargetConfig.software_switch(d), c.entries, batch=7)


def canonical(index: P4InfoIndex, entries: list[dict]) -> dict:
    out = {}
    for e in entries:
        d = entry_dict(index, table_entry(index, e))
        out[entry_key(d)] = (d.get("action"), d.get("params"))
    return out


@pytest.mark.parametrize("impl", ["native", "python"])
def test_push_then_packets_follow_the_rules(impl, tmp_path):
    device = Device(impl)
    server, port = serve(device, "127.0.0.1:0", max_workers=8)
    try:
        c = compiled()
        with connect(f"127.0.0.1:{port}") as client:
            report = push_dir(client, tmp_path, c)
        assert report.pipeline_set
        assert report.inserted == len(c.entries["table_entries"])
        assert report.groups["inserted"] == len(c.entries["multicast_groups"])
        for seed in range(20):
            batch = messages(seed, 1 + seed % 12)
            assert received_split(device.process(frame(batch), 0)) == expected_split(c, batch)
    finally:
        server.stop(0).wait(5)


def test_changed_rules_write_only_the_difference(switch, tmp_path):
    device, target = switch
    old = compiled()
    new = compiled(old_rules_changed())
    with connect(target) as client:
        push_dir(client, tmp_path, old, "old")
        report = push_dir(client, tmp_path, new, "new")
        index = device.index
        before, after = canonical(index, old.entries["table_entries"]), canonical(index, new.entries["table_entries"])
        assert not report.pipeline_set
        assert report.inserted == len(after.keys() - before.keys())
        assert report.deleted == len(before.keys() - after.keys())
        assert report.modified == sum(1 for k in after.keys() & before.keys() if after[k] != before[k])
        # Less than a reload (delete everything, insert everything): entries that did not
        # change are not touched. How many change is the compiler's business.
        assert 0 < report.updates < len(before) + len(after)
        assert canonical(index, device.dataplane.entries()) == after
        again = push_dir(client, tmp_path, new, "new")
        assert again.updates == 0
    for seed in range(20):
        batch = messages(100 + seed, 10)
        assert received_split(device.process(frame(batch), 0)) == expected_split(new, batch)


def old_rules_changed() -> str:
    return RULES.replace('stock == "MSFT" and price > 3000000 : fwd(2)', 'stock == "MSFT" and price > 2000000 : fwd(2)')


def test_read_returns_what_was_written(switch, tmp_path):
    device, target = switch
    c = compiled()
    with connect(target) as client:
        push_dir(client, tmp_path, c)
        index = P4InfoIndex(client.get_pipeline("P4INFO_AND_COOKIE").p4info)
        read = [entry_dict(index, e.table_entry)
                for e in client.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())])]
        assert canonical(index, read) == canonical(index, c.entries["table_entries"])

        one = table_entry(index, c.entries["table_entries"][3])
        got = list(client.read([p4runtime_pb2.Entity(table_entry=one)]))
        assert [g.table_entry for g in got] == [one]
        table_only = p4runtime_pb2.TableEntry(table_id=one.table_id)
        per_table = list(client.read([p4runtime_pb2.Entity(table_entry=table_only)]))
        assert len(per_table) == sum(1 for e in c.entries["table_entries"] if e["table"] == c.entries["table_entries"][3]["table"])

        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = 0
        groups = [group_dict(e.packet_replication_engine_entry)
                  for e in client.read([p4runtime_pb2.Entity(packet_replication_engine_entry=pre)])]
        assert sorted(groups, key=lambda g: g["id"]) == sorted(c.entries["multicast_groups"], key=lambda g: g["id"])

        config = client.get_pipeline("ALL")
        assert config.p4_device_config == (tmp_path / "cfg" / "pipeline.json").read_bytes()


def test_counters_per_port_and_table(switch, tmp_path):
    device, target = switch
    c = compiled()
    with connect(target) as client:
        push_dir(client, tmp_path, c)
        batch = messages(7, 10)
        copies = device.process(frame(batch), 9)
        index = P4InfoIndex(client.get_pipeline("P4INFO_AND_COOKIE").p4info)
        counts = {}
        for e in client.read([p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry())]):
            name = next(n for n, info in index.counters.items() if info.preamble.id == e.counter_entry.counter_id)
            counts[(name, e.counter_entry.index.index)] = e.counter_entry.data.packet_count
    assert counts[("camus.port_rx", 9)] == 1
    for port, _ in copies:
        assert counts[("camus.port_tx", port)] >= 1
    lookups = counts.get(("camus.table.itch_buy_sell_indicator", 0), 0) + \
        counts.get(("camus.table.itch_buy_sell_indicator", 1), 0)
    assert lookups == len(batch)  # the first stage sees every message once


def write_error(client, updates) -> list[tuple[int, str]]:
    with pytest.raises(WriteError) as exc:
        client.write(updates)
    return [(e.index, e.code_name) for e in exc.value.errors]


def test_write_errors_come_back_per_update(switch, tmp_path):
    device, target = switch
    c = compiled()
    with connect(target) as client:
        push_dir(client, tmp_path, c)
        index = device.index
        base = next(e for e in c.entries["table_entries"] if e["table"].endswith("_default"))  # state key only
        existing = table_entry(index, base)
        missing = table_entry(index, {**base, "match": {"state": {"exact": 77}}})
        insert = Update(type=Update.INSERT, entity=p4runtime_pb2.Entity(table_entry=missing))
        dup = Update(type=Update.INSERT, entity=p4runtime_pb2.Entity(table_entry=existing))
        gone = Update(type=Update.DELETE, entity=p4runtime_pb2.Entity(table_entry=missing))
        # One batch: OK, ALREADY_EXISTS, OK (delete of the entry just inserted), NOT_FOUND.
        assert write_error(client, [insert, dup, gone, gone]) == [(1, "ALREADY_EXISTS"), (3, "NOT_FOUND")]
        assert entry_key(entry_dict(index, missing)) not in {entry_key(e) for e in device.dataplane.entries()}

        bad_table = p4runtime_pb2.TableEntry()
        bad_table.CopyFrom(existing)
        bad_table.table_id = 0x02FFFFFF
        too_wide = p4runtime_pb2.TableEntry()
        too_wide.CopyFrom(missing)
        too_wide.match[0].exact.value = b"\x01" + b"\x00" * 4  # 33 bits in the 32-bit state
        bad_action = p4runtime_pb2.TableEntry()
        bad_action.CopyFrom(missing)
        bad_action.action.action.action_id = 0x01ABCDEF
        updates = [Update(type=Update.INSERT, entity=p4runtime_pb2.Entity(table_entry=t))
                   for t in (bad_table, too_wide, bad_action)]
        assert write_error(client, updates) == [(0, "INVALID_ARGUMENT"), (1, "OUT_OF_RANGE"), (2, "INVALID_ARGUMENT")]

        ranged = next(e for e in c.entries["table_entries"] if "priority" in e)
        no_priority = table_entry(index, {**ranged, "priority": 0})
        needless = table_entry(index, {**base, "match": {"state": {"exact": 78}}, "priority": 5})
        overlap = table_entry(index, {**ranged, "priority": ranged["priority"] + 1000})
        assert write_error(client, [Update(type=Update.INSERT, entity=p4runtime_pb2.Entity(table_entry=t))
                                    for t in (no_priority, needless, overlap)]) == \
            [(0, "INVALID_ARGUMENT"), (1, "INVALID_ARGUMENT"), (2, "INVALID_ARGUMENT")]

        group = p4runtime_pb2.PacketReplicationEngineEntry()
        group.multicast_group_entry.multicast_group_id = c.entries["multicast_groups"][0]["id"]
        nogroup = p4runtime_pb2.PacketReplicationEngineEntry()
        nogroup.multicast_group_entry.multicast_group_id = 4
        assert write_error(client, [
            Update(type=Update.INSERT, entity=p4runtime_pb2.Entity(packet_replication_engine_entry=group)),
            Update(type=Update.MODIFY, entity=p4runtime_pb2.Entity(packet_replication_engine_entry=nogroup)),
        ]) == [(0, "ALREADY_EXISTS"), (1, "NOT_FOUND")]


def test_arbitration_and_non_primary_writes(switch, tmp_path):
    device, target = switch
    c = compiled()
    first = connect(target, election_id=10)
    try:
        push_dir(first, tmp_path, c)
        with pytest.raises(ArbitrationError):
            connect(target, election_id=5)  # a backup: told ALREADY_EXISTS, not primary
        with pytest.raises(ArbitrationError):
            connect(target, election_id=10)  # the same election id twice: INVALID_ARGUMENT
        base = next(e for e in c.entries["table_entries"] if e["table"].endswith("_default"))
        entry = table_entry(device.index, {**base, "match": {"state": {"exact": 99}}})
        update = Update(type=Update.INSERT, entity=p4runtime_pb2.Entity(table_entry=entry))
        second = connect(target, election_id=20)
        assert write_error(first, [update]) == [(0, "PERMISSION_DENIED")]
        second.write([update])
        second.close()
        # The primary left; the first client is primary again once the server notices.
        deadline = time.monotonic() + 5
        while True:
            try:
                first.write([Update(type=Update.DELETE, entity=p4runtime_pb2.Entity(table_entry=entry))])
                break
            except WriteError as exc:
                assert exc.errors[0].code == code_pb2.PERMISSION_DENIED
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        first.close()


def test_wrong_device_and_missing_pipeline(switch):
    device, target = switch
    client = P4RuntimeClient(target, device_id=3, timeout=5)
    try:
        with pytest.raises(ArbitrationError):
            client.arbitrate()
    finally:
        client.close()
    with connect(target) as client:
        with pytest.raises(grpc.RpcError) as exc:
            client.get_pipeline()
        assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert client.capabilities()


def test_ipv4_routes_and_egress_rewrites_travel_by_name(switch, tmp_path):
    device, target = switch
    c = compiled()
    entries = dict(c.entries)
    entries["table_entries"] = c.entries["table_entries"] + [
        {"table": "ipv4_lpm", "match": {"hdr.ipv4.dst_addr": {"lpm": [0xE8000000, 8]}},
         "action": "fwd", "params": {"port": 7}},
        {"table": "egress_udp_rewrite", "match": {"egress_port": {"exact": 1}, "egress_rid": {"exact": 0}},
         "action": "set_udp_port", "params": {"port": 4321}},
    ]
    d = write_dir(c, tmp_path / "cfg")
    with connect(target) as client:
        report = push(client, TargetConfig.software_switch(d), entries)
        assert report.inserted == len(entries["table_entries"])
        assert push(client, TargetConfig.software_switch(d), entries).updates == 0  # read back equal

    unselected = frame([add_order("IBM", 1_000_000, 10)])
    assert device.process(unselected, 0) == [(7, unselected)]
    copies = device.process(frame([add_order("GOOGL", 1_000_000, 10)]), 0)
    assert [(p, read_udp(f).dst_port) for p, f in copies] == [(1, 4321)]
