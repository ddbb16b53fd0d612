"""The stateful evaluator against a brute-force model written from docs/stateful.md alone.

The model shares nothing with `compiler.semantics.Evaluator` but the stateless definition
(`holds` on a field predicate): it keeps, per rule, the *history* of updates rather than
mutable cells, and gets an instance's value by folding the run of updates of the current
window at the end of that history; it computes averages and rates as exact fractions
instead of cross-multiplying; buckets are low bits, not a remainder; scope is Kleene logic
on the numbers 0, 1/2, 1. Random rule sets (parsed from text, so the parser is in the
loop), random timed packets (with out-of-order timestamps and window crossings) and random
rule changes between packets.
"""

from __future__ import annotations

import random
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.ast import And, Const, Not, Or, StateAtom, rule_state
from compiler.rules import parse_rules
from compiler.semantics import Evaluator, Packet, evaluate, holds
from compiler.spec import parse_spec

from .gen import random_message, random_rules, random_spec

SPEC_TEXT = """\
header m { bit<8> k; bit<8> a; bit<16> b; }
@pragma query_field_exact(m.k)
@pragma query_field(m.a)
@pragma query_field(m.b)
@pragma query_counter(c, 10, 4096)
@pragma query_counter(ck, 7, 4096, m.k, 4)
@pragma query_average(m.a, 20, 4096)
@pragma query_meter(mp, packets, 50, 4096, m.k, 2)
@pragma query_meter(mb, bytes, 30, 4096)
"""
SPEC = parse_spec(SPEC_TEXT)

# state predicates, each with constants around the values it takes in a few packets
STATE_ATOMS = {
    "c": [0, 1, 2, 3, 5], "ck": [0, 1, 2, 3],
    "avg(a)": [0, 1, 2, 3, 100, 254, 255],
    "rate(mp)": [0, 19999, 20000, 40000, 60001],  # a packet per 50 µs is 20,000/s
    "rate(mb)": [0, 33333, 33334, 100000, 166666, 200000, 600000],
}
FIELD_ATOMS = {"a": [0, 1, 2, 3, 100, 255], "b": [0, 1, 7, 65535], "k": [0, 1, 2, 5]}
UPDATES = ["count(c)", "count(ck)", "avg(a)", "meter(mp)", "meter(mb)"]
OPS = ["==", "!=", "<", "<=", ">", ">="]
N_MAX, S_MAX = (1 << 32) - 1, (1 << 64) - 1


def random_filter(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 3 and r < 0.3:
        parts = [random_filter(rng, depth + 1) for _ in range(rng.randint(2, 3))]
        return "(" + f" {rng.choice(['and', 'or'])} ".join(parts) + ")"
    if depth < 3 and r < 0.4:
        return "not " + random_filter(rng, depth + 1)
    if r < 0.42:
        return rng.choice(["true", "false"])
    atoms = STATE_ATOMS if rng.random() < 0.55 else FIELD_ATOMS
    name = rng.choice(sorted(atoms))
    if name == "k":
        return f"k {rng.choice(['==', '!='])} {rng.choice(atoms[name])}"
    if rng.random() < 0.1:
        values = ", ".join(str(rng.choice(atoms[name])) for _ in range(rng.randint(0, 3)))
        return f"{name} {rng.choice(['in', 'not in'])} {{{values}}}"
    if rng.random() < 0.15:  # the constant first
        return f"{rng.choice(atoms[name])} {rng.choice(OPS)} {name}"
    return f"{name} {rng.choice(OPS)} {rng.choice(atoms[name])}"


def random_rule(rng: random.Random) -> str:
    actions = []
    ports = rng.sample(range(1, 5), rng.randint(0, 2))
    if ports or rng.random() < 0.5:
        actions.append(f"fwd({', '.join(map(str, ports or [1]))})")
    if rng.random() < 0.35 or not actions:
        actions += rng.sample(UPDATES, rng.randint(1, 2))
    rng.shuffle(actions)
    return f"{random_filter(rng)} : {', '.join(actions)}"


def random_packets(rng: random.Random, n: int) -> list[Packet]:
    ts, out = rng.randint(0, 100), []
    for _ in range(n):
        ts = max(0, ts + rng.choice([0, 0, 1, 3, 7, 10, 25, 60, -15]))
        values = {"m.k": rng.choice([0, 1, 2, 4, 5, 6]), "m.a": rng.choice([0, 1, 2, 3, 255]),
                  "m.b": rng.choice([0, 1, 7, 65535])}
        out.append(Packet(ts, values, rng.choice([None, None, 0, 1, 5, 100])))
    return out


class Model:
    """docs/stateful.md, brute force: per rule, the list of its updates so far."""

    def __init__(self):
        self.rules = {}  # handle -> (rule, [(state, bucket, window, dn, ds), ...])

    def value(self, history, var, bucket, window):
        run = []
        for rec in reversed(history):
            if rec[:2] != (var, bucket):
                continue
            if rec[2] != window:
                break
            run.append(rec)
        n = s = 0
        for *_, dn, ds in reversed(run):
            if n + dn <= N_MAX and s + ds <= S_MAX:
                n, s = n + dn, s + ds
        return n, s

    def packet(self, p: Packet) -> set[int]:
        out = set()
        for rule, history in self.rules.values():
            def record(var):
                bucket = p.values.get(var.key, 0) & (var.buckets - 1) if var.key else 0
                dn = 1
                if var.unit == "bytes":
                    dn = var.message_bytes if p.length is None else p.length
                ds = p.values.get(var.field, 0) if var.kind == "average" else 0
                history.append((var, bucket, p.ts_us // var.window_us, dn, ds))

            def read(atom):
                var = atom.state
                bucket = p.values.get(var.key, 0) & (var.buckets - 1) if var.key else 0
                n, s = self.value(history, var, bucket, p.ts_us // var.window_us)
                if var.kind == "counter":
                    x = Fraction(n)
                elif var.kind == "average":
                    x = Fraction(s, n) if n else Fraction(0)
                else:
                    x = Fraction(n * 1_000_000, var.window_us)
                return eval(f"x {atom.op} atom.value", {}, {"x": x, "atom": atom})

            scoped = [v for v in rule_state(rule) if v not in rule.updates]
            if scoped and kleene(rule.filter, p.values) > 0:
                for var in scoped:
                    record(var)
            if truth(rule.filter, p.values, read):
                out |= rule.ports
                for var in rule.updates:
                    record(var)
        return out


def kleene(f, values) -> Fraction:
    if isinstance(f, StateAtom):
        return Fraction(1, 2)
    if isinstance(f, And):
        return min(kleene(i, values) for i in f.items)
    if isinstance(f, Or):
        return max(kleene(i, values) for i in f.items)
    if isinstance(f, Not):
        return 1 - kleene(f.item, values)
    if isinstance(f, Const):
        return Fraction(int(f.value))
    return Fraction(int(holds(f, values)))


def truth(f, values, read) -> bool:
    if isinstance(f, StateAtom):
        return read(f)
    if isinstance(f, And):
        return all([truth(i, values, read) for i in f.items])  # every atom, no short cut
    if isinstance(f, Or):
        return any([truth(i, values, read) for i in f.items])
    if isinstance(f, Not):
        return not truth(f.item, values, read)
    return holds(f, values)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 6), n_packets=st.integers(1, 60))
def test_evaluator_equals_brute_force(seed, n_rules, n_packets):
    rng = random.Random(seed)
    pool = parse_rules("\n".join(random_rule(rng) for _ in range(n_rules + 3)), SPEC)
    ev, model = Evaluator(pool[:n_rules]), Model()
    for h, rule in enumerate(pool[:n_rules]):
        model.rules[h] = (rule, [])
    for i, p in enumerate(random_packets(rng, n_packets)):
        if rng.random() < 0.1:  # a rule change between packets
            if model.rules and rng.random() < 0.5:
                h = rng.choice(sorted(model.rules))
                assert ev.remove(h) is model.rules.pop(h)[0]
            else:
                rule = rng.choice(pool)
                model.rules[ev.add(rule)] = (rule, [])
        assert ev.packet(p) == model.packet(p), (seed, i, p)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 12))
def test_stateless_rules_mean_what_they_meant(seed, n_rules):
    # the Evaluator over timed packets gives `evaluate`'s answer for stateless rules,
    # whatever the times, and keeps no state for them
    rng = random.Random(seed)
    spec, gens = random_spec(rng)
    rules = parse_rules(random_rules(rng, gens, n_rules), spec)
    ev = Evaluator(rules)
    for _ in range(50):
        msg = random_message(rng, gens)
        assert ev.packet(Packet(rng.randint(0, 1 << 40), msg)) == evaluate(rules, msg)
    assert all(ev.instance(h, v) == (None, 0, 0) for h in ev.rules
               for v in SPEC.state_vars.values())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_replay_is_deterministic(seed):
    # timestamps, not the wall clock: the same sequence gives the same answers again
    rng = random.Random(seed)
    rules = parse_rules("\n".join(random_rule(rng) for _ in range(4)), SPEC)
    packets = random_packets(rng, 40)
    ev1, ev2 = Evaluator(rules), Evaluator(rules)
    assert [ev1.packet(p) for p in packets] == [ev2.packet(p) for p in packets]


def substituted(f, negated=False):
    """docs/stateful.md's second definition of scope: each state predicate becomes true
    under an even number of `not`s, false under an odd number (a stateless filter)."""
    if isinstance(f, StateAtom):
        return Const(not negated)
    if isinstance(f, (And, Or)):
        return type(f)(tuple(substituted(i, negated) for i in f.items))
    if isinstance(f, Not):
        return Not(substituted(f.item, not negated))
    return f


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_scope_two_definitions_agree(seed):
    # three-valued logic, and the substitution the compiler can put in the diagram
    rng = random.Random(seed)
    (rule,) = parse_rules(f"{random_filter(rng)} : fwd(1)", SPEC)
    for p in random_packets(rng, 20):
        assert (kleene(rule.filter, p.values) > 0) == holds(substituted(rule.filter), p.values)
