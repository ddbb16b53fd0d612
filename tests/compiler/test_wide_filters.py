"""Wide filters (issue 16 item 7): an `or` of many two-field clauses over varying pairs of the
Kafka header's eight slots, one action. Port by port, residuals that test one last field
merge into one interval set, so the diagram stays the size of the function, not of the
combinations of clauses; the tables agree with the reference evaluator on values at every
constant."""

from __future__ import annotations

import random

from compiler.compile import compile_rules
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import load_spec

from .test_cli import ROOT


def test_an_or_of_many_two_slot_clauses_stays_small_and_right():
    spec = load_spec(ROOT / "p4/kafka/kafka.p4")
    rng = random.Random(4)
    clauses, consts = [], {i: {0} for i in range(8)}
    for _ in range(300):
        i, j = rng.sample(range(8), 2)
        x, y = rng.randrange(1000), rng.randrange(1000)
        consts[i].add(x)
        consts[j].add(y)
        clauses.append(f"(kafka.slot{i} > {x} and kafka.slot{j} < {y})")
    rules = parse_rules("kafka.topic_id == 7 and (" + " or ".join(clauses) + ") : fwd(1)\n"
                        "kafka.slot3 > 500 and kafka.slot5 < 20 : fwd(2)", spec)
    c = compile_rules(spec, rules, static=True)
    assert c.stats["states"] < 200, c.stats
    tables = c.tables()
    for _ in range(3000):
        msg = {name: 0 for name in spec.query_fields}
        msg["kafka.topic_id"] = rng.choice((7, 7, 7, 8))
        for i in range(8):
            msg[f"kafka.slot{i}"] = max(0, rng.choice(sorted(consts[i])) + rng.choice((-1, 0, 1)))
        assert tables.ports(c.application, msg) == evaluate(rules, msg), msg
