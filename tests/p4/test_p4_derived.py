"""compiler/p4/derived.py: the entries a P4 target needs beyond entries.json, and the reserved group.

The behaviour they produce is checked against the software switch in test_p4_behaviour.py;
here: what they are (computed from entries.json alone, identical per slot, one all-ports
group), what a controller gets from `for_target` for each kind of target, and replicas with
non-zero rids, which the compiler never emits but entries.json allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.compile import compile_files
from compiler.p4.derived import combined, entries, for_target, slots_of
from p4rt.p4info import build_p4info, program_p4info
from compiler.tables import ALL_PORTS_GROUP, stable_ids

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "p4"


def _itch():
    return compile_files(ROOT / "p4/itch/itch.p4", GOLDEN / "itch" / "rules.txt")


def test_membership_entries_are_one_per_group_replica_and_identical_per_slot():
    c = _itch()
    d = entries(c.pipeline, c.entries, slots=3)
    groups = {g["id"]: {(r["port"], r["rid"]) for r in g["replicas"]} for g in c.entries["multicast_groups"]}
    per_slot = {}
    for e in d["table_entries"]:
        key = (e["match"]["group"]["exact"], e["match"]["egress_port"]["exact"], e["match"]["egress_rid"]["exact"])
        assert key[1:] in groups[key[0]] and e["action"] == "member"
        per_slot.setdefault(e["table"], []).append(key)
    assert sorted(per_slot) == ["itch_member_0", "itch_member_1", "itch_member_2"]
    first = per_slot["itch_member_0"]
    assert all(v == first for v in per_slot.values())
    assert len(first) == sum(len(r) for r in groups.values())  # every group of the rules is used


def test_the_all_ports_group_has_every_replica_any_decision_selects():
    c = _itch()
    (group,) = entries(c.pipeline, c.entries)["multicast_groups"]
    assert group["id"] == ALL_PORTS_GROUP
    assert [(r["port"], r["rid"]) for r in group["replicas"]] == [(1, 0), (2, 0), (3, 0), (4, 0)]


def test_single_message_applications_need_nothing():
    c = compile_files(ROOT / "p4/int/int.p4", GOLDEN / "int" / "rules.txt")
    assert entries(c.pipeline, c.entries) == {"camus_entries": 1, "table_entries": [], "multicast_groups": []}


def test_an_entries_document_already_using_the_reserved_group_is_refused():
    c = _itch()
    doc = dict(c.entries, multicast_groups=[{"id": ALL_PORTS_GROUP, "replicas": []}])
    with pytest.raises(ValueError, match="reserved"):
        entries(c.pipeline, doc)


def test_the_compiler_never_assigns_a_reserved_id():
    """A port set whose hash lands on the reserved id (in a 2-bit space: 3) probes past it."""
    import hashlib

    def low2(t: str) -> int:
        return hashlib.blake2b(t.encode(), digest_size=8).digest()[-1] & 3

    text = next(t for t in (f"{i},{i + 1}" for i in range(100)) if low2(t) == 3)
    ids = stable_ids({"g": text}, 2, {"all": 3})
    assert ids == {"all": 3, "g": 1}  # 3 is taken, 0 always is


def test_for_target_reads_the_slot_count_from_the_p4info():
    c = _itch()
    for slots in (1, 5, 8):
        info = program_p4info(c.pipeline, slots)
        assert slots_of(c.pipeline, info) == slots
        assert for_target(c.pipeline, c.entries, info) == combined(c.pipeline, c.entries, slots)
    # The software switch's P4Info has no membership tables: entries.json unchanged.
    assert for_target(c.pipeline, c.entries, build_p4info(c.pipeline, counters=True)) is c.entries


def test_replicas_with_rids_are_kept_per_replica_like_the_software_switch():
    """A group with two replicas on one port (rids 0 and 1) next to a fwd decision: the
    software switch prunes per (port, rid), so do egress and the membership tables."""
    from switch.dataplane import load
    from switch.packet import mold_payload, udp_frame
    from tests.p4.p4_interp import Interpreter
    from tests.p4.test_p4_behaviour import SESSION, add_order

    from compiler.p4 import emit_program

    c = _itch()
    doc = {"camus_entries": 1, "table_entries": [], "multicast_groups": [
        {"id": 77, "replicas": [{"port": 2, "rid": 0}, {"port": 2, "rid": 1}, {"port": 5, "rid": 1}]}]}
    for e in c.entries["table_entries"]:
        e = dict(e)
        if e["action"] == "mcast":  # every group decision now names group 77
            e["params"] = {"group": 77}
        doc["table_entries"].append(e)
    doc["table_entries"].append({"table": "egress_udp_rewrite",
                                 "match": {"egress_port": {"exact": 2}, "egress_rid": {"exact": 1}},
                                 "action": "set_udp_port", "params": {"port": 4321}})
    interp = Interpreter(emit_program(c.pipeline), combined(c.pipeline, doc))
    ref = load(c.pipeline, doc, impl="python")
    blocks = [add_order(b"AAPL", 5000, 1), add_order(b"GOOGL", 1, 1), add_order(b"MSFT", 1, 4000000)]
    frame = udp_frame(mold_payload(SESSION, 3, blocks), dst_port=1234)
    want = ref.process(frame, 0)
    assert [p for p, _ in want] == [1, 2, 2, 5]  # replicas (1,0), (2,0), (2,1), (5,1)
    assert interp.process(frame, 0) == want


def test_group_ids_are_ones_bmv2_accepts():
    """bmv2's P4Runtime server (PI) refuses multicast group ids from 32768 on; every id the
    compiler assigns, and the all-ports group, is in 1..32767, even when 20,000 port sets
    crowd the 15-bit space."""
    assert ALL_PORTS_GROUP == 32767
    c = _itch()
    ids = [g["id"] for g in combined(c.pipeline, c.entries, slots=3)["multicast_groups"]]
    assert ids and all(1 <= i <= 32767 for i in ids) and ALL_PORTS_GROUP in ids
    crowded = stable_ids({n: f"ports {n}" for n in range(20_000)}, 15,
                         {"all ports": ALL_PORTS_GROUP})
    assert len(set(crowded.values())) == 20_001
    assert all(1 <= i <= 32767 for i in crowded.values())
