"""A view change costs work for that view, not for every subscription (issue 16 item 2).

Many views over many source topics are created through AdminClient over real sockets; then
one more view is created. The broker hands only the changed endpoint to the incremental
compiler, and the writes it makes touch that view's topic alone: far fewer than the entries
on the switch. The switch then holds exactly what a from-scratch compile of all the
subscriptions gives, and the new view delivers exactly its matching records to a real
consumer.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from compiler.compile import compile_rules  # noqa: E402
from shim.subscriptions import rules_for  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402


def settled(broker) -> bool:
    dp = broker.datapath
    return not dp._dirty and not dp._compiling


def test_one_more_view_writes_its_own_entries_only(inprocess):
    b = inprocess.broker
    schema = {"camus.schema": "price:u32=$.price,qty:u32=$.qty"}
    sources = [unique(f"inc{i}") for i in range(10)]
    create(inprocess.bootstrap, *(NewTopic(s, 1, 1, config=schema) for s in sources))
    views = []
    for i, src in enumerate(sources):
        for j in range(3):
            name = unique(f"inc{i}-v{j}")
            views.append(NewTopic(name, config={
                "camus.source": src,
                "camus.filter": f"price > {100 * j + i} and qty < {1000 - 50 * j - i}"}))
    create(inprocess.bootstrap, *views)
    assert wait_until(lambda: settled(b), 30)
    dp = b.datapath
    total = len(dp.target.entries())
    writes, syncs = dp.stats.writes, dp.stats.syncs

    view = unique("inc-new")
    create(inprocess.bootstrap, NewTopic(view, config={
        "camus.source": sources[0], "camus.filter": "price > 250 and price < 300"}))
    assert wait_until(lambda: settled(b) and dp.stats.syncs > syncs, 30)
    written = dp.stats.writes - writes
    assert 0 < written and written * 5 < total, (written, total)

    # The switch holds what compiling every subscription from scratch gives.
    subs = sorted(dp.subscriptions.values(), key=lambda s: s.port)
    scratch = compile_rules(dp.spec, rules_for(dp.spec, subs), static=True).entries
    on_switch = sorted(json.dumps(e, sort_keys=True) for e in dp.target.entries())
    assert on_switch == sorted(json.dumps(e, sort_keys=True) for e in scratch["table_entries"])

    p = Producer({"bootstrap.servers": inprocess.bootstrap, "linger.ms": 0})
    prices = [240, 251, 260, 299, 300, 1000]
    for price in prices:
        p.produce(sources[0], json.dumps({"price": price, "qty": 5}).encode())
    assert p.flush(10) == 0
    got = consume(inprocess.bootstrap, view, 3, timeout=15)
    assert sorted(json.loads(m.value())["price"] for m in got) == [251, 260, 299]
    assert len(consume(inprocess.bootstrap, view, 4, timeout=3)) == 3  # and nothing else
