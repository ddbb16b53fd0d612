"""Stateful rules on the switch (IR 4): both data planes run the state stages exactly as
`compiler.semantics.Evaluator` defines them (docs/stateful.md), and agree with each other
copy for copy, counter for counter and register cell for register cell.

Rules are compiled by `compiler.compile`; what each message must select is worked out from
the Evaluator alone, packet by packet in order (each message of a MoldUDP64 packet its own
packet, at the frame's time or at its declared time field), and compared with the messages
each copy carries. Frames come with timestamps that cross window edges, repeat and go
backwards; some are cut short (dropped whole: no message touches state), some messages are
not subscription messages (other types, too short).
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules
from compiler.errors import StateError
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet
from compiler.spec import parse_spec
from pipeline.model import EntryError
from switch.dataplane import IMPLEMENTATIONS, load
from switch.packet import read_mold, read_udp, udp_frame
from switch_helpers import ITCH_FIELDS, SESSION, itch_frame, itch_values

ROOT = Path(__file__).resolve().parents[2]
ITCH = (ROOT / "p4" / "itch" / "itch.p4").read_text()

# Windows of tens of µs, so that a few frames cross them; slots enough for any rule set here.
ITCH_STATE = """
@pragma query_counter(c, 100, 4096)
@pragma query_counter(ck, 50, 4096, itch_order.stock_locate, 4)
@pragma query_average(itch_order.price, 200, 4096)
@pragma query_meter(mp, packets, 100, 4096, itch_order.stock_locate, 2)
@pragma query_meter(mb, bytes, 100, 4096)
"""
TIME_FIELD = "@pragma query_timestamp(itch_order.timestamp, ns)\n"


def itch_spec(timed: bool, banks: int):
    return parse_spec(ITCH + ITCH_STATE + (TIME_FIELD if timed else "")
                      + f"@pragma query_banks({banks})\n", name="itch")


SPECS = {(timed, banks): itch_spec(timed, banks) for timed in (False, True) for banks in (2, 4)}

SYMBOLS = ["GOOGL", "AAPL", "MSFT"]
PRICES = [0, 1, 49, 50, 51, 100, 4294967295]
OPS = ["==", "!=", "<", "<=", ">", ">="]
# State predicates with constants around what a few packets make of them: a packet per
# 100 µs is 10,000/s, a 36-byte message per 100 µs 360,000 bytes/s.
STATE_ATOMS = {
    "c": [0, 1, 2, 3, 5], "ck": [0, 1, 2, 3],
    "avg(price)": [0, 1, 49, 50, 51, 100, 4294967295],
    "rate(mp)": [0, 9999, 10000, 20000, 30001],
    "rate(mb)": [0, 359999, 360000, 400000, 720000, 1080001],
}
UPDATES = ["count(c)", "count(ck)", "avg(price)", "meter(mp)", "meter(mb)"]

field_atoms = st.one_of(
    st.builds(lambda op, s: f'stock {op} "{s}"', st.sampled_from(["==", "!="]), st.sampled_from(SYMBOLS)),
    st.builds(lambda op, n: f"price {op} {n}", st.sampled_from(OPS), st.sampled_from(PRICES)),
    st.builds(lambda op, n: f"shares {op} {n}", st.sampled_from(OPS), st.sampled_from([0, 100, 101])),
)
state_atoms = st.sampled_from(sorted(STATE_ATOMS)).flatmap(
    lambda name: st.builds(lambda op, x: f"{name} {op} {x}", st.sampled_from(OPS),
                           st.sampled_from(STATE_ATOMS[name])))
atoms = st.one_of(field_atoms, state_atoms, state_atoms)
filters = st.recursive(
    atoms,
    lambda sub: st.one_of(
        st.builds(lambda a, b: f"({a} and {b})", sub, sub),
        st.builds(lambda a, b: f"({a} or {b})", sub, sub),
        st.builds(lambda a: f"not {a}", sub),
    ),
    max_leaves=3,
)


@st.composite
def rule_lines(draw):
    ports = draw(st.sets(st.integers(1, 5), max_size=2))
    updates = draw(st.lists(st.sampled_from(UPDATES), unique=True, max_size=2))
    if not ports and not updates:
        ports = {1}
    actions = ([f"fwd({', '.join(map(str, sorted(ports)))})"] if ports else []) + updates
    return f"{draw(filters)} : {', '.join(actions)}"


rule_sets = st.lists(rule_lines(), min_size=1, max_size=4)


def order(stock: str, price: int, locate: int = 0, ts_ns: int = 0, mtype: bytes = b"A",
          shares: int = 100) -> bytes:
    """An ITCH Add Order ('F' carries 4 more bytes, so a bytes meter sees 40)."""
    msg = (mtype + struct.pack("!HH", locate, 0) + ts_ns.to_bytes(6, "big") + struct.pack("!Q", 1)
           + b"B" + struct.pack("!I", shares) + stock.encode().ljust(8) + struct.pack("!I", price))
    return msg + b"MPID" if mtype == b"F" else msg


# Declared-time messages carry ns timestamps around the same windows as the frames' µs.
messages = st.one_of(
    st.builds(order, st.sampled_from(SYMBOLS), st.sampled_from(PRICES), st.integers(0, 3),
              st.sampled_from([0, 49_999, 50_000, 99_999, 100_000, 250_000, 10 ** 12]),
              st.sampled_from([b"A", b"A", b"F"]), st.sampled_from([0, 100, 101])),
    st.just(b"D" + bytes(18)),  # Order Delete: never a subscription message
    st.builds(lambda m: m[:30], st.builds(order, st.sampled_from(SYMBOLS), st.just(60))),  # short 'A'
)
# Frame times: steps that stay in a window, reach its edge or jump past it, and go back.
steps = st.sampled_from([0, 1, 49, 50, 51, 99, 100, 101, 250, -60, -400, 10 ** 9])


@st.composite
def timed_frames(draw, max_frames: int = 10):
    out, ts = [], draw(st.sampled_from([0, 99, 1000]))
    for _ in range(draw(st.integers(1, max_frames))):
        ts = max(0, ts + draw(steps))
        msgs = draw(st.lists(messages, max_size=5))
        seq = draw(st.integers(0, 2 ** 64 - 1))
        frame = itch_frame(msgs, seq=seq)
        cut = draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, len(frame) - 1)))
        out.append((ts, msgs, seq, frame if cut is None else frame[:cut]))
    return out


def compiled(spec, lines: list[str]):
    """The rule set and its compiled tables; hypothesis looks elsewhere when the compiler
    refuses it (more rules in one scope than banks, too many region combinations)."""
    rules = parse_rules("\n".join(lines), spec)
    try:
        c = compile_rules(spec, rules)
    except StateError:
        assume(False)
        raise
    return rules, c


def evaluator_ports(ev: Evaluator, spec, msgs: list[bytes], ts: int) -> list[set[int]]:
    """Each message's port set: subscription messages through the Evaluator, in order."""
    out = []
    for m in msgs:
        if len(m) < 36 or m[:1] not in (b"A", b"F"):
            out.append(set())
            continue
        out.append(ev.packet(Packet(ts, itch_values(m), len(m))))
    return out


def copied_ports(copies, seq: int, n: int) -> list[set[int]]:
    """Which ports each of the frame's n messages went to, read from the copies."""
    out: list[set[int]] = [set() for _ in range(n)]
    for port, frame in copies:
        v = read_udp(frame)
        assert v.ip_checksum_ok and v.udp_checksum == 0
        session, first, blocks = read_mold(v.payload)
        assert session == SESSION
        for k, block in enumerate(blocks):
            if block:
                out[(first - seq + k) % 2 ** 64].add(port)
    return out


def cells(dp, c) -> dict[tuple[str, int], int]:
    """Every cell of every rule's instances (the only cells a packet may write): what the
    two data planes must agree on, cell for cell."""
    out = {}
    for inst in c.entries.get("state_instances", []):
        var = next(v for app in c.pipeline.applications if app.state
                   for v in app.state.vars if v.name == inst["state"])
        register = var.registers[inst["bank"]]
        for i in range(inst["base"], inst["base"] + inst["buckets"]):
            out[register, i] = dp.read_cell(register, i)
    return out


def run_both(c, rules, spec, frames):
    """Every frame through both data planes and the Evaluator; they must agree throughout."""
    planes = {impl: load(c.pipeline, c.entries, impl=impl) for impl in IMPLEMENTATIONS}
    ev = Evaluator(rules)
    for ts, msgs, seq, frame in frames:
        outs = {impl: dp.process(frame, 0, ts) for impl, dp in planes.items()}
        assert outs["native"] == outs["python"]
        if len(frame) < len(itch_frame(msgs, seq=seq)):
            assert outs["native"] == []  # cut short: dropped, no message seen
            continue
        assert copied_ports(outs["native"], seq, len(msgs)) == evaluator_ports(ev, spec, msgs, ts)
    assert planes["native"].counters() == planes["python"].counters()
    assert cells(planes["native"], c) == cells(planes["python"], c)
    return planes


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(lines=rule_sets, frames=timed_frames(), timed=st.booleans(), banks=st.sampled_from([2, 4]))
def test_stateful_rules_select_what_the_evaluator_selects(lines, frames, timed, banks):
    spec = SPECS[timed, banks]
    rules, c = compiled(spec, lines)
    run_both(c, rules, spec, frames)


def process_all(planes, frame: bytes, ts: int) -> list:
    outs = {impl: dp.process(frame, 0, ts) for impl, dp in planes.items()}
    assert outs["native"] == outs["python"]
    return outs["native"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(lines=rule_sets, pool=rule_sets, frames=timed_frames(12), seed=st.integers(0, 2 ** 32 - 1),
       timed=st.booleans(), static=st.booleans())
def test_rule_changes_between_packets(lines, pool, frames, seed, timed, static):
    """Rules added and removed between frames, as the incremental compiler's writes: both
    data planes and the Evaluator, with its own rule changes, agree on every message; a new
    rule's instances start empty wherever its cells were (the writes zero them), and no other
    rule's instances move. A static pipeline takes every change as entries; one sized to its
    rules may need a new program (a new stage, wider state ids), loaded whole with the cells
    of the rules that stay carried over, as the compiler's tests do (the registers do not
    depend on the rules)."""
    from compiler.incremental import Incremental, rule_key
    from controller.diff import apply_steps

    spec = SPECS[timed, 4]
    rng = random.Random(seed)
    rules = parse_rules("\n".join(lines), spec)
    candidates = parse_rules("\n".join(pool), spec)
    try:
        inc = Incremental(spec, rules, static=True) if static else \
            Incremental(spec, rules, field_order=FIELD_ORDER)
    except StateError:
        assume(False)
        raise
    planes = {impl: load(inc.pipeline, inc.entries(), impl=impl) for impl in IMPLEMENTATIONS}
    ev = Evaluator(rules)
    handles: dict = {}
    for h, r in enumerate(rules):
        handles.setdefault(rule_key(r), []).append(h)
    for ts, msgs, seq, frame in frames:
        if rng.random() < 0.4:
            before = inc.entries()
            live = inc.current_rules()
            if live and rng.random() < 0.5:
                r = rng.choice(live)
                step = inc.remove(r)
                ev.remove(handles[rule_key(r)].pop())
            else:
                r = rng.choice(candidates)
                try:
                    step = inc.add(r)
                except StateError:
                    step = None  # refused (banks, slots): the rule set is as it was
                else:
                    handles.setdefault(rule_key(r), []).append(ev.add(r))
            if step is not None and (step.rebuilt or step.resized):
                assert not static  # a static pipeline changes by entries alone
                planes = {impl: reloaded(dp, before, inc, step) for impl, dp in planes.items()}
            elif step is not None:
                for dp in planes.values():
                    apply_steps(dp, step)
        out = process_all(planes, frame, ts)
        if len(frame) < len(itch_frame(msgs, seq=seq)):
            assert out == []
            continue
        assert copied_ports(out, seq, len(msgs)) == evaluator_ports(ev, spec, msgs, ts)
    assert planes["native"].counters() == planes["python"].counters()
    assert planes["native"].entries() == planes["python"].entries()


# Stock, then price, then shares: a rule set's stages keep their order as rules come and go.
FIELD_ORDER = ["itch_order.stock", "itch_order.price", "itch_order.shares"]


def reloaded(old, before: dict, inc, step):
    """A data plane for the incremental compiler's new program, holding its entries, the
    cells of every instance of `before` (the rules before the change), then the change's
    resets (the instances the change gives new rules)."""
    dp = load(inc.pipeline, inc.entries(), impl="native" if "Native" in type(old).__name__ else "python")
    state = {v.name: v for app in inc.pipeline.applications if app.state for v in app.state.vars}
    for inst in before.get("state_instances", []):
        register = state[inst["state"]].registers[inst["bank"]]
        for i in range(inst["base"], inst["base"] + inst["buckets"]):
            dp.write_cell(register, i, old.read_cell(register, i))
    for cells in step.reset_cells:
        dp.reset_cells(cells)
    return dp


@given(lines=rule_sets, frames=timed_frames(), timed=st.booleans())
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])
def test_batched_calls_equal_frame_by_frame(lines, frames, timed):
    """`process_packed` and `classify_packed` with per-frame times (u64 each) run the state
    stages exactly as one `process` call per frame does: same copies, same cells."""
    from switch.native_dataplane import pack, pack_times

    spec = SPECS[timed, 4]
    rules, c = compiled(spec, lines)
    one, packed, classified = (load(c.pipeline, c.entries, impl="native") for _ in range(3))
    times = [ts for ts, _, _, _ in frames]
    buf, lengths = pack([f for _, _, _, f in frames])
    want = [one.process(f, 0, ts) for ts, _, _, f in frames]
    assert packed.process_batch([f for _, _, _, f in frames], 0, times) == want
    classified.classify_packed(buf, lengths, 0, pack_times(times))
    assert cells(classified, c) == cells(packed, c) == cells(one, c)
    # classify_packed is the walk and the state stages: no IPv4 forwarding, no egress
    walk = set(c.pipeline.tables) - {c.pipeline.ipv4_table, c.pipeline.egress_table}
    assert {k: v for k, v in classified.counters()["tables"].items() if k in walk} == \
        {k: v for k, v in one.counters()["tables"].items() if k in walk}


def order_frame(orders: list[bytes], seq: int = 100) -> bytes:
    return itch_frame(orders, seq=seq)


FIG4 = ITCH + """
@pragma query_counter(my_counter, 100, 1024)
@pragma query_average(itch_order.price, 1000000, 64)
"""


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_fig4_counter_and_the_slides_average_rule(impl):
    """The paper's Fig. 4 spec (`query_counter(my_counter, 100, 1024)`) and the slides'
    `stock == "GOOGL" and avg(price) > 50`, by hand: the average covers the message being
    tested (scoped), the counter's 100 µs windows follow the frames' times."""
    spec = parse_spec(FIG4, name="itch")
    rules = parse_rules('stock == "GOOGL" and avg(price) > 50 : fwd(1)\n'
                        "my_counter > 2 : fwd(2)", spec)
    c = compile_rules(spec, rules)
    dp = load(c.pipeline, c.entries, impl=impl)

    def ports(ts, orders):
        return copied_ports(dp.process(order_frame(orders), 0, ts), 100, len(orders))

    assert ports(0, [order("GOOGL", 40)]) == [set()]                    # avg 40, count 1
    assert ports(10, [order("GOOGL", 70)]) == [{1}]                     # avg 55, count 2
    assert ports(20, [order("GOOGL", 30), order("MSFT", 999)]) == [{2}, {2}]  # 46.6; 3, 4
    assert ports(99, [order("GOOGL", 95)]) == [{1, 2}]                  # avg 58.75; 5
    assert ports(100, [order("AAPL", 1)] * 3) == [set(), set(), {2}]    # a new window
    assert ports(2_000_000, [order("GOOGL", 51)]) == [{1}]              # a new average window


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_saturation_is_whole(impl):
    """An addition that would take n past 2^32 - 1 (or an average's s past 2^64 - 1) is not
    made at all; cells preset through `write_cell` (a packet stream could not get there)."""
    from pipeline.interpreter import pack_cell

    spec = parse_spec(FIG4, name="itch")
    rules = parse_rules("my_counter >= 4294967295 : fwd(1)\n"
                        "avg(price) >= 4294967295 : fwd(2)", spec)
    c = compile_rules(spec, rules)
    dp = load(c.pipeline, c.entries, impl=impl)
    where = {i["state"]: i for i in c.entries["state_instances"]}
    app = c.pipeline.applications[0].state
    counter, average = (next(v for v in app.vars if v.name == n)
                        for n in ("my_counter", "avg(itch_order.price)"))
    creg, cbase = counter.registers[where["my_counter"]["bank"]], where["my_counter"]["base"]
    areg = average.registers[where["avg(itch_order.price)"]["bank"]]
    abase = where["avg(itch_order.price)"]["base"]
    n_max, s_max = 2 ** 32 - 1, 2 ** 64 - 1
    dp.write_cell(creg, cbase, pack_cell(counter, 0, n_max - 1, 0))
    # n + 1 fits but s + 7 does not: neither is added (the average stays above 2^32 - 1)
    dp.write_cell(areg, abase, pack_cell(average, 0, n_max - 1, s_max - 4))
    outs = [copied_ports(dp.process(order_frame([order("GOOGL", 7)]), 0, t), 100, 1)[0]
            for t in (1, 2, 3)]
    # the counter reaches its maximum at the first message and stays there
    assert outs == [{1, 2}, {1, 2}, {1, 2}]
    assert dp.read_cell(creg, cbase) == pack_cell(counter, 0, n_max, 0)
    assert dp.read_cell(areg, abase) == pack_cell(average, 0, n_max - 1, s_max - 4)
    # a new window starts from zero: the additions are made again
    dp.process(order_frame([order("GOOGL", 7)]), 0, 2_000_000)
    assert dp.read_cell(areg, abase) == pack_cell(average, 2, 1, 7)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_registers_refuse_bad_cells(impl):
    spec = parse_spec(FIG4, name="itch")
    c = compile_rules(spec, parse_rules("my_counter > 2 : fwd(2)", spec))
    dp = load(c.pipeline, c.entries, impl=impl)
    reg = c.pipeline.applications[0].state.vars[0].registers[0]
    for bad in (lambda: dp.read_cell("nope", 0), lambda: dp.read_cell(reg, 1024),
                lambda: dp.reset_cells((reg, 1000, 25)), lambda: dp.write_cell(reg, 0, 1 << 80),
                lambda: dp.write_cell(reg, -1, 0)):
        with pytest.raises(EntryError):
            bad()


def test_without_a_time_the_native_switch_reads_the_real_time_clock():
    """A frame given no time (live input) is stamped with the real-time clock in µs since
    the epoch: the cell's window tag lies between the clock's readings around the call."""
    spec = parse_spec(FIG4, name="itch")
    c = compile_rules(spec, parse_rules("my_counter > 2 : fwd(2)", spec))
    dp = load(c.pipeline, c.entries, impl="native")
    inst, = c.entries["state_instances"]
    reg = c.pipeline.applications[0].state.vars[0].registers[inst["bank"]]
    before = time.time_ns() // 1000 % 2 ** 48 // 100
    dp.process(order_frame([order("MSFT", 1)]), 0)
    after = time.time_ns() // 1000 % 2 ** 48 // 100
    tag = dp.read_cell(reg, inst["base"]) >> 32
    assert before <= tag <= after


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_camus_switch_run_times_frames_by_their_pcap_records(impl, tmp_path):
    """`camus switch run` gives every frame its pcap record's time (µs and ns captures):
    windows follow the capture, on either data plane."""
    from camus.cli import main as camus_main
    from compiler.compile import write_outputs
    from switch.pcap import Record, read_pcap, write_pcap

    spec = parse_spec(FIG4, name="itch")
    rules = parse_rules("my_counter > 1 : fwd(2)", spec)
    write_outputs(compile_rules(spec, rules), tmp_path / "out")
    times = [(0, 10), (0, 50), (0, 99), (0, 100), (0, 150), (1, 0), (1, 30)]  # (s, µs)
    for ns in (False, True):
        records = [Record(s, us * 1000 if ns else us, order_frame([order("MSFT", 1)], seq=100 + i))
                   for i, (s, us) in enumerate(times)]
        write_pcap(str(tmp_path / "in.pcap"), records, nanoseconds=ns)
        out = tmp_path / f"pcaps-{ns}"
        assert camus_main(["switch", "run", "--pipeline", str(tmp_path / "out"), "--pcap-in",
                           str(tmp_path / "in.pcap"), "--out-dir", str(out), "--impl", impl]) == 0
        got = [read_mold(read_udp(r.data).payload)[1] - 100 for r in read_pcap(str(out / "port-2.pcap"))]
        assert got == [1, 2, 4, 6]


# Single framing: one message per datagram, which may run past the message's 4 bytes (a
# bytes meter adds the UDP payload's length), or fall short of them (not a subscription
# message). Windows of a few µs; a keyed counter and meter.
FLAT = """
header m { bit<8> k; bit<8> a; bit<16> b; }
@pragma udp_port(5555)
@pragma query_field_exact(m.k)
@pragma query_field(m.a)
@pragma query_field(m.b)
@pragma query_counter(c, 10, 256)
@pragma query_counter(ck, 7, 256, m.k, 4)
@pragma query_average(m.a, 20, 256)
@pragma query_meter(mp, packets, 50, 256, m.k, 2)
@pragma query_meter(mb, bytes, 30, 256)
"""
FLAT_SPEC = parse_spec(FLAT, name="flat")
FLAT_STATE = {"c": [0, 1, 2, 3], "ck": [0, 1, 2], "avg(a)": [0, 1, 2, 100, 255],
              "rate(mp)": [0, 19999, 20000, 40000], "rate(mb)": [0, 133333, 133334, 400000, 2000000]}
flat_atoms = st.one_of(
    st.builds(lambda op, k: f"k {op} {k}", st.sampled_from(["==", "!="]), st.integers(0, 3)),
    st.builds(lambda f, op, x: f"{f} {op} {x}", st.sampled_from(["a", "b"]), st.sampled_from(OPS),
              st.sampled_from([0, 1, 2, 100, 255])),
    st.sampled_from(sorted(FLAT_STATE)).flatmap(
        lambda name: st.builds(lambda op, x: f"{name} {op} {x}", st.sampled_from(OPS),
                               st.sampled_from(FLAT_STATE[name]))),
)
flat_filters = st.recursive(flat_atoms, lambda sub: st.one_of(
    st.builds(lambda a, b: f"({a} and {b})", sub, sub), st.builds(lambda a, b: f"({a} or {b})", sub, sub),
    st.builds(lambda a: f"not {a}", sub)), max_leaves=3)


def flat_rule(f: str, ports: set[int], updates: list[str]) -> str:
    actions = ([f"fwd({', '.join(map(str, sorted(ports)))})"] if ports else []) + updates
    return f"{f} : {', '.join(actions or ['fwd(1)'])}"


flat_rules = st.lists(st.builds(
    flat_rule, flat_filters, st.sets(st.integers(1, 4), max_size=2),
    st.lists(st.sampled_from(["count(c)", "count(ck)", "avg(a)", "meter(mp)", "meter(mb)"]),
             unique=True, max_size=2)), min_size=1, max_size=4)
flat_payloads = st.one_of(
    st.builds(lambda k, a, b, extra: struct.pack("!BBH", k, a, b) + bytes(extra), st.integers(0, 3),
              st.sampled_from([0, 1, 2, 100, 255]), st.sampled_from([0, 1, 65535]), st.integers(0, 40)),
    st.binary(max_size=3),  # shorter than a message
)
flat_cuts = st.one_of(st.none(), st.none(), st.none(), st.integers(0, 40))  # None: whole


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.filter_too_much])
@given(lines=flat_rules, payloads=st.lists(st.tuples(steps, flat_payloads, flat_cuts), min_size=1,
                                            max_size=16))
def test_single_framing_with_message_lengths(lines, payloads):
    """One message per datagram: both data planes and the Evaluator agree, a bytes meter
    adding each datagram's payload length; frames cut short are dropped and touch nothing."""
    rules, c = compiled(FLAT_SPEC, lines)
    planes = {impl: load(c.pipeline, c.entries, impl=impl) for impl in IMPLEMENTATIONS}
    ev = Evaluator(rules)
    ts = 0
    for step, payload, cut in payloads:
        ts = max(0, ts + step)
        frame = udp_frame(payload, dst_port=5555)
        whole = cut is None or cut >= len(frame)
        out = process_all(planes, frame if whole else frame[:cut], ts)
        if not whole or len(payload) < 4:
            assert out == []
            continue
        k, a, b = struct.unpack_from("!BBH", payload)
        want = ev.packet(Packet(ts, {"m.k": k, "m.a": a, "m.b": b}, len(payload)))
        assert {p for p, _ in out} == want
        for _, copy in out:
            assert read_udp(copy).payload == payload
    assert planes["native"].counters() == planes["python"].counters()
    assert cells(planes["native"], c) == cells(planes["python"], c)


@pytest.mark.parametrize("banks", [4, 16])
def test_contexts_with_many_region_combinations(banks):
    """Three rules in one scope, each cutting the same counter at eight thresholds: 9^3 = 729
    region combinations in one context, more than the native switch keeps in a dense table
    (256), so its decisions are searched by key; with a fourth rule on another state and
    16 banks, the regions take more than one 64-bit word of the decide key."""
    spec = parse_spec(FLAT + f"@pragma query_banks({banks})\n", name="flat")
    text = ("c == 1 or c == 3 or c == 5 or c == 7 : fwd(1)\n"
            "c == 2 or c == 4 or c == 6 or c == 8 : fwd(2)\n"
            "c in {1, 2, 5, 6} or c >= 9 : fwd(3)\n"
            "avg(a) > 2 : fwd(4)\n")
    rules = parse_rules(text, spec)
    c = compile_rules(spec, rules)
    planes = {impl: load(c.pipeline, c.entries, impl=impl) for impl in IMPLEMENTATIONS}
    ev = Evaluator(rules)
    for i in range(24):
        ts, a = 5 * i, (0, 7)[i % 2]
        payload = struct.pack("!BBH", 1, a, 0)
        out = process_all(planes, udp_frame(payload, dst_port=5555), ts)
        assert {p for p, _ in out} == ev.packet(Packet(ts, {"m.k": 1, "m.a": a, "m.b": 0}, 4))
    assert planes["native"].counters() == planes["python"].counters()
