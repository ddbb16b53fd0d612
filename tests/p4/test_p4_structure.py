"""The structural check catches what it claims to, and the emitter's names stay safe.

Each mutation below is a mistake an emitter change could make; the check must name it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from compiler.compile import compile_text
from compiler.p4 import emit_program
from p4rt.names import KEYWORDS, ident
from p4rt.p4info import build_p4info, program_p4info
from pipeline.document import from_json, to_json
from tests.p4.p4_structure import problems

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "p4"
ITCH = (GOLDEN / "itch" / "program.p4").read_text()


def _info(case: str):
    from google.protobuf import text_format

    from p4rt.protos import p4info_pb2

    return text_format.Parse((GOLDEN / case / "p4info.txtpb").read_text(), p4info_pb2.P4Info())


MUTATIONS = {
    "unbalanced": (lambda p: p.replace("apply { }", "apply { ", 1), "unbalanced"),
    "undeclared state": (lambda p: p.replace("transition itch_next_0;", "transition itch_nxt_0;", 1),
                         "undeclared state itch_nxt_0"),
    "second apply": (lambda p: p.replace("itch_leaf.apply();", "itch_leaf.apply(); itch_leaf.apply();"),
                     "applied 2 times"),
    "undeclared action": (lambda p: p.replace("            fwd;\n", "            forward;\n", 1),
                          "action forward is not declared"),
    "unknown metadata": (lambda p: p.replace("meta.itch_keep | ", "meta.itch_kept | "), "meta.itch_kept"),
    "unknown field": (lambda p: p.replace("hdr.itch_order_3.price;", "hdr.itch_order_3.prize;"),
                      "hdr.itch_order_3.prize"),
    "odd header": (lambda p: p.replace("bit<16> message_count;", "bit<15> message_count;"),
                   "not a whole number of bytes"),
    "keyword field": (lambda p: p.replace("bit<32> shares;", "bit<32> table;"), "P4 keyword"),
    "renamed key": (lambda p: p.replace('@name("itch_order.stock")', '@name("stock")'),
                    "differs from P4Info"),
    "missing table": (lambda p: p.replace("table itch_leaf {", "table itch_leaves {"),
                      "P4Info table CamusIngress.itch_leaf is not in the program"),
    "param width": (lambda p: p.replace("action fwd(bit<9> port)", "action fwd(bit<16> port)"),
                    "CamusIngress.fwd: parameters"),
}


def test_golden_itch_program_passes():
    assert problems(ITCH, _info("itch")) == []


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_check_names_the_mistake(name):
    mutate, expected = MUTATIONS[name]
    broken = mutate(ITCH)
    assert broken != ITCH, "the mutation no longer applies to the golden program"
    found = problems(broken, _info("itch"))
    assert any(expected in f for f in found), found


SPEC = """
header weird { bit<8> type; bit<16> key; bit<32> apply; bit<8> udp; }
@pragma udp_port(4000)
@pragma query_field(weird.type)
@pragma query_field_exact(weird.key)
"""


def test_keyword_field_names_are_escaped_but_keep_their_control_plane_names():
    c = compile_text(SPEC, "type > 3 and key == 7 : fwd(1)\n", name="odd")
    program = emit_program(c.pipeline)
    assert "bit<8> type_;" in program and "bit<16> key_;" in program and "bit<8> udp_;" in program
    assert 'hdr.weird.type_ : range @name("weird.type")' in program
    assert problems(program, build_p4info(c.pipeline)) == []


def test_ident():
    assert ident("price") == "price"
    assert all(ident(k) == k + "_" for k in KEYWORDS)
    assert ident("ipv4") == "ipv4_"
    with pytest.raises(ValueError):
        ident("9lives")


def test_two_applications_on_one_header_name_are_refused():
    c = compile_text(SPEC, "key == 7 : fwd(1)\n", name="odd")
    pipeline = to_json(c.pipeline)
    other = copy.deepcopy(pipeline["applications"][0])
    other["name"], other["udp_port"], other["leaf_table"] = "odd2", 4001, "odd2_leaf"
    other["multicast_group"] += 1
    for st in other["stages"]:  # tables of their own: only the header names meet
        st["table"], st["default_table"] = "odd2_" + st["table"], "odd2_" + st["default_table"]
    pipeline["applications"].append(other)
    with pytest.raises(ValueError, match="weird"):
        emit_program(from_json(pipeline))


@pytest.mark.parametrize("slots", [1, 3, 32])
def test_slot_count_shapes_parser_and_pruning(slots):
    from compiler.compile import compile_files

    root = Path(__file__).resolve().parents[2]
    c = compile_files(root / "p4/itch/itch.p4", GOLDEN / "itch" / "rules.txt")
    program = emit_program(c.pipeline, slots)
    assert program.count("packet.extract(hdr.itch_len_") == slots
    assert f"itch_block_{slots}" not in program
    assert program.count("resubmit_preserving_field_list(1);") == 1
    assert program.count("bit<%d> itch_dports_" % c.pipeline.ports_width) == slots  # a bitmap per slot
    assert "itch_member_" not in program  # egress tests bitmaps: no membership tables
    assert problems(program, program_p4info(c.pipeline)) == []


def test_slot_count_is_bounded_by_the_keep_mask():
    from compiler.compile import compile_files

    root = Path(__file__).resolve().parents[2]
    c = compile_files(root / "p4/itch/itch.p4", GOLDEN / "itch" / "rules.txt")
    with pytest.raises(ValueError, match="32"):
        emit_program(c.pipeline, 33)
