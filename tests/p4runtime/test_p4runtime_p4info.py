"""P4Info from the IR follows the naming contract (docs/pipeline-ir.md, "P4 names"), and
values travel as canonical P4Runtime bytestrings."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from p4rt.entries import entry_dict, table_entry
from p4rt.index import P4InfoIndex
from p4rt.p4info import DROP_REASONS as DECLARED_DROP_REASONS
from p4rt.p4info import build_p4info
from p4rt.protos import p4info_pb2
from p4rt.values import BadValue, decode, encode
from pipeline.document import from_json
from p4runtime_helpers import compiled
from switch.dataplane import DROP_REASONS

MF = p4info_pb2.MatchField


def test_names_ids_and_widths_follow_the_contract():
    c = compiled()
    info = build_p4info(c.pipeline)
    tables = {t.preamble.name: t for t in info.tables}
    app = c.application
    for stage in app.stages:
        t = tables[f"CamusIngress.{stage.table}"]
        kind = {"exact": MF.EXACT, "range": MF.RANGE}[stage.match_kind]
        assert [(f.id, f.name, f.bitwidth, f.match_type) for f in t.match_fields] == \
            [(1, "state", c.pipeline.state_width, MF.EXACT), (2, stage.field.name, stage.field.width, kind)]
        d = tables[f"CamusIngress.{stage.default_table}"]
        assert [(f.id, f.name) for f in d.match_fields] == [(1, "state")]
    assert f"CamusIngress.{app.leaf_table}" in tables
    lpm = tables["CamusIngress.ipv4_lpm"]
    assert [(f.id, f.name, f.bitwidth, f.match_type) for f in lpm.match_fields] == [(1, "ipv4.dst_addr", 32, MF.LPM)]
    egress = tables["CamusEgress.egress_udp_rewrite"]
    assert [(f.id, f.name, f.bitwidth) for f in egress.match_fields] == [(1, "egress_port", 9), (2, "egress_rid", 16)]
    actions = {a.preamble.name: [(p.id, p.name, p.bitwidth) for p in a.params] for a in info.actions}
    assert actions["CamusIngress.set_state"] == [(1, "state", c.pipeline.state_width)]
    assert actions["CamusIngress.fwd"] == [(1, "port", 9)]
    assert actions["CamusIngress.mcast"] == [(1, "ports", c.pipeline.ports_width)]  # a port bitmap
    assert actions["CamusIngress.drop"] == []
    assert actions["CamusEgress.set_udp_port"] == [(1, "port", 16)]
    assert all(t.preamble.id >> 24 == p4info_pb2.P4Ids.TABLE for t in info.tables)
    assert all(a.preamble.id >> 24 == p4info_pb2.P4Ids.ACTION for a in info.actions)
    assert len({t.preamble.id for t in info.tables}) == len(info.tables)


def test_ids_are_deterministic_and_text_round_trips():
    c = compiled()
    text = text_format.MessageToString(build_p4info(c.pipeline))
    assert text == text_format.MessageToString(build_p4info(compiled().pipeline))
    assert text_format.Parse(text, p4info_pb2.P4Info()) == build_p4info(c.pipeline)
    # Ids hang on names: a table keeps its id when the pipeline loses other stages.
    ids = {t.preamble.name: t.preamble.id for t in build_p4info(c.pipeline).tables}
    fewer = compiled('stock == "GOOGL" : fwd(1)\n')
    for t in build_p4info(fewer.pipeline).tables:
        assert ids.get(t.preamble.name, t.preamble.id) == t.preamble.id


def test_canonical_bytestrings():
    assert encode(0, 9) == b"\x00"
    assert encode(1, 9) == b"\x01"
    assert encode(256, 9) == b"\x01\x00"
    assert encode((1 << 64) - 1, 64) == b"\xff" * 8
    with pytest.raises(BadValue):
        encode(512, 9)
    assert decode(b"\x00\x00\x05", 9) == 5  # padded strings are accepted
    with pytest.raises(BadValue):
        decode(b"\x02\x00", 9)
    with pytest.raises(BadValue):
        decode(b"", 9)


def test_every_compiled_entry_round_trips_and_dont_cares_are_omitted():
    c = compiled()
    index = P4InfoIndex(build_p4info(c.pipeline))
    for e in c.entries["table_entries"]:
        te = table_entry(index, e)
        back = entry_dict(index, te)
        assert (back["table"], back["action"], back["params"], back.get("priority", 0)) == \
            (e["table"], e["action"], e["params"], e.get("priority", 0))
        assert back["match"] == e["match"]
    full = {"table": "itch_price", "priority": 3, "action": "fwd", "params": {"port": 1},
            "match": {"state": {"exact": 4}, "itch_order.price": {"range": [0, (1 << 32) - 1]}}}
    te = table_entry(index, full)
    assert [m.field_id for m in te.match] == [1]  # the full range is a don't-care: omitted
    assert entry_dict(index, te)["match"] == full["match"]


def test_port_bitmaps_of_every_width_round_trip_as_bytestrings():
    """mcast's parameter is a bitmap as wide as the pipeline's ports_width (512 bits for a
    static pipeline): port 511 is the top bit of a 64-byte bytestring."""
    from compiler.compile import compile_text
    from p4runtime_helpers import ITCH_SPEC

    c = compile_text(ITCH_SPEC, 'stock == "A" : fwd(1, 511)\nprice > 3 : fwd(64, 65)\n', name="itch",
                     static=True)
    index = P4InfoIndex(build_p4info(c.pipeline))
    mcasts = [e for e in c.entries["table_entries"] if e["action"] == "mcast"]
    assert (1 << 511 | 1 << 1) in {e["params"]["ports"] for e in mcasts}
    for e in mcasts:
        te = table_entry(index, e)
        assert len(te.action.action.params[0].value) == (e["params"]["ports"].bit_length() + 7) // 8
        assert entry_dict(index, te)["params"] == e["params"]
    with pytest.raises(BadValue):
        encode(1 << 512, 512)


FLAT = {  # single framing: key (32 bits, lpm), flags (16 bits, ternary)
    "camus_ir": 3, "state_width": 32, "ports_width": 512, "ipv4_table": "ipv4_lpm", "egress_table": "egress_udp_rewrite",
    "applications": [{
        "name": "flat", "udp_port": 5555, "framing": "single",
        "message": {"headers": [{"name": "m", "bit_offset": 0, "bits": 64, "fields": [
            {"name": "key", "bit_offset": 0, "width": 32}, {"name": "flags", "bit_offset": 32, "width": 16}]}],
            "bytes": 8},
        "fields": {"m.key": {"bit_offset": 0, "width": 32}, "m.flags": {"bit_offset": 32, "width": 16}},
        "stages": [{"table": "flat_key", "default_table": "flat_key_default", "field": "m.key", "match_kind": "lpm"},
                   {"table": "flat_flags", "default_table": "flat_flags_default", "field": "m.flags",
                    "match_kind": "ternary"}],
        "leaf_table": "flat_leaf",
        "multicast_group": 1,
    }],
}


def test_lpm_and_ternary_keys_round_trip():
    info = build_p4info(from_json(FLAT))
    kinds = {t.preamble.alias: [f.match_type for f in t.match_fields] for t in info.tables}
    assert kinds["flat_key"] == [MF.EXACT, MF.LPM] and kinds["flat_flags"] == [MF.EXACT, MF.TERNARY]
    index = P4InfoIndex(info)
    lpm = {"table": "flat_key", "action": "set_state", "params": {"state": 3},
           "match": {"state": {"exact": 0}, "m.key": {"lpm": [0x0A000000, 8]}}}
    ternary = {"table": "flat_flags", "priority": 2, "action": "fwd", "params": {"port": 4},
               "match": {"state": {"exact": 3}, "m.flags": {"ternary": [0x0100, 0x0F00]}}}
    for e in (lpm, ternary):
        te = table_entry(index, e)
        assert entry_dict(index, te) == e
    te = table_entry(index, lpm)
    assert (te.match[1].lpm.value, te.match[1].lpm.prefix_len) == (b"\x0a\x00\x00\x00", 8)
    te = table_entry(index, ternary)
    assert (te.match[1].ternary.value, te.match[1].ternary.mask) == (b"\x01\x00", b"\x0f\x00")


def test_counter_extension_names_the_switch_drop_reasons():
    assert DECLARED_DROP_REASONS == DROP_REASONS  # camus.drops is indexed in this order
    info = build_p4info(from_json(FLAT), counters=True)
    names = {c.preamble.name: c.size for c in info.counters}
    assert names["camus.port_rx"] == 512 and names["camus.drops"] == len(DROP_REASONS)
    assert names["camus.table.flat_key"] == 2
    assert all(c.preamble.id >> 24 == p4info_pb2.P4Ids.COUNTER for c in info.counters)


def test_lpm_values_are_sent_masked_to_their_prefix():
    """P4Runtime wants the bits past an LPM prefix zero, and bmv2's PI refuses the entry
    otherwise ("incorrect number of trailing zeros"); entries.json may carry them (a rule
    `f == v/p` with any v: found by tests/p4/test_bmv2_differential.py on bmv2)."""
    index = P4InfoIndex(build_p4info(from_json(FLAT)))
    e = {"table": "flat_key", "action": "set_state", "params": {"state": 3},
         "match": {"state": {"exact": 0}, "m.key": {"lpm": [0x0A0B0C0D, 12]}}}
    te = table_entry(index, e)
    assert (te.match[1].lpm.value, te.match[1].lpm.prefix_len) == (b"\x0a\x00\x00\x00", 12)
    assert entry_dict(index, te)["match"]["m.key"] == {"lpm": [0x0A000000, 12]}
