"""One program, one set of ids: the software switch's P4Info and the emitted program's (p4c's)
number every table, action, match field and parameter they share alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.compile import compile_files
from compiler.p4.__main__ import build
from p4rt.p4info import build_p4info, program_p4info

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "p4"
SPECS = {"itch": "p4/itch/itch.p4", "int": "p4/int/int.p4", "kafka": "p4/kafka/kafka.p4"}


def _pipeline(case: str) -> dict:
    if case == "all":
        return build([[str(ROOT / SPECS[c]), str(GOLDEN / c / "rules.txt")] for c in sorted(SPECS)])[0]
    return compile_files(ROOT / SPECS[case], GOLDEN / case / "rules.txt").pipeline


def _numbered(info) -> tuple[dict, dict]:
    tables = {t.preamble.name: (t.preamble.id, [(f.id, f.name, f.bitwidth, f.match_type) for f in t.match_fields],
                                sorted(r.id for r in t.action_refs)) for t in info.tables}
    actions = {a.preamble.name: (a.preamble.id, [(p.id, p.name, p.bitwidth) for p in a.params]) for a in info.actions}
    return tables, actions


@pytest.mark.parametrize("case", sorted(SPECS) + ["all"])
def test_the_switch_and_the_program_give_shared_entities_one_id(case):
    pipeline = _pipeline(case)
    switch_tables, switch_actions = _numbered(build_p4info(pipeline, counters=True))
    program_tables, program_actions = _numbered(program_p4info(pipeline))
    assert switch_tables == {name: program_tables[name] for name in switch_tables}
    assert switch_actions == {name: program_actions[name] for name in switch_actions}
    # What the switch lacks is the program's membership tables and their action, nothing else.
    assert {n for n in program_tables if n not in switch_tables} == \
        {n for n in program_tables if n.startswith("CamusEgress.") and "_member_" in n}
    assert set(program_actions) - set(switch_actions) <= {"CamusEgress.member"}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_the_fabric_program_adds_only_its_own_tables_and_keeps_the_switchs_ids(case):
    """The fabric variant (compiler/p4/fabric.py, for bmv2 in a network): the software switch
    takes the same decisions with `--fabric` and has no fabric tables; every entity both
    have keeps its id."""
    from compiler.compile import compile_rules
    from compiler.spec import load_spec

    pipeline = compile_rules(load_spec(ROOT / SPECS[case]), [], static=True).pipeline
    switch_tables, switch_actions = _numbered(build_p4info(pipeline, counters=True))
    program_tables, program_actions = _numbered(program_p4info(pipeline, fabric=True))
    assert switch_tables == {name: program_tables[name] for name in switch_tables}
    assert switch_actions == {name: program_actions[name] for name in switch_actions}
    assert set(program_tables) - set(switch_tables) == {"CamusIngress.fabric_port", "CamusIngress.fabric_up_member"}
    assert set(program_actions) - set(switch_actions) == {"CamusIngress.fabric_port_config",
                                                          "CamusIngress.set_up_port"}
    plain_tables, plain_actions = _numbered(program_p4info(pipeline))  # the plain program's ids stay
    assert plain_tables == {name: program_tables[name] for name in plain_tables}
    assert plain_actions == {name: program_actions[name] for name in plain_actions}
