"""Group members' switch ports are bounded per principal and per connection (issue 24,
item 12). The switch has 509 endpoint ports; before, every group member's topic took one
while any was free, so one principal opening 520 one-member groups (0.3 s of raw
heartbeats) took them all and the next view anyone created was refused. Now a principal's
members hold at most `camus.member.ports.per.principal` (128) and one connection's at most
`camus.member.ports.per.connection` (32); members past the bound are served through Fetch
as before, and views (and other principals) still get ports."""

from __future__ import annotations

import json
import types

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from shim.limits import DEFAULT_MEMBER_PORTS_PER_CONNECTION, DEFAULT_MEMBER_PORTS_PER_PRINCIPAL  # noqa: E402
from shim.security.listeners import Listener, Security  # noqa: E402

from .conftest import InProcess, unique, wait_until  # noqa: E402
from .security_helpers import add_user  # noqa: E402
from .test_acls import raw_login  # noqa: E402
from .test_bad_input import connect, read_frame, request  # noqa: E402
from .test_confluent_kafka import consume  # noqa: E402
from tests.protocol.protocol_helpers import decode_response  # noqa: E402

GROUPS_PER_CONNECTION, CONNECTIONS = 100, 6  # 600 one-member groups: more than 509 ports


def _sasl(server, user: str) -> dict:
    return {"bootstrap.servers": server.sasl, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": f"{user}-secret"}


def _join_many(s, prefix: str, topic: str, count: int, epoch: int = 0) -> list:
    """`count` one-member KIP-848 groups joined (epoch 0) or left (-1) over one connection,
    pipelined as a hostile client would send them; the answers' error codes."""
    s.sendall(b"".join(request(68, 1, i, group_id=f"{prefix}-{i}", member_id=f"{prefix}-m{i}",
                               member_epoch=epoch, instance_id=None, rack_id=None,
                               rebalance_timeout=30000,
                               subscribed_topic_names=[topic] if epoch == 0 else None,
                               subscribed_topic_regex=None, server_assignor=None,
                               topic_partitions=[] if epoch == 0 else None)
                       for i in range(count)))
    return [decode_response(68, 1, read_frame(s))[1].error_code for _ in range(count)]


@pytest.fixture
def sasl_broker(tmp_path):
    data = tmp_path / "data"
    for user in ("alice", "bob"):
        add_user(data, user, f"{user}-secret", "SCRAM-SHA-256")
    server = InProcess(data_dir=data, security=Security(listeners=[
        Listener("PLAINTEXT", "127.0.0.1", 0), Listener("SASL_PLAINTEXT", "127.0.0.1", 0)]))
    server.sasl = f"127.0.0.1:{server.broker.config.security.listeners[1].port}"
    server.port = server.broker.config.port
    yield server
    server.stop()


def test_one_principal_cannot_take_every_switch_port(sasl_broker):
    broker = sasl_broker.broker
    alice = AdminClient(_sasl(sasl_broker, "alice"))
    src = unique("bounded")
    alice.create_topics([NewTopic(src, 1, 1, config={"camus.schema": "n:u16=$.n"})])[src].result(30)

    # bob floods: 600 one-member groups over 6 connections; one anonymous connection 40 more.
    bobs = [raw_login(sasl_broker, "bob") for _ in range(CONNECTIONS)]
    for k, s in enumerate(bobs):
        assert set(_join_many(s, f"{src}-bob{k}", src, GROUPS_PER_CONNECTION)) == {0}
    anonymous = connect(types.SimpleNamespace(port=sasl_broker.port))
    assert set(_join_many(anonymous, f"{src}-anon", src, 40)) == {0}

    # alice's views still get ports (before: POLICY_VIOLATION, all 509 ports were bob's).
    views = {f"{src}-v{n}": n for n in range(20)}
    made = alice.create_topics([NewTopic(v, 1, 1, config={"camus.source": src,
                                                          "camus.filter": f"n == {n}"})
                                for v, n in views.items()], operation_timeout=60)
    for v, fut in made.items():
        fut.result(60)
    p = Producer({"bootstrap.servers": sasl_broker.bootstrap})
    for n in range(5):
        p.produce(src, json.dumps({"n": n}).encode())
    assert p.flush(10) == 0
    got = consume(sasl_broker.sasl, f"{src}-v3", 1, **_sasl(sasl_broker, "alice"))
    assert [json.loads(m.value())["n"] for m in got] == [3]

    # The bounds hold: bob's members have 128 ports, no connection more than 32.
    assert wait_until(lambda: broker.ports_by_principal["User:bob"]
                      == DEFAULT_MEMBER_PORTS_PER_PRINCIPAL)
    assert broker.ports_by_principal["User:ANONYMOUS"] == DEFAULT_MEMBER_PORTS_PER_CONNECTION
    assert max(broker.ports_by_connection.values()) == DEFAULT_MEMBER_PORTS_PER_CONNECTION
    assert broker.members_without_port >= CONNECTIONS * GROUPS_PER_CONNECTION - 128

    # bob, past his bound, still reads everything: a member without a port reads by Fetch.
    got = consume(sasl_broker.sasl, src, 5, **_sasl(sasl_broker, "bob"))
    assert sorted(json.loads(m.value())["n"] for m in got) == [0, 1, 2, 3, 4]

    # Members leaving give their ports back to their principal's and connection's count.
    for k, s in enumerate(bobs):
        assert set(_join_many(s, f"{src}-bob{k}", src, GROUPS_PER_CONNECTION, epoch=-1)) == {0}
        s.close()
    assert wait_until(lambda: "User:bob" not in broker.ports_by_principal)
    anonymous.close()
