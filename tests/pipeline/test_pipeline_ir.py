"""The typed pipeline IR: pipeline.json round trips, validation names the first problem, and
the match-kind registry agrees with P4Info, P4Runtime and the native switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.compile import compile_files
from pipeline import document, interpreter
from pipeline.entries import parse_entry
from pipeline.match_kinds import MATCH_KINDS, prefixes
from pipeline.model import EntryError, PipelineError

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SPECS = {"itch": "p4/itch/itch.p4", "int": "p4/int/int.p4", "kafka": "p4/kafka/kafka.p4"}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_compiled_pipelines_round_trip_byte_for_byte(case):
    c = compile_files(ROOT / SPECS[case], GOLDEN / "p4" / case / "rules.txt")
    text = document.dumps(c.pipeline)
    again = document.from_json(json.loads(text))
    assert again == c.pipeline and document.dumps(again) == text


def test_the_golden_pipeline_round_trips():
    text = (GOLDEN / "compiler" / "figure5" / "pipeline.json").read_text()
    assert document.dumps(document.from_json(json.loads(text))) == text


def test_validation_names_the_first_problem():
    doc = json.loads((GOLDEN / "compiler" / "figure5" / "pipeline.json").read_text())
    doc["applications"][0]["stages"][0]["match_kind"] = "fuzzy"
    with pytest.raises(PipelineError, match=r"stages\[0\]: match_kind 'fuzzy' is not one of"):
        document.from_json(doc)


def test_action_widths_are_the_p4_programs():
    c = compile_files(ROOT / SPECS["itch"], GOLDEN / "p4" / "itch" / "rules.txt")
    widths = {a.name: [p.width for p in a.params] for a in c.pipeline.actions.values()}
    # The state and the port bitmap are as wide as these rules need: few states, ports 1..4.
    assert widths == {"set_state": [16], "fwd": [9], "mcast": [5], "drop": [], "set_udp_port": [16]}
    static = compile_files(ROOT / SPECS["itch"], GOLDEN / "p4" / "itch" / "rules.txt", static=True)
    assert static.pipeline.actions["mcast"].params[0].width == 512  # a bit for every port
    assert static.pipeline.state_width == 32
    leaf = c.application.leaf_table
    with pytest.raises(EntryError, match="does not fit in 9 bits"):
        parse_entry(c.pipeline, {"table": leaf, "match": {"state": {"exact": 0}}, "action": "fwd",
                                 "params": {"port": 512}})


def test_the_registry_names_real_p4info_and_p4runtime_fields():
    from p4rt.protos import p4info_pb2, p4runtime_pb2

    oneof = p4runtime_pb2.FieldMatch.DESCRIPTOR.oneofs_by_name["field_match_type"]
    members = {f.name: f.message_type for f in oneof.fields}
    for kind in MATCH_KINDS.values():
        assert p4info_pb2.MatchField.MatchType.Value(kind.p4info_match_type)
        fields = [f.name for f in members[kind.p4runtime_field].fields]
        assert list(kind.p4runtime_components) == fields


def test_every_registered_kind_loads_into_both_switches():
    from switch.dataplane import IMPLEMENTATIONS, new

    doc = json.loads((GOLDEN / "compiler" / "figure5" / "pipeline.json").read_text())
    stage = doc["applications"][0]["stages"][0]
    doc["applications"][0]["stages"] = [dict(stage, table=f"t_{k}", default_table=f"t_{k}_default", match_kind=k)
                                        for k in MATCH_KINDS]
    for impl in IMPLEMENTATIONS:
        dp = new(doc, impl)
        assert {dp.pipeline.tables[f"t_{k}"].match_kind for k in MATCH_KINDS} == set(MATCH_KINDS)


@pytest.mark.parametrize("lo, hi, width", [(0, 255, 8), (3, 200, 8), (5, 5, 16), (1, (1 << 32) - 2, 32)])
def test_lpm_cover_tiles_the_interval(lo, hi, width):
    covered = []
    for value, plen in prefixes(lo, hi, width):
        size = 1 << (width - plen)
        assert value % size == 0
        covered.append((value, value + size - 1))
    assert covered[0][0] == lo and covered[-1][1] == hi
    assert all(a[1] + 1 == b[0] for a, b in zip(covered, covered[1:]))


def test_the_interpreter_runs_compiled_entries():
    c = compile_files(ROOT / SPECS["itch"], GOLDEN / "p4" / "itch" / "rules.txt")
    tables = interpreter.load(c.pipeline, c.entries)
    stock = c.application.fields["itch_order.stock"]
    values = {q: 0 for q in c.application.fields}
    values["itch_order.stock"] = int.from_bytes(b"GOOGL".ljust(stock.width // 8), "big")
    assert tables.ports(c.application, values) == c.tables().ports(c.application, values)
