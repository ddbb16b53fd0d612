"""The P4Info carries the ids and aliases p4c gives the same names, and the emitter refuses
what p4c-bm2-ss would refuse (headers that are not whole bytes, names declared twice).

The reference ids are p4c's own output for programs that are public: `NoAction` (in every
p4c P4Info) and the p4lang tutorials' basic.p4 (`MyIngress.ipv4_lpm`, `MyIngress.ipv4_forward`,
`MyIngress.drop`).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from google.protobuf import text_format

from compiler.compile import compile_files
from compiler.p4 import emit_program
from p4rt.ids import jenkins_one_at_a_time, p4c_id_map, shortest_unique_suffixes
from p4rt.p4info import PREFIX, program_p4info
from p4rt.protos import p4info_pb2, p4runtime_pb2
from pipeline.document import from_json, to_json

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "p4"


def test_ids_are_p4cs_for_public_p4c_outputs():
    assert p4c_id_map(PREFIX.ACTION, ["NoAction"], set()) == {"NoAction": 21257015}
    assert p4c_id_map(PREFIX.TABLE, ["MyIngress.ipv4_lpm"], set()) == {"MyIngress.ipv4_lpm": 37375156}
    assert p4c_id_map(PREFIX.ACTION, ["MyIngress.ipv4_forward", "MyIngress.drop"], set()) == {
        "MyIngress.ipv4_forward": 28792405, "MyIngress.drop": 25652968}


def test_ids_and_aliases_of_a_p4c_test_program():
    """p4c's own testdata/p4_16_samples_outputs/basic_routing-bmv2.p4.p4info.txtpb."""
    tables = {"ingress.bd": 48392551, "ingress.ipv4_fib": 41084491, "ingress.ipv4_fib_lpm": 42875950,
              "ingress.nexthop": 43581057, "ingress.port_mapping": 39645634, "egress.rewrite_mac": 40309161}
    actions = {"NoAction": 21257015, "ingress.set_vrf": 33505590, "ingress.on_miss": 22594144,
               "ingress.fib_hit_nexthop": 26104220, "ingress.set_egress_details": 19738113,
               "ingress.set_bd": 27500220, "egress.on_miss": 28864280, "egress.rewrite_src_dst_mac": 28966416}
    taken: set[int] = set()
    assert p4c_id_map(PREFIX.TABLE, list(tables), taken) == tables
    assert p4c_id_map(PREFIX.ACTION, list(actions), taken) == actions
    aliases = shortest_unique_suffixes(list(tables) + list(actions))
    assert aliases["ingress.on_miss"] == "ingress.on_miss" and aliases["egress.on_miss"] == "egress.on_miss"
    assert aliases["ingress.bd"] == "bd" and aliases["egress.rewrite_src_dst_mac"] == "rewrite_src_dst_mac"


def test_a_collision_takes_the_next_value_in_sorted_order():
    h = jenkins_one_at_a_time("a") & 0xFFFFFF
    taken = {PREFIX.TABLE << 24 | h}
    assert p4c_id_map(PREFIX.TABLE, ["a"], taken) == {"a": PREFIX.TABLE << 24 | (h + 1) & 0xFFFFFF}


def test_aliases_are_shortest_unique_suffixes():
    assert shortest_unique_suffixes(["CamusIngress.fwd", "NoAction", "CamusEgress.t", "CamusIngress.t"]) == {
        "CamusIngress.fwd": "fwd", "NoAction": "NoAction", "CamusEgress.t": "CamusEgress.t",
        "CamusIngress.t": "CamusIngress.t"}


@pytest.mark.parametrize("case", ["itch", "int", "kafka", "all"])
def test_golden_p4info_ids_and_entries(case):
    info = text_format.Parse((GOLDEN / case / "p4info.txtpb").read_text(), p4info_pb2.P4Info())
    for kind, items in ((PREFIX.TABLE, info.tables), (PREFIX.ACTION, info.actions)):
        want = p4c_id_map(kind, [x.preamble.name for x in items], set())
        assert {x.preamble.name: x.preamble.id for x in items} == want
        assert all(x.preamble.alias == x.preamble.name.rsplit(".", 1)[-1] for x in items)
    actions = {a.preamble.id for a in info.actions}
    for t in info.tables:
        assert {r.id for r in t.action_refs} <= actions
        assert [list(r.annotations) for r in t.action_refs if r.scope == p4info_pb2.ActionRef.DEFAULT_ONLY] == \
            [["@defaultonly"]]
    req = text_format.Parse((GOLDEN / case / "entries.txtpb").read_text(), p4runtime_pb2.WriteRequest())
    assert (req.device_id, req.election_id.high, req.election_id.low) == (1, 0, 1)


def _itch_pipeline() -> dict:
    c = compile_files(ROOT / "p4/itch/itch.p4", GOLDEN / "itch" / "rules.txt")
    return to_json(c.pipeline)


def test_a_header_that_is_not_whole_bytes_is_refused():
    p = _itch_pipeline()
    p["applications"][0]["message"]["headers"][0]["fields"][0]["width"] -= 1
    with pytest.raises(ValueError, match="whole number of bytes"):
        emit_program(from_json(p))


def test_an_ir_header_meeting_a_generated_name_is_refused():
    p = _itch_pipeline()
    app = p["applications"][0]
    app["message"]["headers"].append(copy.deepcopy(app["message"]["headers"][0]))
    app["message"]["headers"][-1]["name"] = "itch_len"
    app["message"]["bytes"] *= 2
    with pytest.raises(ValueError, match="declared twice"):
        emit_program(from_json(p))


def test_an_ir_header_named_like_the_programs_structs_is_refused():
    p = _itch_pipeline()
    app = p["applications"][0]
    app["message"]["headers"].append(copy.deepcopy(app["message"]["headers"][0]))
    app["message"]["headers"][-1]["name"] = "metadata"  # its type would be metadata_t
    app["message"]["bytes"] *= 2
    with pytest.raises(ValueError, match="'metadata_t' would be declared twice"):
        emit_program(from_json(p))


@pytest.mark.parametrize("case", ["itch", "all"])
def test_p4info_lists_tables_and_actions_in_p4cs_order(case):
    """p4c: controls in V1Switch order (ingress, egress); in each, tables and actions in
    declaration order, NoAction first (p4c's basic_routing-bmv2 P4Info shows all three)."""
    import re

    program = (GOLDEN / case / "program.p4").read_text()
    info = text_format.Parse((GOLDEN / case / "p4info.txtpb").read_text(), p4info_pb2.P4Info())
    tables, actions = [], ["NoAction"]
    for control in ("CamusIngress", "CamusEgress"):
        body = program[program.index(f"control {control}("):]
        body = body[:body.index("\n}\n")]
        tables += [f"{control}.{t}" for t in re.findall(r"^    table (\w+) \{", body, re.M)]
        actions += [f"{control}.{a}" for a in re.findall(r"^    action (\w+)\(", body, re.M)]
    assert [t.preamble.name for t in info.tables] == tables
    assert [a.preamble.name for a in info.actions] == actions


def test_program_p4info_is_deterministic():
    p = from_json(_itch_pipeline())
    assert program_p4info(p) == program_p4info(p)
