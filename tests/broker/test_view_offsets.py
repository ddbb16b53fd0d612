"""A view's offsets as Kafka has them for a log with gaps (a compacted topic).

The view's log start offset is its source's (0, or where the source's retention moved it),
not its first matching record's; its high watermark is its source's; a Fetch at any offset
from the start to the high watermark answers the next matching records (perhaps none) and
only offsets outside that range answer OFFSET_OUT_OF_RANGE. Before this was so, a consumer
at offset 0 of a view whose first match is at 80 was answered OFFSET_OUT_OF_RANGE and, with
auto.offset.reset=latest, skipped every record of the view. confluent-kafka and
kafka-python against `camus serve`.
"""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")
import kafka  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402
from kafka.errors import OffsetOutOfRangeError  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import create  # noqa: E402
from .test_retention_and_config import watermarks  # noqa: E402


def create_view(bootstrap, expr, view_first=True, ns=range(100), **configs):
    """A one-partition source of {"n": n} records for n in `ns` and its view `expr`,
    created before the records (delivered live) or after them (replayed from the log)."""
    src, view = unique("vo"), unique("vo-view")
    create(bootstrap, NewTopic(src, 1, 1, config={"camus.schema": "n:u32=$.n", **configs}))
    make_view = lambda: create(bootstrap, NewTopic(view, config={  # noqa: E731
        "camus.source": src, "camus.filter": expr}))
    if view_first:
        make_view()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in ns:
        p.produce(src, json.dumps({"n": n, "pad": "." * 80}).encode(), partition=0)
        p.flush(10)  # one batch per record: several view batches, segments for retention
    if not view_first:
        make_view()
    return src, view


def read_from(bootstrap, topic, offset, reset, timeout=15.0):
    """(offsets received, error codes) reading partition 0 from `offset` until its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "auto.offset.reset": reset, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, offset)])
    got, errors, deadline = [], [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                got.append(m.offset())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                break
            else:
                errors.append(m.error().code())
                break
    finally:
        c.close()
    return got, errors


@pytest.mark.parametrize("view_first", [True, False], ids=["live", "replayed"])
def test_consumer_at_0_with_latest_reset_gets_every_match_after_the_gap(broker, view_first):
    _, view = create_view(broker.bootstrap, "n >= 80", view_first)
    assert watermarks(broker.bootstrap, view) == (0, 100)
    assert read_from(broker.bootstrap, view, 0, "latest") == (list(range(80, 100)), [])


def test_kafka_python_list_offsets_and_fetch_inside_gaps(broker):
    _, view = create_view(broker.bootstrap, "n == 30 or (n >= 80 and n < 90)")
    tp = kafka.TopicPartition(view, 0)
    # auto_offset_reset="none": an OFFSET_OUT_OF_RANGE answer raises instead of resetting.
    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                            auto_offset_reset="none")
    try:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 100}
        c.assign([tp])

        def first_from(offset, seconds=3.0):
            c.seek(tp, offset)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for records in c.poll(timeout_ms=200).values():
                    return records[0].offset
            return None

        assert first_from(0) == 30
        assert first_from(31) == 80  # inside a gap: the next matching record
        assert first_from(85) == 85
        assert first_from(95, 1.0) is None  # past the last match, before the end: no error
        assert c.position(tp) == 100  # moved over the filtered tail to the high watermark
        assert first_from(100, 1.0) is None  # the high watermark itself
        with pytest.raises(OffsetOutOfRangeError):
            first_from(101)
    finally:
        c.close()


def test_view_follows_source_retention_and_keeps_its_start_across_restart(camus_server,
                                                                           tmp_path):
    s = camus_server(tmp_path / "d")
    src, view = create_view(s.bootstrap, "n >= 57", ns=range(60),
                            **{"retention.bytes": "2000", "segment.bytes": "500"})
    lo, hi = watermarks(s.bootstrap, src)
    assert hi == 60 and 0 < lo < 57
    assert watermarks(s.bootstrap, view) == (lo, hi)  # the source's start, not 57
    assert read_from(s.bootstrap, view, lo, "latest") == ([57, 58, 59], [])
    # Below the start is out of range (auto.offset.reset=error reports it).
    assert read_from(s.bootstrap, view, 0, "error") == ([], [KafkaError._AUTO_OFFSET_RESET])
    s.stop()
    s2 = camus_server(tmp_path / "d")
    assert watermarks(s2.bootstrap, view) == (lo, hi)
    assert read_from(s2.bootstrap, view, lo, "latest") == ([57, 58, 59], [])


def test_view_start_follows_time_retention_to_the_end(broker):
    _, view = create_view(broker.bootstrap, "n >= 3", ns=range(5), **{"retention.ms": "500"})
    assert wait_until(lambda: watermarks(broker.bootstrap, view) == (5, 5), 10)


# --- every client reaches the end of a view (as of a compacted topic) -------------------

TAIL_VIEWS = [("n < 50", list(range(50))), ("n > 1000", [])]


@pytest.mark.parametrize("expr,matches", TAIL_VIEWS, ids=["filtered-tail", "nothing-matches"])
def test_confluent_kafka_reaches_eof_and_commits_the_high_watermark(broker, expr, matches):
    _, view = create_view(broker.bootstrap, expr)
    group = unique("tail")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(view, 0)])
    got, eof, deadline = [], False, time.monotonic() + 15
    try:
        while not eof and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None or m.error().code() == KafkaError._PARTITION_EOF, m.error()
            eof = m.error() is not None
            if not eof:
                got.append(m.offset())
        assert eof, "never reached the end of the view"
        assert got == matches
        assert c.position([TopicPartition(view, 0)])[0].offset == 100
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(view, 0)], timeout=10)[0].offset
        assert committed == 100  # lag 0
    finally:
        c.close()


@pytest.mark.parametrize("expr,matches", TAIL_VIEWS, ids=["filtered-tail", "nothing-matches"])
def test_kafka_python_reaches_the_high_watermark(broker, expr, matches):
    _, view = create_view(broker.bootstrap, expr)
    tp = kafka.TopicPartition(view, 0)
    c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                            auto_offset_reset="earliest")
    try:
        c.assign([tp])
        got, deadline = [], time.monotonic() + 15
        while c.position(tp) < 100 and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got += [r.offset for r in records]
        assert got == matches and c.position(tp) == 100
    finally:
        c.close()


def test_kcat_exits_at_the_end_of_a_view_with_a_filtered_tail(broker):
    from .test_kcat_and_java import KCAT, kcat

    if KCAT is None:
        pytest.skip("needs kcat (apt-get install kcat)")
    _, view = create_view(broker.bootstrap, "n < 50")
    out = kcat(broker, "-C", "-t", view, "-p", "0", "-o", "beginning", "-e", "-f", "%o\n",
               timeout=30)  # before gap batches it never exited
    assert [int(x) for x in out.split()] == list(range(50))


@pytest.mark.java
def test_java_consumer_group_lag_is_zero_after_reading_a_view(broker):
    from .test_kcat_and_java import java_tool, kafka_libs

    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    _, view = create_view(broker.bootstrap, "n < 50")
    group = unique("jtail")
    out = java_tool(libs, "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                    broker.bootstrap, "--topic", view, "--group", group, "--from-beginning",
                    "--timeout-ms", "8000", "--property", "print.offset=true")
    assert len([line for line in out.splitlines() if "Offset:" in line]) == 50, out
    out = java_tool(libs, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                    "--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
    row = next(line.split() for line in out.splitlines() if view in line)
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert row[3:6] == ["100", "100", "0"], out
