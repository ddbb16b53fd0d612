"""The generated programs, run by tests/p4/p4_interp.py, against switch/reference.py.

Random and hand-picked frames go through the emitted program text (interpreted: no p4c
here) and through the software switch's reference data plane with the same entries plus an
IPv4 route and UDP port rewrites; the outputs must be byte-identical wherever docs/p4.md
says the program agrees with the software switch. Both get the same entries: entries.json
(port-bitmap decisions and the application's one group need nothing derived for the P4
target). The documented limits (slots, block length) are pinned as what the program does
instead.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

from compiler.compile import compile_files
from compiler.p4 import emit_program
from switch.dataplane import load
from switch.packet import mold_payload, udp_frame
from tests.p4.p4_interp import Interpreter

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "p4"
SPECS = {"itch": "p4/itch/itch.p4", "int": "p4/int/int.p4", "kafka": "p4/kafka/kafka.p4"}
ROUTE = {"table": "ipv4_lpm", "match": {"ipv4.dst_addr": {"lpm": [0xE8000000, 8]}},
         "action": "fwd", "params": {"port": 9}}
REWRITE = {"table": "egress_udp_rewrite", "match": {"egress_port": {"exact": 2}, "egress_rid": {"exact": 0}},
           "action": "set_udp_port", "params": {"port": 7777}}
SESSION = b"SESSION001"
STOCKS = [b"GOOGL", b"MSFT", b"AAPL", b"IBM"]


def _targets(pipeline: dict, entries: dict, slots: int = 8) -> tuple[Interpreter, object]:
    """The program and the software switch, holding the same entries."""
    entries = json.loads(json.dumps(entries))
    entries["table_entries"] += [ROUTE, REWRITE]
    program = Interpreter(emit_program(pipeline, slots), entries)
    return program, load(pipeline, entries, impl="python")


def _setup(case: str, slots: int = 8):
    c = compile_files(ROOT / SPECS[case], GOLDEN / case / "rules.txt")
    return (c, *_targets(c.pipeline, c.entries, slots))


def add_order(stock: bytes, shares: int, price: int, side: bytes = b"B", kind: bytes = b"A") -> bytes:
    body = kind + bytes(10) + struct.pack("!QcI8sI", 99, side, shares, stock.ljust(8), price)
    return body + (b"MPID" if kind == b"F" else b"")


def _random_block(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.6:
        return add_order(rng.choice(STOCKS), rng.choice([1, 100, 999, 1000, 10000, 20000]),
                         rng.choice([1, 500, 1500000, 1500001, 3000000, 3000001]),
                         rng.choice([b"B", b"S"]), rng.choice([b"A", b"A", b"F"]))
    if roll < 0.7:
        return b"S" + bytes(11)  # system event: never a subscription message
    if roll < 0.8:
        return b"E" + bytes(30)  # order executed, 31 bytes
    if roll < 0.9:
        return b""
    return b"A" + bytes(19)  # an 'A' too short to be an Add Order


def _decisions(c, blocks: list[bytes]) -> list:
    """The non-empty port sets the tables give the packet's subscription messages, in order."""
    app = c.application
    tables = c.tables()
    out = []
    for b in blocks:
        if len(b) < 36 or b[0] not in app.types:
            continue
        whole = int.from_bytes(b[:36], "big")
        values = {q: whole >> (36 * 8 - f.bit_offset - f.width) & ((1 << f.width) - 1)
                  for q, f in app.fields.items()}
        ports = tables.ports(app, values)
        if ports:
            out.append(ports)
    return out


def _random_packets(c, interp, ref, rng: random.Random, count: int, slots: int = 8) -> tuple[int, int]:
    """`count` random ITCH packets of at most `slots` blocks through both; (packets with
    pruned multi-message copies, packets whose messages were decided differently)."""
    multi = mixed = 0
    for _ in range(count):
        blocks = [_random_block(rng) for _ in range(rng.randint(1, slots))]
        frame = udp_frame(mold_payload(SESSION, rng.randrange(1 << 64), blocks), dst_port=1234,
                          ip_options=rng.choice([b"", b"", b"\x01\x01\x01\x00"]))
        got, want = interp.process(frame, 0), ref.process(frame, 0)
        assert got == want, blocks
        multi += len(blocks) > 1 and bool(want) and want[0][0] != 9
        mixed += len(set(_decisions(c, blocks))) > 1
    return multi, mixed


def test_itch_random_packets_match_the_software_switch():
    """Messages of one packet going to different ports and groups included (GOOGL to 1,
    AAPL to the group {2, 3}, sells of 10000 or more to 4, ...)."""
    c, interp, ref = _setup("itch")
    multi, mixed = _random_packets(c, interp, ref, random.Random(4), 200)
    assert multi > 40 and mixed > 30  # pruned copies, and per-port copies of mixed packets


def _random_itch_rules(rng: random.Random, ports: list[int] | None = None) -> str:
    lines = []
    for _ in range(rng.randint(2, 7)):
        atoms = []
        if rng.random() < 0.8:
            atoms.append(f'stock == "{rng.choice(STOCKS).decode()}"')
        if rng.random() < 0.5:
            atoms.append(f"price {rng.choice(['>', '<', '>=', '<='])} {rng.choice([500, 1500000, 3000000])}")
        if rng.random() < 0.4:
            atoms.append(f"shares >= {rng.choice([100, 1000, 10000])}")
        if rng.random() < 0.3:
            atoms.append(f'buy_sell_indicator == "{rng.choice("BS")}"')
        chosen = sorted(rng.sample(ports or range(1, 7), rng.randint(1, 3)))
        lines.append(f"{' and '.join(atoms) or 'true'} : fwd({', '.join(map(str, chosen))})")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(6))
def test_itch_random_rules_with_many_groups_match_the_software_switch(seed):
    """Random subscriptions over 6 ports: many groups, overlapping ones, fwd and mcast mixed."""
    from compiler.compile import compile_text

    rng = random.Random(100 + seed)
    c = compile_text((ROOT / SPECS["itch"]).read_text(), _random_itch_rules(rng), name="itch")
    slots = rng.choice([3, 8])
    interp, ref = _targets(c.pipeline, c.entries, slots)
    _random_packets(c, interp, ref, rng, 40, slots)


@pytest.mark.parametrize("seed", range(3))
def test_itch_bitmaps_of_wide_port_numbers_match_the_software_switch(seed):
    """Ports up to 511: the program's bitmaps are hundreds of bits wide, and the egress bit
    test shifts by the copy's port."""
    from compiler.compile import compile_text

    rng = random.Random(200 + seed)
    c = compile_text((ROOT / SPECS["itch"]).read_text(),
                     _random_itch_rules(rng, [1, 63, 64, 65, 130, 300, 511]), name="itch")
    interp, ref = _targets(c.pipeline, c.entries, 4)
    _random_packets(c, interp, ref, rng, 30, 4)


def test_itch_messages_decided_differently_each_reach_their_ports():
    """GOOGL to port 1, MSFT to port 2, AAPL to the ports {2, 3}: one copy per port, each with
    exactly its messages (placeholders between them), through the application's group."""
    c, interp, ref = _setup("itch")
    blocks = [add_order(b"GOOGL", 1, 1), add_order(b"MSFT", 1, 4000000), b"S" + bytes(11),
              add_order(b"AAPL", 5000, 1)]
    frame = udp_frame(mold_payload(SESSION, 10, blocks), dst_port=1234)
    got = interp.process(frame, 0)
    assert got == ref.process(frame, 0)
    assert [p for p, _ in got] == [1, 2, 3]
    from switch.packet import read_mold, read_udp

    kept = {p: read_mold(read_udp(copy).payload)[2] for p, copy in got}
    assert kept[1] == blocks[:1]
    assert kept[2] == [blocks[1], b"", blocks[3]]
    assert kept[3] == blocks[3:]


def test_the_group_replicas_a_bitmap_leaves_out_are_dropped_in_egress():
    """The application's group reaches ports no decision of this packet selects (4, 5, 6 and,
    for single framing, every port but the bitmap's): egress drops those copies, so the
    program sends exactly what the software switch sends, with one group for all decisions."""
    from compiler.compile import compile_text

    rules = "stock == \"GOOGL\" : fwd(1, 2)\nstock == \"MSFT\" : fwd(2, 3)\nshares > 5 : fwd(6)\n"
    c = compile_text((ROOT / SPECS["itch"]).read_text(), rules, name="itch")
    (group,) = c.entries["multicast_groups"]
    assert [r["port"] for r in group["replicas"]] == [1, 2, 3, 6]
    interp, ref = _targets(c.pipeline, c.entries)
    for blocks in ([add_order(b"GOOGL", 1, 1)], [add_order(b"GOOGL", 1, 1), add_order(b"MSFT", 1, 1)],
                   [add_order(b"IBM", 1, 1), add_order(b"MSFT", 1, 1)]):
        frame = udp_frame(mold_payload(SESSION, 10, blocks), dst_port=1234)
        got = interp.process(frame, 0)
        assert got == ref.process(frame, 0)
        assert 6 not in [p for p, _ in got]


@pytest.mark.parametrize("frame", [
    udp_frame(mold_payload(SESSION, 5, []), dst_port=1234),  # heartbeat
    udp_frame(mold_payload(SESSION, 5, [], count=0xFFFF), dst_port=1234),  # end of session
    udp_frame(mold_payload(SESSION, 5, [add_order(b"GOOGL", 1, 1)]) + bytes(30), dst_port=1234),  # padding
    udp_frame(mold_payload(SESSION, 5, [add_order(b"GOOGL", 1, 1)])[:-3], dst_port=1234),  # block past end
    udp_frame(mold_payload(SESSION, 5, [add_order(b"GOOGL", 1, 1)], count=3), dst_port=1234),  # 3 blocks?
    udp_frame(SESSION + b"\0" * 5, dst_port=1234),  # short MoldUDP64 header
    udp_frame(mold_payload(SESSION, 5, [add_order(b"GOOGL", 1, 1)]), dst_port=1234)[:50],  # truncated frame
    udp_frame(b"hello", dst_port=4444),  # other UDP traffic: routed
    udp_frame(b"hello", dst_port=4444, dst_ip=0x0A000001),  # no route: dropped
    # the sequence number wraps
    udp_frame(mold_payload(SESSION, (1 << 64) - 1, [b"", add_order(b"AAPL", 5000, 1)]), dst_port=1234),
], ids=["heartbeat", "end-of-session", "padding", "block-past-end", "missing-blocks", "short-header",
        "truncated-frame", "other-udp", "no-route", "sequence-wraps"])
def test_itch_edge_frames_match_the_software_switch(frame):
    _, interp, ref = _setup("itch")
    assert interp.process(frame, 0) == ref.process(frame, 0)


def _patched(frame: bytes, offset: int, value: bytes) -> bytes:
    return frame[:offset] + value + frame[offset + len(value):]


GOOGL_FRAME = udp_frame(mold_payload(SESSION, 5, [add_order(b"GOOGL", 1, 1)]), dst_port=1234)


@pytest.mark.parametrize("frame", [
    _patched(GOOGL_FRAME, 14, b"\x44"),  # IHL 4
    _patched(GOOGL_FRAME, 14, b"\x65"),  # version 6 in an IPv4 ethertype
    _patched(GOOGL_FRAME, 20, b"\x20"),  # more fragments: not a whole datagram, routed
    _patched(GOOGL_FRAME, 12, b"\x86\xdd"),  # not IPv4: dropped
    _patched(GOOGL_FRAME, 16, b"\x00\x10"),  # IPv4 total length below the header
    _patched(GOOGL_FRAME, 38, b"\x00\x04"),  # UDP length below 8
], ids=["ihl-4", "version-6", "fragment", "not-ipv4", "short-total-length", "short-udp-length"])
def test_malformed_and_non_subscription_frames_match_the_software_switch(frame):
    _, interp, ref = _setup("itch")
    assert interp.process(frame, 0) == ref.process(frame, 0)


@pytest.mark.parametrize("options", [b"\x01\x01\x01\x00", b"\x07\x27" + bytes(38)])
def test_ipv4_options_are_kept_in_copies_and_covered_by_the_checksum(options):
    _, interp, ref = _setup("itch")
    blocks = [add_order(b"GOOGL", 1, 1), b"S" + bytes(11)]
    frame = udp_frame(mold_payload(SESSION, 5, blocks), dst_port=1234, ip_options=options)
    got = interp.process(frame, 0)
    assert [p for p, _ in got] == [1] and got == ref.process(frame, 0)
    assert got[0][1][14] == 0x40 | (5 + len(options) // 4)


def test_a_block_longer_than_a_slot_ends_parsing():
    """docs/p4.md: blocks over 64 bytes, and all after them, are not evaluated."""
    _, interp, ref = _setup("itch")
    blocks = [add_order(b"GOOGL", 1, 1), b"X" * 70, add_order(b"GOOGL", 2, 2)]
    frame = udp_frame(mold_payload(SESSION, 5, blocks), dst_port=1234)
    (port, want), = ref.process(frame, 0)
    (got_port, got), = interp.process(frame, 0)
    assert port == got_port == 1
    first_only = udp_frame(mold_payload(SESSION, 5, blocks[:1]), dst_port=1234)
    assert got == first_only and want != got


def test_itch_messages_beyond_the_slots_are_not_evaluated():
    _, interp, ref = _setup("itch", slots=2)
    blocks = [b"S" + bytes(11), b"", add_order(b"GOOGL", 1, 1)]
    frame = udp_frame(mold_payload(SESSION, 10, blocks), dst_port=1234)
    assert [p for p, _ in ref.process(frame, 0)] == [1]
    assert interp.process(frame, 0) == [(9, frame)]  # nothing selected within 2 slots: routed


def _message(app: dict, rng: random.Random, consts: dict) -> bytes:
    """Random bytes with every query field set to one of its `consts`."""
    nbytes = app.message_bytes
    whole = int.from_bytes(rng.randbytes(nbytes), "big")
    for q, f in app.fields.items():
        mask = (1 << f.width) - 1
        shift = nbytes * 8 - f.bit_offset - f.width
        whole = whole & ~(mask << shift) | ((rng.choice(consts[q]) & mask) << shift)
    return whole.to_bytes(nbytes, "big")


@pytest.mark.parametrize("case", ["int", "kafka"])
def test_single_message_applications_match_the_software_switch(case):
    c, interp, ref = _setup(case)
    app = c.application
    nbytes = app.message_bytes
    consts = {q: [0, 1, 2, 7, 99, 100, 101, 1000, 5000, 5001, 1 << 20] for q in app.fields}
    rng = random.Random(7)
    selected = 0
    for _ in range(120):
        payload = _message(app, rng, consts) + rng.randbytes(rng.choice([0, 0, 5]))
        if rng.random() < 0.1:
            payload = payload[: rng.randrange(nbytes)]  # too short to be a message: routed
        frame = udp_frame(payload, dst_port=app.udp_port)
        got, want = interp.process(frame, 0), ref.process(frame, 0)
        assert got == want
        selected += bool(want) and want[0][0] != 9
    assert selected > 10


def test_three_applications_in_one_program_each_match_the_software_switch(tmp_path):
    from compiler.p4.__main__ import build

    apps = [[str(ROOT / SPECS[k]), str(GOLDEN / k / "rules.txt")] for k in sorted(SPECS)]
    pipeline, entries = build(apps)
    interp, ref = _targets(pipeline, entries)
    frames = [udp_frame(mold_payload(SESSION, 1, [add_order(b"GOOGL", 1, 1)]), dst_port=1234),
              udp_frame(bytes(40), dst_port=1337), udp_frame(bytes(104), dst_port=9094),
              udp_frame((1).to_bytes(4, "big") + bytes(100), dst_port=9094)]
    for frame in frames:
        assert interp.process(frame, 0) == ref.process(frame, 0)


@pytest.mark.parametrize("seed", range(12))
def test_random_specs_and_rules_match_the_software_switch(seed):
    """Every match kind the compiler picks (exact, range, lpm), groups, defaults and the leaf."""
    from compiler.compile import compile_rules
    from compiler.rules import parse_rules
    from tests.compiler.gen import random_rules, random_spec

    rng = random.Random(seed)
    spec, gens = random_spec(rng)
    c = compile_rules(spec, parse_rules(random_rules(rng, gens, rng.randint(1, 6)), spec))
    random_messages_match(c, rng, gens)


def random_messages_match(c, rng: random.Random, gens, n: int = 40) -> None:
    """`n` random single-message frames give the same output from the program as from the
    software switch (`tests.compiler.gen` messages for a random spec)."""
    from tests.compiler.gen import random_message

    interp, ref = _targets(c.pipeline, c.entries)
    app = c.application
    nbytes = app.message_bytes
    for _ in range(n):
        values = random_message(rng, gens)
        whole = 0
        for q, f in app.fields.items():
            whole |= values[q] << (nbytes * 8 - f.bit_offset - f.width)
        frame = udp_frame(whole.to_bytes(nbytes, "big"), dst_port=app.udp_port)
        assert interp.process(frame, 0) == ref.process(frame, 0), values


def test_a_rule_that_is_always_true_decides_in_the_leaf_table():
    from compiler.compile import compile_text

    c = compile_text((ROOT / SPECS["int"]).read_text(), "true : fwd(2, 4)\n", name="int")
    entries = json.loads(json.dumps(c.entries))
    assert [e["table"] for e in entries["table_entries"]] == ["int_leaf"]
    interp, ref = _targets(c.pipeline, entries)
    frame = udp_frame(bytes(range(32)), dst_port=1337)
    got = interp.process(frame, 0)
    assert [p for p, _ in got] == [2, 4] and got == ref.process(frame, 0)


@pytest.mark.parametrize("case", sorted(SPECS))
def test_static_pipelines_match_the_software_switch(case):
    """`camus compile --static`: every query field staged with its declared match kind."""
    from compiler.compile import compile_rules
    from compiler.rules import load_rules
    from compiler.spec import load_spec

    spec = load_spec(ROOT / SPECS[case])
    c = compile_rules(spec, load_rules(GOLDEN / case / "rules.txt", spec), static=True)
    interp, ref = _targets(c.pipeline, c.entries)
    app = c.application
    rng = random.Random(11)
    for _ in range(60):
        if case == "itch":
            blocks = [add_order(rng.choice(STOCKS), rng.choice([1, 999, 1000, 20000]),
                                rng.choice([1, 1500001, 3000001]), rng.choice([b"B", b"S"]))]
            payload = mold_payload(SESSION, 3, blocks)
        else:
            payload = _message(app, rng, {q: [0, 1, 2, 7, 100, 101, 5001] for q in app.fields})
        frame = udp_frame(payload, dst_port=app.udp_port)
        assert interp.process(frame, 0) == ref.process(frame, 0)
