"""A subscription change never holds up anyone else (issue 13, item 4).

A view whose filter takes seconds to compile (115 alternatives over five fields: about
365,000 table entries) is created while an unrelated producer runs: its produce is answered
while the view is still being compiled, since compilation runs on a worker thread and the
target keeps its old entries until the new ones are ready. Before, the compile ran on the
broker's event loop and the produce waited for it. The view then holds exactly its matching
records, including those produced while it compiled.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .conftest import unique  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402

FIELDS = "abcde"


def slow_filter(n: int = 115, seed: int = 1) -> str:
    rng = random.Random(seed)
    parts = []
    for _ in range(n):
        bounds = []
        for x in FIELDS:
            v = rng.randrange(10**6)
            bounds.append(f"{x} > {v} and {x} < {v + 400000}")
        parts.append("(" + " and ".join(bounds) + ")")
    return " or ".join(parts)


def test_an_unrelated_produce_is_answered_while_a_view_compiles(broker):
    src, other, view = unique("slow"), unique("other"), unique("slow-view")
    create(broker.bootstrap, NewTopic(src, 1, 1, config={
        "camus.schema": ",".join(f"{x}:u32=$.{x}" for x in FIELDS)}))
    create(broker.bootstrap, NewTopic(other, 1, 1))
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    everything = {x: 1_200_000 for x in FIELDS}  # above every range: matches no alternative
    nothing_matches = json.dumps(everything).encode()
    p.produce(src, nothing_matches)
    assert p.flush(10) == 0

    created: dict[str, float] = {}

    def make_view():
        # librdkafka gives up on any request after socket.timeout.ms (60 s) whatever the
        # request's own timeout; a loaded machine can take longer than that to compile.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 240000})
        future = admin.create_topics([NewTopic(view, config={
            "camus.source": src, "camus.filter": slow_filter()})], request_timeout=240)[view]
        future.result(240)
        created["at"] = time.monotonic()

    maker = threading.Thread(target=make_view)
    maker.start()
    time.sleep(0.5)  # the CreateTopics is in: its compile has begun
    p.produce(other, b"unrelated")
    assert p.flush(60) == 0
    answered = time.monotonic()
    maker.join(240)
    assert "at" in created, "the view was not created"
    assert answered < created["at"], "the unrelated produce waited for the view's compile"
    # The view is right: one record matching alternative 0, produced after it compiled.
    rng = random.Random(1)
    first = {x: (v := rng.randrange(10**6)) + 1 for x in FIELDS}
    p.produce(src, json.dumps(first).encode())
    assert p.flush(10) == 0
    got = consume(broker.bootstrap, view, 1)
    assert [json.loads(m.value()) for m in got] == [first] and got[0].offset() == 1
