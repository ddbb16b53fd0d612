"""`camus serve --max-entries`: past the budget the switch holds an approximated superset and
every view re-checks what it receives (shim.approximation, issue 16 item 4).

A broker with a small entry budget gets more range views than fit; the log says it switched
to an approximation, the metrics show the α in use, the entries within the budget, and the
records dropped as false positives. Consumers (confluent-kafka and kafka-python) of the views
receive exactly the records that `compiler.semantics` says each view's filter selects out of
everything produced. Deleting views brings the exact rules under the budget: the log says so
and the α is gone.
"""

from __future__ import annotations

import json
import random
import re
import time
import urllib.request

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from compiler.semantics import holds  # noqa: E402
from shim.approximation import SLOT_NAMES  # noqa: E402
from shim.schema import parse_schema  # noqa: E402
from shim.subscriptions import kafka_spec, view_filter  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402

SCHEMA = "price:u32=$.price,qty:u32=$.qty"
BUDGET = 40


def scrape(url: str) -> str:
    return urllib.request.urlopen(url, timeout=10).read().decode()


def metric(text: str, name: str, **labels) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    m = re.search(rf"^{name}{{{re.escape(want)}}} (\S+)$" if labels else rf"^{name} (\S+)$",
                  text, re.M)
    return float(m.group(1)) if m else None


def test_views_over_the_budget_get_exactly_their_records(camus_server):
    server = camus_server(extra=["--max-entries", str(BUDGET), "--metrics", "127.0.0.1:0"])
    m = wait_until(lambda: re.search(r"metrics on (http://[\d.]+:\d+/metrics)", server.stderr()))
    assert m, server.stderr()
    url = m.group(1)
    rng = random.Random(16)
    src = unique("alpha-src")
    create(server.bootstrap, NewTopic(src, 2, 1, config={"camus.schema": SCHEMA}))
    filters = {unique(f"alpha-v{i}"): f"price > {rng.randrange(10_000)} and "
                                      f"qty < {rng.randrange(10_000)}" for i in range(12)}
    filters[unique("alpha-eq")] = "price == 4242"  # equalities are never rounded
    create(server.bootstrap, *(NewTopic(v, config={"camus.source": src, "camus.filter": f})
                               for v, f in filters.items()))
    assert wait_until(lambda: "now holds a superset approximated with alpha" in server.stderr(),
                      30), server.stderr()

    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    docs = [{"price": rng.randrange(11_000), "qty": rng.randrange(11_000)} for _ in range(600)]
    docs += [{"price": 4242, "qty": 1}, {"price": 4243, "qty": 1}]
    for i, d in enumerate(docs):
        p.produce(src, json.dumps(d).encode(), partition=i % 2)
    assert p.flush(15) == 0

    spec, schema = kafka_spec(), parse_schema(SCHEMA)
    expected = {}
    for view, text in filters.items():
        f = view_filter(spec, schema, text)
        expected[view] = sorted(json.dumps(d) for d in docs
                                if holds(f, dict(zip(SLOT_NAMES, [d["price"], d["qty"]]))))
    views = list(filters)
    # confluent-kafka: one consumer of most views, polled until it has what they should hold
    # and then a while longer (anything extra would come with the rest).
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": unique("g"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(views[:-3])
    got: dict[str, list[str]] = {v: [] for v in views[:-3]}
    total = sum(len(expected[v]) for v in views[:-3])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got[msg.topic()].append(msg.value().decode())
            if sum(map(len, got.values())) == total:
                deadline = min(deadline, time.monotonic() + 2)
    finally:
        c.close()
    for view in views[:-3]:
        assert sorted(got[view]) == expected[view], view
    from kafka import KafkaConsumer

    for view in views[-3:]:  # kafka-python
        c = KafkaConsumer(view, bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                          group_id=unique("g"), enable_auto_commit=False,
                          consumer_timeout_ms=3000)
        try:
            received = sorted(r.value.decode() for r in c)
        finally:
            c.close()
        assert received == expected[view], view

    text = scrape(url)
    assert metric(text, "camus_switch_entry_budget") == BUDGET
    assert 0 < metric(text, "camus_switch_entries") <= BUDGET
    alphas = re.findall(r'^camus_switch_alpha\{field="(kafka\.slot\d)"\} (\S+)$', text, re.M)
    assert alphas and all(float(a) >= 10 for _, a in alphas), text
    assert metric(text, "camus_switch_approximations_total") == 1
    dropped_total = 0
    for view in views:
        checked = metric(text, "camus_edge_rechecked_total", view=view)
        dropped = metric(text, "camus_edge_false_positives_total", view=view)
        if view.startswith("alpha-eq"):  # its rule is exact on the switch: nothing re-checked
            assert (checked, dropped) == (0, 0)
            continue
        # What the switch delivered, less what the edge dropped, is what the view holds.
        assert checked - dropped == len(expected[view]), view
        dropped_total += dropped
    assert dropped_total > 0

    # Down to two views: the exact rules fit again.
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for fut in admin.delete_topics(views[2:-1], operation_timeout=10).values():
        fut.result(10)
    assert wait_until(lambda: "fit the budget of 40 entries again" in server.stderr(), 30), \
        server.stderr()
    text = scrape(url)
    assert not re.search(r"^camus_switch_alpha\{", text, re.M)
    p.produce(src, json.dumps({"price": 9_999, "qty": 0}).encode(), partition=0)
    assert p.flush(10) == 0
    first = views[0]
    f = view_filter(spec, schema, filters[first])
    more = holds(f, dict(zip(SLOT_NAMES, [9_999, 0])))
    got = consume(server.bootstrap, first, len(expected[first]) + 2, timeout=5)
    assert len(got) == len(expected[first]) + more


def test_a_negative_budget_is_refused_in_one_line():
    import subprocess
    import sys

    from .conftest import REPO

    done = subprocess.run([sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0",
                           "--max-entries", "-1"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == "camus serve: --max-entries -1: expected 0 (no budget) or more"
