"""Lanes (issue 16 item 5): rules split into groups compiled into separate diagrams whose port
bitmaps are OR-ed select exactly what `compiler.semantics` says, on random multi-field rule
sets, whatever the number of lanes; `auto` takes lanes only where they are much smaller."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules, compile_text
from compiler.errors import CamusError
from compiler.lanes import parse_lanes
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from pipeline import document, interpreter
from pipeline.model import PipelineError

from .gen import random_message, random_rules, random_spec

ROOT = Path(__file__).resolve().parents[2]


def check(seed: int, n_rules: int, lanes, n_messages: int = 200) -> int:
    rng = random.Random(seed)
    spec, gens = random_spec(rng, rng.randint(2, 4))
    rules = parse_rules(random_rules(rng, gens, n_rules), spec)
    c = compile_rules(spec, rules, lanes=lanes)
    # What targets load: the written documents, read back.
    pipeline = document.from_json(json.loads(document.dumps(c.pipeline)))
    tables = interpreter.load(pipeline, json.loads(json.dumps(c.entries)))
    app = pipeline.applications[0]
    for _ in range(n_messages):
        msg = random_message(rng, gens)
        assert tables.ports(app, msg) == evaluate(rules, msg), (seed, msg)
    return len(app.all_lanes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 14),
       lanes=st.sampled_from([2, 3, 8, "auto"]))
def test_lanes_select_what_the_rules_select(seed, n_rules, lanes):
    check(seed, n_rules, lanes)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(20, 200), lanes=st.integers(2, 12))
def test_lanes_on_larger_rule_sets(seed, n_rules, lanes):
    check(seed, n_rules, lanes, n_messages=300)


SPEC = """header ev {
    bit<16> a0;
    bit<16> a1;
    bit<16> a2;
    bit<8> a3;
}
@pragma udp_port(5555)
@pragma query_field(ev.a0)
@pragma query_field(ev.a1)
@pragma query_field(ev.a2)
@pragma query_field_exact(ev.a3)
"""

# Adversarial: always-true and never-true rules, an `or` across fields (its conjunctions land
# in different lanes), negations, equal port sets from different lanes, overlapping ports.
ADVERSARIAL = """a0 < 5 : fwd(1)
a1 > 9 : fwd(2)
true : fwd(7)
false : fwd(8)
a0 == 3 or a2 >= 40000 : fwd(3)
not (a1 < 100 and a3 == 4) : fwd(4, 5)
a2 in {1, 2, 3} and a3 != 9 : fwd(1, 2)
a3 == 255 : fwd(200)
"""

VALUES = [0, 1, 2, 3, 4, 5, 6, 9, 10, 99, 100, 255, 39999, 40000, 65535]


@pytest.mark.parametrize("lanes", [1, 2, 3, 4, 6, 50])
def test_adversarial_rules_any_number_of_lanes(lanes):
    c = compile_text(SPEC, ADVERSARIAL, name="ev", lanes=lanes)
    rules = c.rules
    assert len(c.application.all_lanes) == (1 if lanes == 1 else min(lanes, len(c.application.all_lanes)))
    tables = c.tables()
    rng = random.Random(lanes)
    for _ in range(3000):
        msg = {f"ev.a{i}": rng.choice(VALUES) for i in range(3)}
        msg["ev.a3"] = rng.choice([0, 4, 9, 255])
        assert tables.ports(c.application, msg) == evaluate(rules, msg), msg


def test_independent_fields_get_a_lane_each_and_far_fewer_entries():
    """Rules on eight independent range attributes: one diagram is the product of their
    interval counts, lanes the sum."""
    fields = "\n".join(f"    bit<16> a{i};" for i in range(8))
    pragmas = "\n".join(f"@pragma query_field(ev.a{i})" for i in range(8))
    spec = f"header ev {{\n{fields}\n}}\n@pragma udp_port(5555)\n{pragmas}\n"
    rng = random.Random(3)
    text = "\n".join(f"a{rng.randrange(8)} {rng.choice('<>')} {rng.randrange(1000)} : fwd({rng.randint(1, 200)})"
                     for _ in range(300))
    c = compile_text(spec, text, name="ev", lanes="auto")
    lanes = c.stats["lanes"]
    assert len(lanes) == 8 and all(len(lane["fields"]) == 1 for lane in lanes)
    assert c.stats["entries"]["total"] < 2 * 300 + 8 * 3
    assert len(c.entries["multicast_groups"]) == 1
    tables = c.tables()
    for _ in range(500):
        msg = {f"ev.a{i}": rng.randrange(1100) for i in range(8)}
        assert tables.ports(c.application, msg) == evaluate(c.rules, msg)


def test_auto_keeps_one_diagram_when_it_is_small():
    c = compile_text(SPEC, ADVERSARIAL, name="ev", lanes="auto")
    assert not c.application.lanes and "lanes" not in c.stats


def test_pipeline_document_round_trips_lanes_and_refuses_old_versions():
    c = compile_text(SPEC, ADVERSARIAL, name="ev", lanes=3)
    doc = json.loads(document.dumps(c.pipeline))
    assert doc["camus_ir"] == 3 and len(doc["applications"][0]["lanes"]) == 2
    assert document.dumps(document.from_json(doc)) == document.dumps(c.pipeline)
    with pytest.raises(PipelineError, match="camus_ir 2 is not supported.*recompile"):
        document.from_json(dict(doc, camus_ir=2))
    bad = json.loads(json.dumps(doc))
    bad["applications"][0]["lanes"][0]["stages"][0]["field"] = "ev.nope"
    with pytest.raises(PipelineError, match=r"lanes\[0\]\.stages\[0\]: field 'ev.nope'"):
        document.from_json(bad)
    bad["applications"][0]["lanes"] = {"stages": []}
    with pytest.raises(PipelineError, match="lanes"):
        document.from_json(bad)


def test_lanes_option_is_checked():
    assert parse_lanes("auto") == "auto" and parse_lanes("4") == 4
    for bad in ("0", "-1", "many"):
        with pytest.raises(CamusError, match="--lanes"):
            parse_lanes(bad)


def test_cli_lanes(tmp_path):
    (tmp_path / "ev.p4").write_text(SPEC)
    (tmp_path / "rules").write_text(ADVERSARIAL)
    run = subprocess.run([sys.executable, "-m", "camus", "compile", str(tmp_path / "ev.p4"),
                          str(tmp_path / "rules"), "--out", str(tmp_path / "out"), "--lanes", "3"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "3 lanes" in run.stderr
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert len(stats["lanes"]) == 3
    bad = subprocess.run([sys.executable, "-m", "camus", "compile", str(tmp_path / "ev.p4"),
                          str(tmp_path / "rules"), "--out", str(tmp_path / "o2"), "--lanes", "x"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "--lanes takes 'auto'" in bad.stderr


def test_a_refusal_says_when_lanes_would_fit():
    """10,100 one-predicate rules on eight independent attributes: one diagram is refused
    within seconds (the estimate is over the budget and the trial build stops at its CPU
    bound), and the message gives the lanes' estimate, within the budget."""
    import time
    from compiler.compile import TooLarge
    from compiler.spec import parse_spec

    fields = "\n".join(f"    bit<16> a{i};" for i in range(8))
    pragmas = "\n".join(f"@pragma query_field(ev.a{i})" for i in range(8))
    spec = parse_spec(f"header ev {{\n{fields}\n}}\n@pragma udp_port(5555)\n{pragmas}\n", name="ev")
    rng = random.Random(5)
    # Only `<`: a port's rules on one attribute then never cover it all (with `<` and `>` they
    # would, and the compiler folds such a port into an always-true decision).
    rules = parse_rules("\n".join(f"a{rng.randrange(8)} < {rng.randrange(1000)} : "
                                  f"fwd({rng.randint(1, 200)})" for _ in range(10_100)), spec)
    began = time.thread_time()
    with pytest.raises(TooLarge, match=r"stopped after 10 s of CPU time.*--lanes auto.* in 8 "
                                       r"lanes, within the budget"):
        compile_rules(spec, rules, max_entries=1_000_000)
    assert time.thread_time() - began < 30  # the trial's 10 s, then the message's estimates
    c = compile_rules(spec, rules, max_entries=1_000_000, lanes="auto")
    assert len(c.stats["lanes"]) == 8 and c.stats["entries"]["total"] < 20_000
