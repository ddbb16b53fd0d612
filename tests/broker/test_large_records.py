"""What a source accepts, a view over it delivers, whatever the record's size (issue 13 item 6).

A record larger than one packet crosses the switch in fragments, reassembled at the view's
port up to 1.5 MiB; a larger one (a 2 MiB record compressed under `max.message.bytes`, or one
that would need more than the header's 65,535 fragments) crosses as one by-reference packet
whose forwarding decision is the record's own and which the view's port resolves from the
source batch. Before, the 2 MiB record was stored in the source and silently missing from the
view, and the 90 MiB one was stored and its produce answered UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from .conftest import unique  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402
from .test_retention_and_config import watermarks  # noqa: E402

BIG_CLIENT = {"message.max.bytes": 200_000_000, "compression.type": "zstd", "linger.ms": 0}
BIG_FETCH = {"fetch.max.bytes": 200_000_000, "receive.message.max.bytes": 210_000_000,
             "max.partition.fetch.bytes": 200_000_000}


def record(price: int, size: int) -> bytes:
    head = json.dumps({"price": price, "pad": ""})[:-2]
    return (head + "x" * (size - len(head) - 2) + '"}').encode()


def view_over_source(bootstrap: str, expr: str = "price > 100", **configs) -> tuple[str, str]:
    src, view = unique("big"), unique("big-view")
    create(bootstrap, NewTopic(src, 1, 1, config={"camus.schema": "price:u32=$.price",
                                                  **configs}))
    create(bootstrap, NewTopic(view, config={"camus.source": src, "camus.filter": expr}))
    return src, view


def produce(bootstrap: str, topic: str, values: list[bytes], **conf) -> list:
    p = Producer({"bootstrap.servers": bootstrap, **BIG_CLIENT, **conf})
    reports = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: reports.append(
            (err and err.code(), msg.offset())))
    assert p.flush(120) == 0
    return reports


def test_a_2_mib_record_compressed_under_the_limit_reaches_the_view(broker):
    src, view = view_over_source(broker.bootstrap)
    values = [record(50, 100), record(500, 2 << 20), record(500, 100), record(50, 3 << 20)]
    reports = produce(broker.bootstrap, src, values)
    assert [err for err, _ in reports] == [None] * 4
    got = consume(broker.bootstrap, view, 2, timeout=30, **BIG_FETCH)
    assert [(m.offset(), m.value()) for m in got] == [(1, values[1]), (2, values[2])]


def test_a_record_past_65535_fragments_is_stored_once_and_delivered(broker):
    # 90 MiB, uncompressed, under a topic limit raised to 100 MiB: 67,400 fragments of 1,400
    # bytes would be needed; the header counts 65,535 at most.
    src, view = view_over_source(broker.bootstrap, **{"max.message.bytes": str(100 << 20)})
    huge = record(500, 90 << 20)
    reports = produce(broker.bootstrap, src, [huge, record(500, 10)], **{
        "compression.type": "none", "batch.size": 1_000_000})
    assert [err for err, _ in reports] == [None, None], "a stored record was answered an error"
    assert watermarks(broker.bootstrap, src) == (0, 2)
    got = consume(broker.bootstrap, view, 2, timeout=60, **BIG_FETCH)
    assert [m.offset() for m in got] == [0, 1] and got[0].value() == huge


def test_a_batch_refused_for_its_size_is_not_stored(broker):
    # 70 MiB that zstd packs into a few KiB: past what one batch may decompress to (64 MiB)
    src, view = view_over_source(broker.bootstrap)
    reports = produce(broker.bootstrap, src, [record(500, 70 << 20)])
    assert [err for err, _ in reports] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert watermarks(broker.bootstrap, src) == (0, 0)
    assert watermarks(broker.bootstrap, view) == (0, 0)
