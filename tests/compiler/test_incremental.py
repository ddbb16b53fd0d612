"""Incremental compilation (issue 16 item 2) against from-scratch compiles and the reference.

After every change: the incremental document equals a from-scratch `compile_rules` of the
current rules, the writes of each `Step` applied to the document before give the document
after, and the tables agree with `compiler.semantics` on random and boundary messages.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.ast import Rule
from compiler.compile import compile_rules
from compiler.errors import CamusError
from compiler.id_space import IdSpace
from compiler.incremental import Incremental
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import parse_spec
from compiler.tables import stable_ids
from p4rt.entry_key import entry_key
from pipeline import interpreter

from .gen import random_message, random_rules, random_spec


def apply_step(doc: dict, step) -> dict:
    """The document a target holding `doc` holds after the writes of `step`."""
    entries = {entry_key(e): e for e in doc["table_entries"]}
    for e in step.delete:
        del entries[entry_key(e)]
    for e in step.insert:
        assert entry_key(e) not in entries
        entries[entry_key(e)] = e
    for e in step.modify:
        assert entry_key(e) in entries
        entries[entry_key(e)] = e
    groups = {g["id"]: tuple((r["port"], r["rid"]) for r in g["replicas"])
              for g in doc["multicast_groups"]}
    for gid in step.delete_groups:
        del groups[gid]
    groups.update(step.set_groups)
    return {"entries": entries, "groups": groups}


def as_target(doc: dict) -> dict:
    return apply_step(doc, type("NoStep", (), {"delete": [], "insert": [], "modify": [],
                                               "delete_groups": [], "set_groups": {}})())


def run_changes(seed: int, n_rules: int, n_changes: int, static: bool = False,
                permute: bool = False, n_messages: int = 40, regroup: bool = False) -> None:
    """`regroup`: half the changes give a current rule's filter another port set, removing
    the rule and adding the new one in one `change` (what a network switch does when a
    filter appears on or leaves one of its ports)."""
    rng = random.Random(seed)
    spec, gens = random_spec(rng)
    pool = parse_rules(random_rules(rng, gens, n_rules + n_changes), spec)
    order = None
    if permute:
        order = [g.qname for g in gens]
        rng.shuffle(order)
    current = pool[:n_rules]
    inc = Incremental(spec, current, order, static=static)
    assert inc.entries() == compile_rules(spec, current, order, static=static).entries
    target = as_target(inc.entries())
    pipeline = inc.pipeline
    for i in range(n_changes):
        if regroup and current and rng.random() < 0.5:
            old = current.pop(rng.randrange(len(current)))
            ports = frozenset(rng.sample(range(1, 13), rng.randint(1, 3)))
            rule = Rule(old.filter, ports, old.line, old.text)
            current.append(rule)
            step = inc.change([rule], [old])
        elif current and rng.random() < 0.4:
            rule = current.pop(rng.randrange(len(current)))
            step = inc.remove(rule)
        else:
            rule = pool[n_rules + i] if rng.random() < 0.8 else rng.choice(pool)
            current.append(rule)
            step = inc.add(rule)
        c = compile_rules(spec, current, order, static=static)
        doc = inc.entries()
        assert doc == c.entries, (seed, i)
        if not step.rebuilt:  # the pipeline is the same: the writes take the target there
            target = apply_step({"table_entries": list(target["entries"].values()),
                                 "multicast_groups": [
                                     {"id": g, "replicas": [{"port": p, "rid": r}
                                                            for p, r in reps]}
                                     for g, reps in target["groups"].items()]}, step)
            assert target == as_target(doc), (seed, i)
            # The program changes only with the state ids' or port bitmaps' width.
            assert step.resized or inc.pipeline == pipeline, (seed, i)
            assert not (static and step.resized), (seed, i)
        else:  # only when the field order or a match kind changes, which changes the program
            assert not static and inc.pipeline != pipeline, (seed, i)
            target = as_target(doc)
        assert inc.pipeline == c.pipeline
        pipeline = c.pipeline
        tables = interpreter.load(inc.pipeline, doc)
        for _ in range(n_messages):
            msg = random_message(rng, gens)
            assert tables.ports(c.application, msg) == evaluate(current, msg), (seed, i, msg)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(0, 10), n_changes=st.integers(1, 8))
def test_small_changes_match_scratch(seed, n_rules, n_changes):
    run_changes(seed, n_rules, n_changes)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(20, 80),
       n_changes=st.integers(5, 20))
def test_larger_rule_sets_match_scratch(seed, n_rules, n_changes):
    run_changes(seed, n_rules, n_changes, n_messages=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(0, 20), n_changes=st.integers(1, 8),
       permute=st.booleans())
def test_static_and_fixed_orders_never_rebuild(seed, n_rules, n_changes, permute):
    run_changes(seed, n_rules, n_changes, static=True, permute=permute)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_rules=st.integers(1, 25), n_changes=st.integers(1, 10),
       static=st.booleans())
def test_a_filter_moving_ports_in_one_change_matches_scratch(seed, n_rules, n_changes, static):
    run_changes(seed, n_rules, n_changes, static=static, regroup=True)


def test_itch_shape_one_change_writes_little():
    """The workload's shape: one rule's change touches its symbol, not the rule set."""
    spec = parse_spec(open("p4/itch/itch.p4").read(), name="itch")
    rng = random.Random(5)
    text = "\n".join(f'stock == "S{rng.randrange(20):02d}" and price > {rng.randint(1, 99)} '
                     f": fwd({rng.randint(1, 30)})" for _ in range(2000))
    rules = parse_rules(text, spec)
    inc = Incremental(spec, rules)
    before = len(inc.entries()["table_entries"])
    (extra,) = parse_rules('stock == "S03" and price > 50 : fwd(31)', spec)
    step = inc.add(extra)
    assert not step.rebuilt and 0 < len(step) < before / 4
    assert inc.entries() == compile_rules(spec, rules + [extra]).entries
    step = inc.remove(extra)
    assert inc.entries() == compile_rules(spec, rules).entries


def test_the_start_state_moving_to_a_later_stage_drops_its_old_stage_entries():
    """Removing the only rule on the first field moves the start state's split to the next
    stage with the same default successor: its default entry must move to that stage's table
    (found by a network test: the old stage's entry stayed)."""
    spec = parse_spec(open("p4/itch/itch.p4").read(), name="itch")
    a, b, c = parse_rules('price <= 1000 : fwd(2)\nstock != "IBM" : fwd(2)\n'
                          'price != 5000 : fwd(2)\n', spec)
    for static in (True, False):
        inc = Incremental(spec, [a, b, c], static=static)
        target = as_target(inc.entries())
        step = inc.remove(b)
        doc = inc.entries()
        assert doc == compile_rules(spec, [a, c], static=static).entries
        if not step.rebuilt:
            assert apply_step({"table_entries": list(target["entries"].values()),
                               "multicast_groups": doc["multicast_groups"]}, step) == as_target(doc)


def test_removing_an_absent_rule_is_refused_and_changes_nothing():
    spec = parse_spec(open("p4/itch/itch.p4").read(), name="itch")
    rules = parse_rules('stock == "A" and price > 5 : fwd(1)', spec)
    inc = Incremental(spec, rules)
    before = inc.entries()
    (other,) = parse_rules('stock == "B" : fwd(1)', spec)
    with pytest.raises(CamusError, match="no such rule"):
        inc.change([rules[0]], [other])
    assert inc.entries() == before


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text("abcdef", min_size=1, max_size=4), unique=True, max_size=40),
       data=st.data())
def test_id_space_matches_stable_ids(texts, data):
    """Ids in a tiny space (many collisions, wrap-around) equal stable_ids after any batch."""
    space = IdSpace(5, [31])
    present: dict[str, str] = {}
    for _ in range(data.draw(st.integers(1, 6))):
        removed = data.draw(st.lists(st.sampled_from(sorted(present)), unique=True)) \
            if present else []
        fresh = [t for t in texts if t not in present]
        added = data.draw(st.lists(st.sampled_from(fresh), unique=True, max_size=29 - len(present)
                                   + len(removed))) if fresh else []
        for k in removed:
            del present[k]
        present.update({k: k for k in added})
        space.update({k: k for k in added}, removed)
        want = stable_ids(present, 5, {"reserved": 31})
        del want["reserved"]
        assert space.slot == want


def test_state_ids_widen_and_narrow_with_the_number_of_states():
    """Crossing 255 states widens a compile's state ids from 16 to 24 bits (tables.state_bits):
    every id is derived again, and the document and pipeline still equal a scratch compile's;
    the static pipeline keeps its 32 bits throughout."""
    spec = parse_spec(open("p4/itch/itch.p4").read(), name="itch")
    text = "\n".join(f'stock == "S{i:03d}" and price > {i + 1} : fwd({i % 7 + 1}, {i % 5 + 9})'
                     for i in range(230))
    rules = parse_rules(text, spec)
    for static in (False, True):
        inc = Incremental(spec, rules[:210], static=static)
        widths, resized = set(), []
        for n in [*range(211, 231), *range(229, 209, -1)]:  # 218 rules make 256 states
            step = inc.add(rules[n - 1]) if len(inc.current_rules()) < n else inc.remove(rules[n])
            c = compile_rules(spec, rules[:n], static=static)
            assert inc.entries() == c.entries and inc.pipeline == c.pipeline, (static, n)
            widths.add(c.pipeline.state_width)
            resized.append(step.resized)
        assert widths == ({32} if static else {16, 24}), widths
        assert sum(resized) == (0 if static else 2)
        tables = interpreter.load(inc.pipeline, inc.entries())
        for stock in ("S005", "S010", "S209", "NOPE"):
            for price in (3, 11, 50, 300):
                m = {"stock": stock, "price": price, "shares": 0, "buy_sell_indicator": "B"}
                msg = {f"itch_order.{k}": spec.resolve(k).encode(v) for k, v in m.items()}
                assert tables.ports(c.application, msg) == evaluate(rules[:210], msg), m


def test_the_group_follows_the_ports_the_rules_name():
    """One group per application; its replicas change when a port is first or last named,
    and it goes when no rule names a port."""
    spec = parse_spec(open("p4/itch/itch.p4").read(), name="itch")
    a, b, c = parse_rules('stock == "A" : fwd(1, 2)\nstock == "B" : fwd(3)\n'
                          'price > 5 : fwd(2, 40)', spec)
    inc = Incremental(spec, [a])
    gid = inc.pipeline.applications[0].multicast_group
    for rule, sign, ports in [(b, 1, (1, 2, 3)), (c, 1, (1, 2, 3, 40)), (a, -1, (2, 3, 40)),
                              (b, -1, (2, 40)), (c, -1, ())]:
        current = inc.current_rules()
        step = inc.add(rule) if sign > 0 else inc.remove(rule)
        current = [r for r in current if r is not rule] if sign < 0 else current + [rule]
        scratch = compile_rules(spec, current)
        assert inc.entries() == scratch.entries and inc.pipeline == scratch.pipeline
        if ports:
            assert step.set_groups == {gid: tuple((p, 0) for p in ports)}
        else:
            assert step.delete_groups == [gid] and not inc.entries()["multicast_groups"]
