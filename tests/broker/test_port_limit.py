"""The switch has 509 ports for endpoints (views, consumer group members' topics).

Before, the broker handed out ports past them: the 510th view took the port that keeps
records from going back into a network (LOCAL_INGRESS), the 512th one v1model cannot name,
and from there a compile failed on the worker and every later view stayed empty. Now a view
that finds no free port is refused at CreateTopics (POLICY_VIOLATION, saying why), and a
member's topic goes without a port (a port only mirrors what the member reads through Fetch).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from shim.datapath import LAST_ENDPOINT  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import consume  # noqa: E402


def _create(admin: AdminClient, topics: list[NewTopic]) -> dict[str, Exception | None]:
    out = {}
    for name, fut in admin.create_topics(topics, operation_timeout=60).items():
        try:
            fut.result(120)
            out[name] = None
        except Exception as exc:  # noqa: BLE001 - the KafkaException is what we look at
            out[name] = exc
    return out


def test_a_view_past_the_last_port_is_refused_and_a_freed_port_serves_again(inprocess):
    bootstrap = inprocess.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120000})
    src = unique("ports")
    assert _create(admin, [NewTopic(src, 1, 1, config={"camus.schema": "n:u16=$.n"})]) == {src: None}
    views = [f"{src}-v{i}" for i in range(LAST_ENDPOINT)]
    for k in range(0, len(views), 100):  # n == i: each view selects one value
        made = _create(admin, [NewTopic(v, config={"camus.source": src, "camus.filter": f"n == {i}"})
                               for i, v in enumerate(views[k:k + 100], start=k)])
        assert all(e is None for e in made.values()), made
    extra = f"{src}-extra"
    refused = _create(admin, [NewTopic(extra, config={"camus.source": src,
                                                      "camus.filter": "n == 7"})])[extra]
    assert refused is not None, "a view past the switch's last port was created"
    err = refused.args[0]
    assert err.name() == "POLICY_VIOLATION", err
    assert f"{LAST_ENDPOINT} ports" in err.str(), err.str()
    assert extra not in admin.list_topics(timeout=10).topics

    # The ports in use still serve: the first and the last view get their records.
    p = Producer({"bootstrap.servers": bootstrap})
    for n in (0, LAST_ENDPOINT - 1, 7):
        p.produce(src, json.dumps({"n": n}).encode())
    assert p.flush(10) == 0
    assert [json.loads(m.value())["n"] for m in consume(bootstrap, views[0], 1)] == [0]
    last = consume(bootstrap, views[-1], 1)
    assert [json.loads(m.value())["n"] for m in last] == [LAST_ENDPOINT - 1]
    # A group member of the source gets no port now, and reads it all through Fetch anyway.
    got = consume(bootstrap, src, 3)
    assert sorted(json.loads(m.value())["n"] for m in got) == [0, 7, LAST_ENDPOINT - 1]
    assert wait_until(lambda: inprocess.broker.members_without_port >= 1)

    # A deleted view's port comes back once the switch no longer sends to it.
    for fut in admin.delete_topics([views[7]], operation_timeout=30).values():
        fut.result(60)

    def again() -> bool:
        return _create(admin, [NewTopic(extra, config={"camus.source": src,
                                                       "camus.filter": "n == 7"})])[extra] is None
    assert wait_until(again, timeout=30)
    assert [json.loads(m.value())["n"] for m in consume(bootstrap, extra, 1)] == [7]
