"""Kafka ACLs over real sockets: AdminClient and the Java `kafka-acls` tool manage them, and
every API answers Kafka's error to a principal without the permission, delivering nothing.
Views do not leak: creating one needs READ on its source, reading one READ on the view, and
its filter is shown only with DESCRIBE_CONFIGS."""

from __future__ import annotations

import json
import socket
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ConfigResource, NewTopic, ResourcePatternType,
                                   ResourceType)

from tests.broker.conftest import Server, unique
from tests.broker.security_helpers import add_user, listener_ports
from tests.broker.test_bad_input import read_frame, request
from tests.broker.test_kcat_and_java import java_tool, kafka_libs
from tests.protocol.protocol_helpers import decode_response

QUIET = {"log_level": 0}
ALLOW = AclPermissionType.ALLOW


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    """SASL_PLAINTEXT with an authorizer; admin is a super user, alice and bob are not."""
    data = tmp_path_factory.mktemp("acl") / "data"
    for user in ("admin", "alice", "bob"):
        add_user(data, user, f"{user}-secret", "SCRAM-SHA-256")
    s = Server(data, ["--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--authorizer",
                      "--super-users", "User:admin"])
    s.sasl = f"127.0.0.1:{listener_ports(s, 1)['SASL_PLAINTEXT']}"
    yield s
    s.stop()


def conf(broker, user: str) -> dict:
    return {"bootstrap.servers": broker.sasl, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": f"{user}-secret", **QUIET}


_ADMINS: dict = {}


def admin(broker, user="admin") -> AdminClient:
    """One client per user, kept: a client collected before its futures resolve fails them."""
    key = (broker.sasl, user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(conf(broker, user))
    return _ADMINS[key]


def grant(broker, principal, rtype, name, *ops, pattern=ResourcePatternType.LITERAL, perm=ALLOW):
    bindings = [AclBinding(rtype, name, pattern, principal, "*", op, perm) for op in ops]
    for f in admin(broker).create_acls(bindings, request_timeout=15).values():
        f.result()


def make_topic(broker, name, **config):
    for f in admin(broker).create_topics([NewTopic(name, 2, 1, config=config)],
                                         operation_timeout=30).values():
        f.result()


def raw_login(broker, user: str) -> socket.socket:
    """A raw connection authenticated with SASL PLAIN as `user`."""
    host, port = broker.sasl.split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(request(17, 1, mechanism="PLAIN"))
    read_frame(s)
    s.sendall(request(36, 2, auth_bytes=f"\0{user}\0{user}-secret".encode()))
    assert decode_response(36, 2, read_frame(s))[1].error_code == 0
    return s


def kafka_error(future) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result()
    return info.value.args[0]


def poll_error(c: Consumer, timeout: float = 15) -> KafkaError | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            return m.error()
    return None


def test_acl_admin_roundtrip_and_who_may_do_it(acl_broker):
    topic = unique("acl-rt")
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.READ)
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic[:6], AclOperation.WRITE,
          pattern=ResourcePatternType.PREFIXED)
    f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                         AclOperation.ANY, AclPermissionType.ANY)
    found = admin(acl_broker).describe_acls(f, request_timeout=15).result()
    assert {(b.name, b.operation, b.resource_pattern_type) for b in found} >= {
        (topic, AclOperation.READ, ResourcePatternType.LITERAL),
        (topic[:6], AclOperation.WRITE, ResourcePatternType.PREFIXED)}
    # alice is not a super user and has no ALTER/DESCRIBE on the cluster.
    # librdkafka drops DescribeAcls' top-level error (it returns no bindings); the answer
    # itself carries CLUSTER_AUTHORIZATION_FAILED.
    assert admin(acl_broker, "alice").describe_acls(f, request_timeout=15).result() == []
    s = raw_login(acl_broker, "alice")
    s.sendall(request(29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                      principal_filter=None, host_filter=None, operation=1, permission_type=1))
    answer = decode_response(29, 3, read_frame(s))[1]
    assert answer.error_code == 31 and answer.resources == ()  # CLUSTER_AUTHORIZATION_FAILED
    s.close()
    err = kafka_error(next(iter(admin(acl_broker, "alice").create_acls(
        [AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:alice", "*",
                    AclOperation.ALL, ALLOW)], request_timeout=15).values())))
    assert err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    gone = next(iter(admin(acl_broker).delete_acls(
        [AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                          AclOperation.ANY, AclPermissionType.ANY)], request_timeout=15).values())).result()
    assert [(b.name, b.operation) for b in gone] == [(topic, AclOperation.READ)]


def test_acl_apis_without_an_authorizer_answer_security_disabled(broker):
    a = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, ALLOW)
    err = kafka_error(next(iter(a.create_acls([binding], request_timeout=15).values())))
    assert err.code() == KafkaError.SECURITY_DISABLED


def test_topic_permissions_produce_consume_metadata(acl_broker):
    topic, hidden = unique("acl-t"), unique("acl-hidden")
    make_topic(acl_broker, topic)
    make_topic(acl_broker, hidden)
    # Without WRITE: TOPIC_AUTHORIZATION_FAILED and nothing stored.
    errors: list = []
    p = Producer({**conf(acl_broker, "alice"), "message.timeout.ms": 5000})
    p.produce(topic, b"nope", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
    p = Producer(conf(acl_broker, "alice"))
    p.produce(topic, b"yes")
    assert p.flush(10) == 0
    # Metadata lists only what alice may describe (WRITE implies DESCRIBE).
    listed = set(admin(acl_broker, "alice").list_topics(timeout=10).topics)
    assert topic in listed and hidden not in listed
    md = admin(acl_broker, "alice").list_topics(hidden, timeout=10)
    assert md.topics[hidden].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Reading needs READ on the topic, then READ on the group.
    grant(acl_broker, "User:alice", ResourceType.GROUP, "alice-", AclOperation.READ,
          pattern=ResourcePatternType.PREFIXED)
    c = Consumer({**conf(acl_broker, "alice"), "group.id": unique("alice-g"),
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    err = poll_error(c)
    c.close()
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(acl_broker, "User:alice", ResourceType.TOPIC, topic, AclOperation.READ)
    c = Consumer({**conf(acl_broker, "alice"), "group.id": unique("bob-g"),
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    err = poll_error(c)
    c.close()
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    c = Consumer({**conf(acl_broker, "alice"), "group.id": unique("alice-g"),
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = None, time.monotonic() + 20
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got = m.value()
    c.close()
    assert got == b"yes"


def test_admin_operations_need_their_acls(acl_broker):
    name = unique("acl-admin")
    err = kafka_error(next(iter(admin(acl_broker, "bob").create_topics(
        [NewTopic(name, 1, 1)], operation_timeout=15).values())))
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(acl_broker, "User:bob", ResourceType.TOPIC, name, AclOperation.CREATE)
    next(iter(admin(acl_broker, "bob").create_topics([NewTopic(name, 1, 1)],
                                                     operation_timeout=15).values())).result()
    err = kafka_error(next(iter(admin(acl_broker, "bob").delete_topics([name], operation_timeout=15).values())))
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    err = kafka_error(next(iter(admin(acl_broker, "bob").describe_configs([res], request_timeout=15).values())))
    assert err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant(acl_broker, "User:bob", ResourceType.TOPIC, name, AclOperation.DELETE)
    next(iter(admin(acl_broker, "bob").delete_topics([name], operation_timeout=15).values())).result()


def test_views_do_not_leak(acl_broker):
    src, view = unique("acl-src"), unique("acl-view")
    make_topic(acl_broker, src, **{"camus.schema": "n:u16=$.n"})
    p = Producer(conf(acl_broker, "admin"))
    for n in range(10):
        p.produce(src, json.dumps({"n": n}).encode())
    assert p.flush(10) == 0
    # alice may create topics, but not read src: no view over it either.
    grant(acl_broker, "User:alice", ResourceType.TOPIC, "acl-view", AclOperation.CREATE,
          pattern=ResourcePatternType.PREFIXED)
    spec = NewTopic(view, config={"camus.source": src, "camus.filter": "n >= 7"})
    err = kafka_error(next(iter(admin(acl_broker, "alice").create_topics([spec], operation_timeout=30).values())))
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(acl_broker, "User:alice", ResourceType.TOPIC, src, AclOperation.READ)
    next(iter(admin(acl_broker, "alice").create_topics([spec], operation_timeout=30).values())).result()
    # bob has READ on src, none on the view: the view's records and filter stay hidden.
    grant(acl_broker, "User:bob", ResourceType.TOPIC, src, AclOperation.READ)
    grant(acl_broker, "User:bob", ResourceType.GROUP, "bob-", AclOperation.READ,
          pattern=ResourcePatternType.PREFIXED)
    c = Consumer({**conf(acl_broker, "bob"), "group.id": unique("bob-a"), "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(view, 0), TopicPartition(view, 1)])
    err = poll_error(c)
    c.close()
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    res = ConfigResource(ConfigResource.Type.TOPIC, view)
    err = kafka_error(next(iter(admin(acl_broker, "bob").describe_configs([res], request_timeout=15).values())))
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert view not in admin(acl_broker, "bob").list_topics(timeout=10).topics
    # With READ on the view, bob reads exactly the filtered records; the filter still needs
    # DESCRIBE_CONFIGS.
    grant(acl_broker, "User:bob", ResourceType.TOPIC, view, AclOperation.READ)
    c = Consumer({**conf(acl_broker, "bob"), "group.id": unique("bob-v"), "auto.offset.reset": "earliest"})
    c.subscribe([view])
    got, deadline = [], time.monotonic() + 20
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(json.loads(m.value())["n"])
    c.close()
    assert sorted(got) == [7, 8, 9]
    err = kafka_error(next(iter(admin(acl_broker, "bob").describe_configs([res], request_timeout=15).values())))
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Deleting src names no view bob cannot see.
    grant(acl_broker, "User:bob", ResourceType.TOPIC, src, AclOperation.DELETE)
    deleted = next(iter(admin(acl_broker, "bob").delete_topics([src], operation_timeout=15).values()))
    err = kafka_error(deleted)
    assert err.code() == KafkaError.POLICY_VIOLATION and view not in err.str()


def test_scram_users_through_admin_client(acl_broker):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    a = admin(acl_broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    for f in a.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("carol", info, b"carol-secret")], request_timeout=15).values():
        f.result()
    described = a.describe_user_scram_credentials(["carol"], request_timeout=15)["carol"].result()
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    carol = {**conf(acl_broker, "carol"), "sasl.mechanism": "SCRAM-SHA-512"}
    assert AdminClient(carol).list_topics(timeout=10) is not None  # carol can log in
    err = kafka_error(next(iter(admin(acl_broker, "alice").alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)], request_timeout=15).values())))
    assert err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    for f in a.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)], request_timeout=15).values():
        f.result()
    errors: list = []
    p = Producer({**carol, "error_cb": errors.append})
    p.produce("anything", b"x")
    p.flush(3)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors)


def _jaas(user: str) -> str:
    return ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{user}-secret";')


@pytest.mark.java
def test_java_kafka_acls_and_java_clients_over_sasl_plaintext(acl_broker, tmp_path):
    libs = kafka_libs()
    if libs is None:
        pytest.skip("needs java and Kafka's jars (../shared/peers/kafka/kafka.sh jars, or KAFKA_LIBS=DIR)")
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     f"sasl.jaas.config={_jaas('admin')}\n")
    topic = unique("java-acl")
    make_topic(acl_broker, topic)
    acls = ["org.apache.kafka.tools.AclCommand", "--bootstrap-server", acl_broker.sasl, "--command-config", str(props)]
    java_tool(libs, *acls, "--add", "--allow-principal", "User:alice", "--operation", "Read",
              "--operation", "Write", "--topic", topic)
    listed = java_tool(libs, *acls, "--list", "--topic", topic)
    assert "User:alice" in listed and "READ" in listed and "WRITE" in listed
    java_tool(libs, *acls, "--remove", "--force", "--allow-principal", "User:alice",
              "--operation", "Write", "--topic", topic)
    listed = java_tool(libs, *acls, "--list", "--topic", topic)
    assert "READ" in listed and "WRITE" not in listed
    # The Java producer as alice, now without WRITE: Kafka's authorization error.
    alice = tmp_path / "alice.properties"
    alice.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     f"sasl.jaas.config={_jaas('alice')}\n")
    import subprocess
    out = subprocess.run(["java", "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance",
                          "--topic", topic, "--num-records", "10", "--record-size", "10", "--throughput", "-1",
                          "--producer-props", f"bootstrap.servers={acl_broker.sasl}", "max.block.ms=10000",
                          "--producer.config", str(alice)], capture_output=True, text=True, timeout=120)
    # Cluster- when alice may write no topic at all (idempotence, KIP-679), else Topic-.
    assert "AuthorizationException" in out.stdout + out.stderr  # Cluster- or Topic-
    java_tool(libs, *acls, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)
    out = java_tool(libs, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "10",
                    "--record-size", "10", "--throughput", "-1", "--producer-props",
                    f"bootstrap.servers={acl_broker.sasl}", "--producer.config", str(alice), timeout=120)
    assert "10 records sent" in out


def test_group_apis_from_the_admin_work_refuse_without_group_acls(acl_broker):
    """OffsetDelete and ConsumerGroupHeartbeat (KIP-848) are refused as a whole without their
    group ACLs, as in Kafka: checked before the handler, with the API's own error shape."""
    s = raw_login(acl_broker, "bob")
    s.sendall(request(47, 0, group_id="not-bobs", topics=[]))
    assert decode_response(47, 0, read_frame(s))[1].error_code == 30  # GROUP_AUTHORIZATION_FAILED
    s.sendall(request(68, 1, group_id="not-bobs", member_id="m", member_epoch=0, instance_id=None,
                      rack_id=None, rebalance_timeout=30000, subscribed_topic_names=["t"],
                      subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))
    assert decode_response(68, 1, read_frame(s))[1].error_code == 30
    s.close()
