"""The broker on a target that reports later, checked with a real Kafka client.

`camus serve` in process, its target an `OnAThread` (tests/shim/later.py): the embedded
switch on a worker thread, each report handed to the event loop after the Produce has been
answered, as a remote target's I/O would; with and without each copy's input frame index.
A view must still receive exactly its matching records with the source's offsets (live
and replayed from the log when created later), and a plain topic is unaffected.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from ..shim.later import OnAThread  # noqa: E402
from .conftest import InProcess, unique  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402


@pytest.fixture(params=[True, False], ids=["indexed", "unindexed"])
def later_broker(request, monkeypatch):
    import shim.broker

    targets = []

    def open_target(spec):
        assert spec == "embedded:native"
        targets.append(OnAThread("native", indexed=request.param))
        return targets[-1]

    monkeypatch.setattr(shim.broker, "open_target", open_target)
    s = InProcess(target="embedded:native")  # whatever CAMUS_TEST_TARGET says: it is replaced
    yield s
    s.stop()
    assert len(targets) == 1 and targets[0].loop is not None  # it did send, later


def test_views_get_exactly_their_records_and_plain_topics_are_unaffected(later_broker):
    bootstrap = later_broker.bootstrap
    src, live, plain = unique("later"), unique("later-live"), unique("later-plain")
    create(bootstrap, NewTopic(src, 2, 1, config={"camus.schema": "n:u32=$.n"}),
           NewTopic(plain, 2, 1))
    create(bootstrap, NewTopic(live, config={"camus.source": src,
                                             "camus.filter": "n < 10 or n >= 30 and n < 45"}))
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    values = [json.dumps({"n": n, "pad": "x" * (n % 7) * 400}).encode() for n in range(60)]
    for n, v in enumerate(values):
        p.produce(src, v, partition=n % 2)
        p.produce(plain, v, partition=n % 2)
    assert p.flush(10) == 0
    replayed = unique("later-replayed")
    create(bootstrap, NewTopic(replayed, config={"camus.source": src, "camus.filter": "n >= 50"}))
    for n in range(60, 64):
        p.produce(src, json.dumps({"n": n}).encode(), partition=n % 2)
    assert p.flush(10) == 0

    source = {(m.partition(), m.offset()): m.value() for m in consume(bootstrap, src, 64)}
    assert len(source) == 64
    for view, keep in ((live, lambda n: n < 10 or 30 <= n < 45), (replayed, lambda n: n >= 50)):
        want = sorted(k for k, v in source.items() if keep(json.loads(v)["n"]))
        got = consume(bootstrap, view, len(want) + 1, timeout=2)  # one more: none may come
        assert sorted((m.partition(), m.offset()) for m in got) == want
        assert all(m.value() == source[(m.partition(), m.offset())] for m in got)
    got = consume(bootstrap, plain, 61, timeout=2)
    assert sorted(m.value() for m in got) == sorted(values)
