"""Client quotas over real sockets: AlterClientQuotas / DescribeClientQuotas (raw and with
Kafka's `kafka-configs`), and produce/fetch byte rates throttled with throttle_time_ms."""

from __future__ import annotations

import json
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.broker.conftest import unique
from tests.broker.test_bad_input import read_frame, request
from tests.broker.test_kcat_and_java import java_tool, kafka_libs
from tests.protocol.protocol_helpers import decode_response


@pytest.fixture
def quota_broker(tmp_path, camus_server):
    cfg = tmp_path / "camus.json"
    cfg.write_text(json.dumps({"quota.window.num": 2, "quota.window.size.seconds": 1}))
    return camus_server(tmp_path / "data", ["--config", str(cfg)])


def call(broker, key: int, version: int, **fields):
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(request(key, version, **fields))
        return decode_response(key, version, read_frame(s))[1]


def alter(broker, entity: dict, ops: list, validate_only=False):
    return call(broker, 49, 1, validate_only=validate_only, entries=[
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
         "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}]).entries[0]


def describe(broker, components, strict=False):
    return call(broker, 48, 1, strict=strict, components=components).entries


def test_alter_and_describe_client_quotas(quota_broker):
    assert alter(quota_broker, {"client-id": "slow"}, [("producer_byte_rate", 20000.0, False)]).error_code == 0
    assert alter(quota_broker, {"user": "alice", "client-id": None},
                 [("consumer_byte_rate", 5000.0, False)]).error_code == 0
    bad = alter(quota_broker, {"client-id": "x"}, [("request_percentage", 50.0, False)])
    assert bad.error_code == 42 and "producer_byte_rate" in bad.error_message  # INVALID_REQUEST
    assert alter(quota_broker, {"ip": "1.2.3.4"}, [("producer_byte_rate", 1.0, False)]).error_code == 42
    got = describe(quota_broker, [{"entity_type": "client-id", "match_type": 0, "match": "slow"}])
    assert [(e.entity[0].entity_name, e.values[0].key, e.values[0].value) for e in got] == [
        ("slow", "producer_byte_rate", 20000.0)]
    got = describe(quota_broker, [{"entity_type": "user", "match_type": 2, "match": None}])
    assert len(got) == 1 and {x.entity_type: x.entity_name for x in got[0].entity} == {
        "user": "alice", "client-id": None}
    assert describe(quota_broker, [{"entity_type": "user", "match_type": 2, "match": None}], strict=True) == ()
    assert alter(quota_broker, {"client-id": "slow"}, [("producer_byte_rate", 0.0, True)]).error_code == 0
    assert describe(quota_broker, [{"entity_type": "client-id", "match_type": 0, "match": "slow"}]) == ()


def test_producer_over_its_quota_is_throttled_and_others_are_not(quota_broker):
    assert alter(quota_broker, {"client-id": "slow"}, [("producer_byte_rate", 20000.0, False)]).error_code == 0
    topic = unique("quota")
    value = b"x" * 1000

    def run(client_id: str) -> tuple[float, list]:
        throttles: list = []
        p = Producer({"bootstrap.servers": quota_broker.bootstrap, "client.id": client_id,
                      "linger.ms": 5, "batch.size": 8192, "throttle_cb": throttles.append})
        started = time.monotonic()
        for _ in range(100):
            p.produce(topic, value)
            p.poll(0)
        assert p.flush(60) == 0
        p.poll(0.5)  # deliver the last throttle events
        return time.monotonic() - started, throttles

    slow, throttled = run("slow")
    fast, unthrottled = run("fast")
    assert throttled and max(t.throttle_time for t in throttled) > 0
    assert not unthrottled
    # 100 kB at 20 kB/s over a 2 s window: several seconds, against well under one unthrottled.
    assert slow > 2.0 and slow > 3 * fast, (slow, fast)
    c = Consumer({"bootstrap.servers": quota_broker.bootstrap, "group.id": unique("q"),
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    n, deadline = 0, time.monotonic() + 30
    while n < 200 and time.monotonic() < deadline:
        m = c.poll(0.5)
        n += m is not None and not m.error()
    c.close()
    assert n == 200  # throttling delays, it never drops


@pytest.mark.java
def test_kafka_configs_manages_client_quotas(quota_broker):
    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    tool = ["kafka.admin.ConfigCommand", "--bootstrap-server", quota_broker.bootstrap]
    java_tool(libs, *tool, "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048",
              "--entity-type", "users", "--entity-name", "alice")
    out = java_tool(libs, *tool, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "producer_byte_rate=1024.0" in out and "consumer_byte_rate=2048.0" in out
    java_tool(libs, *tool, "--alter", "--delete-config", "producer_byte_rate",
              "--entity-type", "users", "--entity-name", "alice")
    out = java_tool(libs, *tool, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "producer_byte_rate" not in out and "consumer_byte_rate=2048.0" in out
