"""The Kafka mapping end to end through the compiler: schema, views, partitions -> tables."""

from __future__ import annotations

import json
import random

import pytest

from compiler.compile import compile_rules
from compiler.errors import RuleError
from shim.schema import parse_schema
from shim.subscriptions import Subscription, kafka_spec, rules_for, view_filter

SCHEMA = "stock:str8=$.stock,price:u32=$.price,side:str1=header:side"


def test_views_and_partitions_select_exactly_their_records():
    base = kafka_spec()
    schema = parse_schema(SCHEMA)
    views = {
        1: "price > 100 and side == \"B\"",
        2: "stock in {GOOGL, MSFT} or price <= 5",
        3: "not (side == S)",
    }
    subs = [Subscription(10, port, None, view_filter(base, schema, text))
            for port, text in views.items()]
    subs.append(Subscription(10, 4, frozenset({0, 2})))   # a group member: partitions 0 and 2
    subs.append(Subscription(11, 5))                      # another topic, everything
    c = compile_rules(base, rules_for(base, subs))
    tables = c.tables()

    def expected(topic, part, doc, side):
        out = set()
        if topic == 10:
            price, stock = doc.get("price", 0), doc.get("stock", "")
            if price > 100 and side == "B":
                out.add(1)
            if stock in ("GOOGL", "MSFT") or price <= 5:
                out.add(2)
            if side != "S":
                out.add(3)
            if part in (0, 2):
                out.add(4)
        elif topic == 11:
            out.add(5)
        return out

    rng = random.Random(3)
    for _ in range(500):
        topic, part = rng.choice([10, 11, 12]), rng.randint(0, 3)
        doc = {"stock": rng.choice(["GOOGL", "MSFT", "AAPL"]), "price": rng.choice([0, 5, 6, 100, 101, 2**32 - 1])}
        if rng.random() < 0.2:
            del doc["price"]
        side = rng.choice(["B", "S", None])
        slots = schema.extract(None, json.dumps(doc).encode(),
                               [("side", side.encode())] if side else [])
        values = {"kafka.topic_id": topic, "kafka.partition": part}
        values.update({f"kafka.slot{i}": v for i, v in enumerate(slots)})
        # A missing side header is spaces, which is neither "B" nor "S".
        assert tables.ports(c.application, values) == expected(topic, part, doc, side or " "), (topic, doc, side)


@pytest.mark.parametrize("text,col,words", [
    ("volume > 5", 1, "unknown field 'volume'"),
    ("price > 4294967296", 9, "does not fit in 32-bit"),
    ('side == "BB"', 9, "holds 1"),
    ("price >", 8, "expected a field or a constant"),
])
def test_bad_view_filters_fail_with_position(text, col, words):
    with pytest.raises(RuleError) as info:
        view_filter(kafka_spec(), parse_schema(SCHEMA), text)
    assert info.value.column == col and words in str(info.value)
    assert str(info.value).startswith(f"camus.filter:1:{col}:")
