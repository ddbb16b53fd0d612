"""The switch agrees with the rules' meaning: random rules, random ITCH packets, both data planes
and `camus switch run`.

Rules are compiled by `compiler.compile`; what each port must receive is worked out here from
`compiler.semantics.evaluate` alone (per message, the union of the ports of the true rules)
and the MoldUDP64 pruning rule of docs/pipeline-ir.md, never from the switch's own code.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from camus.cli import main as camus_main
from compiler.compile import compile_rules
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import load_spec
from pipeline import document
from switch.dataplane import IMPLEMENTATIONS, load
from switch.packet import read_mold, read_udp
from switch.pcap import read_pcap, write_pcap
from switch_helpers import SESSION, add_order, itch_frame, itch_values, route

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(ROOT / "p4" / "itch" / "itch.p4")
FALLBACK_PORT = 99  # the default route: where frames no rule selects must go, unchanged

SYMBOLS = ["GOOGL", "AAPL", "MSFT", "IBM"]
PRICES = [0, 1, 9, 10, 11, 50, 51, 99, 100, 4294967295]
SHARES = [0, 100, 300, 301, 65536]
OPS = ["==", "!=", "<", "<=", ">", ">="]

atoms = st.one_of(
    st.builds(lambda op, s: f'stock {op} "{s}"', st.sampled_from(["==", "!="]), st.sampled_from(SYMBOLS)),
    st.builds(lambda op, n: f"price {op} {n}", st.sampled_from(OPS), st.sampled_from(PRICES)),
    st.builds(lambda op, n: f"shares {op} {n}", st.sampled_from(OPS), st.sampled_from(SHARES)),
    st.builds(lambda op, s: f'buy_sell_indicator {op} "{s}"', st.sampled_from(["==", "!="]),
              st.sampled_from("BS")),
)
filters = st.recursive(
    atoms,
    lambda sub: st.one_of(
        st.builds(lambda a, b: f"({a} and {b})", sub, sub),
        st.builds(lambda a, b: f"({a} or {b})", sub, sub),
        st.builds(lambda a: f"not {a}", sub),
    ),
    max_leaves=4,
)
rule_lines = st.builds(lambda f, ports: f"{f} : fwd({', '.join(map(str, sorted(ports)))})",
                       filters, st.sets(st.integers(1, 6), min_size=1, max_size=3))
rule_sets = st.lists(rule_lines, min_size=1, max_size=6).map("\n".join)

messages = st.one_of(
    st.builds(add_order, st.sampled_from(SYMBOLS + ["ZZZZ"]), st.sampled_from(PRICES + [5, 75]),
              st.sampled_from(SHARES + [200]), st.sampled_from([b"A", b"A", b"F"]),
              st.integers(0, 9), st.sampled_from([b"B", b"S"])),
    st.just(b"D" + bytes(18)),  # Order Delete: never a subscription message
    st.builds(lambda m: m[:30], st.builds(add_order, st.sampled_from(SYMBOLS), st.just(60))),  # short 'A'
    st.binary(max_size=8),
)
frames = st.builds(lambda msgs, seq: (msgs, seq, itch_frame(msgs, seq=seq)),
                   st.lists(messages, min_size=0, max_size=8), st.integers(0, 2 ** 64 - 1))
# A frame cut short anywhere is dropped as truncated; `None` means "keep it whole".
cuts = st.one_of(st.none(), st.none(), st.integers(0, 200))


QUERY_FIELDS = ["itch_order.stock", "itch_order.price", "itch_order.shares", "itch_order.buy_sell_indicator"]
field_orders = st.one_of(st.none(), st.permutations(QUERY_FIELDS))


def compiled(rules_text: str, field_order=None):
    rules = parse_rules(rules_text, SPEC)
    c = compile_rules(SPEC, rules, field_order)
    entries = dict(c.entries)
    entries["table_entries"] = list(entries["table_entries"]) + [route(0, 0, FALLBACK_PORT)]
    return rules, c.pipeline, entries


def selected(rules, msg: bytes) -> set[int]:
    if len(msg) < 36 or msg[0] not in b"AF":
        return set()
    return evaluate(rules, itch_values(msg))


def expected_copies(rules, msgs: list[bytes], seq: int, frame: bytes) -> dict[int, list]:
    """port -> [(sequence, blocks)] for one frame, or the unchanged frame on the fallback port."""
    ports: dict[int, list[int]] = {}
    for i, m in enumerate(msgs):
        for p in selected(rules, m):
            ports.setdefault(p, []).append(i)
    if not ports:
        return {FALLBACK_PORT: [frame]}
    out = {}
    for p, kept in ports.items():
        first, last = kept[0], kept[-1]
        out[p] = [((seq + first) % 2 ** 64, [msgs[i] if i in kept else b"" for i in range(first, last + 1)])]
    return out


def actual_copies(copies: list[tuple[int, bytes]]) -> dict[int, list]:
    out: dict[int, list] = {}
    for port, frame in copies:
        if port == FALLBACK_PORT:
            out.setdefault(port, []).append(frame)
            continue
        v = read_udp(frame)
        assert v.ip_checksum_ok and v.udp_checksum == 0 and v.ip_total_length == len(frame) - 14
        session, seq, blocks = read_mold(v.payload)
        assert session == SESSION
        out.setdefault(port, []).append((seq, blocks))
    return out


def run_case(dp, rules, cases) -> None:
    truncated = 0
    for (msgs, seq, frame), cut in cases:
        if cut is not None and cut < len(frame):
            assert dp.process(frame[:cut], 0) == []
            truncated += 1
        else:
            assert actual_copies(dp.process(frame, 0)) == expected_copies(rules, msgs, seq, frame)
    assert dp.counters()["drops"]["truncated"] == truncated


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=200, deadline=None)
@given(rules_text=rule_sets, cases=st.lists(st.tuples(frames, cuts), min_size=1, max_size=6),
       field_order=field_orders)
def test_every_port_gets_what_the_rules_select(impl, rules_text, cases, field_order):
    """Any field order too: stages then come as exact, range or mixed sequences."""
    rules, pipeline, entries = compiled(rules_text, field_order)
    run_case(load(pipeline, entries, impl=impl), rules, cases)


# Ports on both sides of the native bitmaps' 64-bit word boundaries, up to the last port.
WIDE_PORTS = [1, 2, 63, 64, 65, 127, 128, 200, 256, 510, 511]
wide_rule_sets = st.lists(st.builds(lambda f, ports: f"{f} : fwd({', '.join(map(str, sorted(ports)))})",
                                    filters, st.sets(st.sampled_from(WIDE_PORTS), min_size=1, max_size=5)),
                          min_size=1, max_size=8).map("\n".join)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@settings(max_examples=100, deadline=None)
@given(rules_text=wide_rule_sets, cases=st.lists(st.tuples(frames, st.none()), min_size=1, max_size=4),
       static=st.booleans())
def test_port_bitmaps_across_words_select_what_the_rules_select(impl, rules_text, cases, static):
    """Port-bitmap decisions with ports up to 511 (every 64-bit word of a 512-bit bitmap), on a
    pipeline sized to the rules and on a static one (a bit for every port): one group each."""
    rules = parse_rules(rules_text, SPEC)
    c = compile_rules(SPEC, rules, static=static)
    assert len(c.entries["multicast_groups"]) <= 1  # none when no rule can select anything
    entries = dict(c.entries, table_entries=list(c.entries["table_entries"]) + [route(0, 0, FALLBACK_PORT)])
    run_case(load(c.pipeline, entries, impl=impl), rules, cases)


def test_pinned_price_boundary_and_negation():
    """A hand-picked case: boundaries on both sides of a constant, and a negated equality."""
    text = 'stock == "GOOGL" and price > 50 : fwd(1)\nnot stock == "GOOGL" : fwd(2)\nprice <= 10 : fwd(1, 3)'
    msgs = [add_order("GOOGL", 50), add_order("GOOGL", 51), add_order("AAPL", 10), add_order("AAPL", 11)]
    rules, pipeline, entries = compiled(text)
    frame = itch_frame(msgs, seq=7)
    for impl in IMPLEMENTATIONS:
        run_case(load(pipeline, entries, impl=impl), rules, [((msgs, 7, frame), None)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_text=rule_sets, cases=st.lists(frames, min_size=1, max_size=10), impl=st.sampled_from(IMPLEMENTATIONS))
def test_switch_run_cli_writes_what_the_rules_select(rules_text, cases, impl):
    rules, pipeline, entries = compiled(rules_text)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "pipe").mkdir()
        (d / "pipe" / "pipeline.json").write_text(document.dumps(pipeline))
        (d / "pipe" / "entries.json").write_text(json.dumps(entries))
        write_pcap(str(d / "in.pcap"), [f for _, _, f in cases])
        assert camus_main(["switch", "run", "--pipeline", str(d / "pipe"), "--pcap-in", str(d / "in.pcap"),
                           "--out-dir", str(d / "out"), "--impl", impl]) == 0
        want: dict[int, list] = {}
        for msgs, seq, frame in cases:  # input order, per port
            for port, copies in expected_copies(rules, msgs, seq, frame).items():
                want.setdefault(port, []).extend(copies)
        got: dict[int, list] = {}
        for path in sorted((d / "out").glob("port-*.pcap")):
            port = int(path.stem.split("-")[1])
            got[port] = actual_copies([(port, r.data) for r in read_pcap(str(path))])[port]
        assert got == want
