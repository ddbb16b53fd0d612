"""`python -m compiler.p4`: several specs in one program, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.compile import compile_text
from compiler.p4 import emit_program
from compiler.p4.__main__ import main, merge_entries
from p4rt.p4info import build_p4info
from tests.p4.p4_structure import problems

ROOT = Path(__file__).resolve().parents[2]


def test_two_applications_on_one_udp_port_are_refused(tmp_path, capsys):
    spec = ROOT / "p4/int/int.p4"
    assert main(["--app", str(spec), "--app", str(spec), "--out", str(tmp_path)]) == 2
    assert "share a UDP port" in capsys.readouterr().err


def test_an_application_without_rules_still_gets_its_tables(tmp_path):
    assert main(["--app", str(ROOT / "p4/kafka/kafka.p4"), "--out", str(tmp_path)]) == 0
    program = (tmp_path / "program.p4").read_text()
    assert "table kafka_leaf" in program and "16w9094: parse_kafka;" in program
    assert "table_entry" not in (tmp_path / "entries.txtpb").read_text()


def test_one_group_id_for_two_port_sets_is_refused():
    a = {"table_entries": [], "multicast_groups": [{"id": 5, "replicas": [{"port": 1, "rid": 0}]}]}
    b = {"table_entries": [], "multicast_groups": [{"id": 5, "replicas": [{"port": 2, "rid": 0}]}]}
    assert merge_entries([a, a])["multicast_groups"] == a["multicast_groups"]
    with pytest.raises(ValueError, match="multicast group 5"):
        merge_entries([a, b])


def test_single_framing_with_a_type_field_checks_the_type_before_extracting():
    spec = """
    header ev { bit<8> kind; bit<32> value; }
    @pragma udp_port(4100)
    @pragma message_type(ev.kind, 1, 7)
    @pragma query_field(ev.value)
    """
    c = compile_text(spec, "value > 10 : fwd(2)\n", name="ev")
    program = emit_program(c.pipeline)
    start = program.index("state parse_ev {")
    state = program[start: program.index("}\n", program.index("}", start) + 1)]
    assert "packet.lookahead<bit<8>>()" in state
    assert "8w0x1: parse_ev_message;" in state and "8w0x7: parse_ev_message;" in state
    assert problems(program, build_p4info(c.pipeline)) == []
