"""The differential harness (issue 18 item 3): the same frames through `camus switch run`
(the real command, pcap in, one pcap per port out) and through bmv2 programmed by camus's
controller, both against `compiler.semantics.evaluate`, for random specs, rule sets and
messages (Hypothesis draws the seed; `tests/compiler/gen.py` draws values at, below and
above every constant).

The software switch half runs everywhere. The bmv2 half needs `p4c-bm2-ss` and
`simple_switch_grpc` on PATH and skips elsewhere: neither is installable on the machines
camus is developed on, so it has not run there. It uses bmv2's pcap-file ports
(`--use-files`, no root) through tests/p4/test_bmv2.py's helpers; bmv2 may reorder copies
across ports but keeps one input pcap's order within a port, so outputs are compared per
port in order. Each frame carries one message, so no burst reaches bmv2's 64-packet
queue limit per port before it drains (frames are read from the pcap at its own pace).
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules, write_outputs
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from switch.packet import udp_frame
from switch.pcap import read_pcap, write_pcap
from tests.compiler.gen import random_message, random_rules, random_spec

from .test_bmv2 import bmv2_outputs, names, needs_bmv2, needs_p4c, p4c_compile

ROOT = Path(__file__).resolve().parents[2]


def case(seed: int, n_messages: int = 30):
    """A random spec and rule set, compiled; frames of one message each; per port the
    frames `compiler.semantics` sends there, in input order."""
    rng = random.Random(seed)
    spec, gens = random_spec(rng)
    rules = parse_rules(random_rules(rng, gens, rng.randint(1, 8), max_port=6), spec)
    c = compile_rules(spec, rules)
    app = c.application
    frames, expected = [], {}
    for _ in range(n_messages):
        values = random_message(rng, gens)
        whole = 0
        for q, f in app.fields.items():
            whole |= values[q] << (app.message_bytes * 8 - f.bit_offset - f.width)
        frame = udp_frame(whole.to_bytes(app.message_bytes, "big"), dst_port=app.udp_port)
        frames.append(frame)
        for port in sorted(evaluate(rules, values)):
            expected.setdefault(port, []).append(frame)
    return c, frames, expected


def per_port(directory: Path) -> dict[int, list[bytes]]:
    out = {}
    for path in sorted(directory.glob("port-*.pcap")):
        out[int(path.stem.split("-")[1])] = [r.data for r in read_pcap(str(path))]
    return out


def switch_run(c, frames: list[bytes], work: Path) -> dict[int, list[bytes]]:
    """`camus switch run` on the compiled directory and the frames."""
    write_outputs(c, work)
    write_pcap(str(work / "in.pcap"), frames)
    run = subprocess.run([sys.executable, "-m", "camus.cli", "switch", "run", "--pipeline", str(work),
                          "--pcap-in", str(work / "in.pcap"), "--out-dir", str(work / "out")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return per_port(work / "out")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_camus_switch_run_equals_the_semantics(seed, tmp_path_factory):
    c, frames, expected = case(seed)
    assert switch_run(c, frames, tmp_path_factory.mktemp("run")) == expected, seed


@needs_p4c
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_p4c_compiles_programs_for_random_specs_cleanly_with_our_p4info(seed, tmp_path_factory):
    """Every generated program, not only the golden ones: no error, no warning (p4c_compile
    checks both), and p4c's P4Info has our names."""
    from compiler.p4 import write_p4
    from controller.push import TargetConfig
    from p4rt.p4info import program_p4info

    c, _, _ = case(seed, n_messages=0)
    work = tmp_path_factory.mktemp("p4c")
    write_p4(c.pipeline, c.entries, work)
    p4info_path, _ = p4c_compile(work / "program.p4", work)
    assert names(TargetConfig.from_files(p4info_path, p4info_path).p4info) == names(program_p4info(c.pipeline))


@needs_bmv2
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_bmv2_equals_camus_switch_run_and_the_semantics(seed, tmp_path_factory):
    c, frames, expected = case(seed)
    software = switch_run(c, frames, tmp_path_factory.mktemp("run"))
    hardware = bmv2_outputs(c, frames, tmp_path_factory.mktemp("bmv2"), ports=range(1, 7))
    assert software == expected, seed
    assert hardware == expected, seed
