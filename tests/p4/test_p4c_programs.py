"""Every kind of program camus generates, against the bmv2 backend's limits and, where it is
installed, against p4c-bm2-ss itself.

p4test (front and mid end) accepts programs that the bmv2 backend refuses: only the target's
backend knows its limits. The one such limit camus met is the shift: bmv2 refuses a shift by
a run-time amount wider than 8 bits (`1 << standard_metadata.egress_spec`) and a constant
shift of 256 or more (`bitmap >> 511`). `test_no_shift_by_a_port_or_past_255` checks every
program for those without p4c; `test_p4c_compiles_without_warnings` runs p4c on the same
programs where it is on PATH (it skips with its reason elsewhere).

The catalogue: the three golden programs and their joined program, the static program of
every spec under p4/ (ITCH, INT, Kafka, hICN, highway: found by name) at 1, 8 and 32
MoldUDP64 slots, lanes programs (MoldUDP64 and
single-message), and fabric programs (one application, and several with plain IP).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from compiler import lowering
from compiler.compile import compile_rules, compile_text
from compiler.p4 import emit_program
from compiler.rules import parse_rules
from compiler.spec import load_spec
from tests.compiler.gen import random_rules, random_spec
from tests.p4.test_p4_behaviour import _random_itch_rules
from tests.p4.test_p4_golden import GOLDEN, ROOT, SPECS, STATE_SPECS

P4C = shutil.which("p4c-bm2-ss")
# Every application spec in the repository (p4/<app>/<app>.p4), so a new one is covered as
# soon as it is added.
ALL_SPECS = {path.parent.name: str(path.relative_to(ROOT)) for path in sorted((ROOT / "p4").glob("*/*.p4"))}
# Framings the P4 program has (the IR's "dns" runs on camus's switch only, and the emitter
# says so: test_a_framing_without_a_p4_program_is_refused_clearly).
P4_FRAMINGS = ("single", "moldudp64")


@cache
def programs() -> dict[str, str]:
    out = {f"golden-{case}": (GOLDEN / case / "program.p4").read_text()
           for case in [*SPECS, "all", *STATE_SPECS]}
    static = {}
    for name, path in ALL_SPECS.items():
        c = compile_rules(load_spec(ROOT / path), [], static=True)
        if c.application.framing not in P4_FRAMINGS:
            continue
        static[name] = c
        for slots in (1, 8, 32):
            if slots != 8 and name != "itch":
                continue  # only MoldUDP64 applications have slots
            out[f"static-{name}-slots{slots}"] = emit_program(static[name].pipeline, slots)
        out[f"fabric-{name}"] = emit_program(static[name].pipeline, fabric=True)
    joined = lowering.pipeline([c.application for c in static.values()],
                               max(c.pipeline.state_width for c in static.values()),
                               max(c.pipeline.ports_width for c in static.values()))
    out["static-all"] = emit_program(joined)
    out["fabric-all"] = emit_program(joined, fabric=True)
    rng = random.Random(7)
    itch = compile_text((ROOT / SPECS["itch"]).read_text(), _random_itch_rules(rng), name="itch", lanes=3)
    assert len(itch.application.all_lanes) > 1
    out["lanes-itch"] = emit_program(itch.pipeline, 4)
    spec, gens = random_spec(rng, 4)
    single = compile_rules(spec, parse_rules(random_rules(rng, gens, 8), spec), lanes=3)
    out["lanes-single"] = emit_program(single.pipeline)
    out.update(_stateful(static))
    return out


def _stateful(stateless: dict) -> dict[str, str]:
    """IR 4: the stateful ITCH specs' static programs at 1, 8 and 32 slots, a single-message
    spec timed by a field in each unit, a fabric variant, and a stateful application joined
    with stateless ones."""
    from compiler.spec import parse_spec
    from tests.p4.diff_cases import SINGLE_STATE_SPEC

    out = {}
    itch = {case: compile_rules(load_spec(ROOT / path), [], static=True) for case, path in STATE_SPECS.items()}
    for case, c in itch.items():
        for slots in (1, 8, 32):
            out[f"static-{case}-slots{slots}"] = emit_program(c.pipeline, slots)
    out["fabric-itch_state"] = emit_program(itch["itch_state"].pipeline, fabric=True)
    for unit in ("ns", "us", "ms"):
        spec = parse_spec(SINGLE_STATE_SPEC + f"@pragma query_timestamp(m.t, {unit})\n", name="st")
        out[f"static-single-state-{unit}"] = emit_program(compile_rules(spec, [], static=True).pipeline)
    spec = parse_spec(SINGLE_STATE_SPEC, name="st")  # the switch's ingress time
    out["static-single-state-ingress-time"] = emit_program(compile_rules(spec, [], static=True).pipeline)
    apps = [itch["itch_state"]] + [stateless[name] for name in ("int", "kafka")]
    joined = lowering.pipeline([c.application for c in apps], max(c.pipeline.state_width for c in apps),
                               max(c.pipeline.ports_width for c in apps))
    out["static-state-joined"] = emit_program(joined)
    return out


SHIFT = re.compile(r"(<<|>>)\s*(\(bit<\d+>\))?\s*([\w.]+|\d+w\d+)")


def _shift_problems(program: str) -> list[str]:
    """Shifts bmv2's backend refuses: an amount that is a port (9 bits), or a constant >= 256.
    The one run-time amount the programs use is the MoldUDP64 slot, a bit<8> local."""
    bad = []
    for n, line in enumerate(program.splitlines(), 1):
        for _, cast, amount in SHIFT.findall(line):
            if amount.isdigit():
                if int(amount) >= 256:
                    bad.append(f"line {n}: {line.strip()}")
            elif not (amount == "slot" and re.search(r"\bbit<8> slot\b", program)) and cast != "(bit<8>)":
                bad.append(f"line {n}: {line.strip()}")
    return bad


@pytest.mark.parametrize("name", sorted(programs()))
def test_no_shift_by_a_port_or_past_255(name):
    assert _shift_problems(programs()[name]) == []


def test_the_shift_check_finds_what_p4c_refused():
    """The three shifts p4c-bm2-ss 1.2.5.16 refused in the programs of b36a41b."""
    old = ["meta.lane_ports = meta.lane_ports | ((bit<512>)1 << standard_metadata.egress_spec);",
           "if (((meta.itch_dports_0 >> standard_metadata.egress_port) & 1) == 1) {",
           "|| ((meta.itch_dports_0 >> 511) & 1) == 1"]
    for line in old:
        assert _shift_problems(line), line


@pytest.mark.skipif(P4C is None, reason="p4c-bm2-ss is not on PATH (not installable here)")
@pytest.mark.parametrize("name", sorted(programs()))
def test_p4c_compiles_without_warnings(name, tmp_path):
    src = tmp_path / "program.p4"
    src.write_text(programs()[name])
    run = subprocess.run([P4C, "--arch", "v1model", "--p4runtime-files", str(tmp_path / "p4info.txtpb"),
                          "-o", str(tmp_path / "program.json"), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"p4c-bm2-ss refuses {name}:\n{run.stderr}"
    assert "warning" not in run.stderr.lower(), f"p4c-bm2-ss warns on {name}:\n{run.stderr}"
    assert Path(tmp_path / "program.json").stat().st_size > 0


def test_a_framing_without_a_p4_program_is_refused_clearly():
    for name, path in ALL_SPECS.items():
        c = compile_rules(load_spec(ROOT / path), [], static=True)
        if c.application.framing not in P4_FRAMINGS:
            with pytest.raises(ValueError, match="has no P4 program"):
                emit_program(c.pipeline)
