"""The P4 program carries lanes: a table chain per lane, each from state 0, the lanes' decisions
OR-ed into a port bitmap in metadata and multicast through the application's group. Checked
by the P4_16 grammar, the structure checker against the P4Info derived from the IR, and the
interpreter against the software switch (switch/reference.py) on random rules and frames."""

from __future__ import annotations

import random

import pytest

from compiler.compile import compile_rules, compile_text
from compiler.p4 import emit_program, entries_text
from compiler.rules import parse_rules
from p4rt.p4info import program_p4info
from tests.compiler.gen import random_rules, random_spec
from tests.p4.p4_grammar import parse
from tests.p4.p4_structure import problems
from tests.p4.test_p4_behaviour import (
    ROOT,
    SPECS,
    _random_itch_rules,
    _random_packets,
    _targets,
    random_messages_match,
)


def _itch(seed: int, lanes: int):
    rng = random.Random(300 + seed)
    text = _random_itch_rules(rng)
    return rng, compile_text((ROOT / SPECS["itch"]).read_text(), text, name="itch", lanes=lanes)


@pytest.mark.parametrize("seed", range(8))
def test_itch_lanes_match_the_software_switch(seed):
    """MoldUDP64: one message per pass, each walking every lane; copies pruned per replica."""
    rng, c = _itch(seed, rng_lanes := 2 + seed % 3)
    assert len(c.application.all_lanes) > 1 or rng_lanes < 2
    slots = rng.choice([3, 8])
    interp, ref = _targets(c.pipeline, c.entries, slots)
    _random_packets(c, interp, ref, rng, 40, slots)


@pytest.mark.parametrize("seed", range(12))
def test_random_specs_in_lanes_match_the_software_switch(seed):
    """Single-message applications, every match kind, fwd in one lane and mcast in another."""
    rng = random.Random(seed)
    spec, gens = random_spec(rng, rng.randint(2, 4))
    c = compile_rules(spec, parse_rules(random_rules(rng, gens, rng.randint(2, 8)), spec),
                      lanes=rng.randint(2, 5))
    assert len(c.application.all_lanes) > 1 or len(c.stats.get("lanes", [])) < 2
    random_messages_match(c, rng, gens)


def test_lanes_program_parses_and_agrees_with_its_p4info():
    _, c = _itch(1, 3)
    lanes = c.application.all_lanes
    assert len(lanes) > 1
    for slots in (1, 4):
        program = emit_program(c.pipeline, slots)
        parse(program)
        assert problems(program, program_p4info(c.pipeline)) == []
        for lane in lanes:
            assert program.count(f"{lane.leaf_table}.apply();") == 1
        assert "meta.lane_ports" in program
    # P4Runtime entries: every entry, those of later lanes under their own tables' ids.
    text = entries_text(c.pipeline, c.entries)
    assert text.count("table_entry {") == len(c.entries["table_entries"])
    ids = {t.preamble.name: t.preamble.id for t in program_p4info(c.pipeline).tables}
    later = {t for lane in lanes[1:] for s in lane.stages for t in (s.table, s.default_table)}
    used = {e["table"] for e in c.entries["table_entries"]} & later
    assert used
    for t in used:
        assert f"table_id: {ids['CamusIngress.' + t]}" in text


def test_one_lane_programs_have_no_lane_metadata():
    c = compile_text((ROOT / SPECS["itch"]).read_text(), 'stock == "GOOGL" : fwd(1)\n', name="itch")
    assert "lane_ports" not in emit_program(c.pipeline)
