"""Authentication over real sockets: listeners, TLS with client certificates, SASL PLAIN and
SCRAM (with confluent-kafka, kafka-python and kcat), re-authentication (KIP-368), and
hostile handshakes that must leave the broker serving everyone else."""

from __future__ import annotations

import os
import random
import shutil
import socket
import ssl
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from tests.broker.conftest import unique
from tests.broker.security_helpers import add_user, listener_ports, make_pki
from tests.broker.test_bad_input import api_versions_ok, closed, read_frame, request
from tests.protocol.protocol_helpers import decode_response

QUIET = {"log_level": 0}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """camus serve with PLAINTEXT, SASL_SSL, SSL (client certificate required) and
    SASL_PLAINTEXT listeners; users alice (both SCRAM mechanisms) and bob (SCRAM-SHA-256)."""
    from tests.broker.conftest import Server

    d = tmp_path_factory.mktemp("secured")
    pki = make_pki(d)
    data = d / "data"
    add_user(data, "alice", "alice-secret")
    add_user(data, "bob", "bob-secret", "SCRAM-SHA-256")
    s = Server(data, ["--listen", "SASL_SSL://127.0.0.1:0", "--listen", "SSL://127.0.0.1:0",
                      "--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--ssl-cert", str(pki["cert"]),
                      "--ssl-key", str(pki["key"]), "--ssl-ca", str(pki["ca"]),
                      "--ssl-client-auth", "required"])
    s.ports = listener_ports(s, 3)
    s.dir = d
    yield s
    s.stop()


def sasl_ssl(server, user="alice", password="alice-secret", mechanism="SCRAM-SHA-512") -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{server.ports['SASL_SSL']}",
            "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password, "ssl.ca.location": str(server.dir / "ca.pem"), **QUIET}


def ssl_client(server, who="alice") -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{server.ports['SSL']}", "security.protocol": "SSL",
            "ssl.ca.location": str(server.dir / "ca.pem"),
            "ssl.certificate.location": str(server.dir / f"{who}.pem"),
            "ssl.key.location": str(server.dir / f"{who}.key"), **QUIET}


def produce(conf: dict, topic: str, values: list[bytes], timeout: float = 15) -> tuple[int, list]:
    """(records not delivered, client errors)."""
    errors: list = []
    delivered: list = []
    p = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": int(timeout * 1000)})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: err is None and delivered.append(msg))
    p.flush(timeout + 5)
    return len(values) - len(delivered), errors


def consume(conf: dict, topic: str, count: int, timeout: float = 20) -> list[bytes]:
    c = Consumer({**conf, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return sorted(got)  # several partitions: order across them is not defined


def test_sasl_ssl_scram_sha_512_produces_consumes_and_advertises_its_listener(secured):
    topic = unique("sasl")
    left, errors = produce(sasl_ssl(secured), topic, [b"one", b"two"])
    assert left == 0 and not errors
    assert consume(sasl_ssl(secured), topic, 2) == [b"one", b"two"]
    from confluent_kafka.admin import AdminClient
    md = AdminClient(sasl_ssl(secured)).list_topics(timeout=10)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", secured.ports["SASL_SSL"])]
    md = AdminClient({"bootstrap.servers": secured.bootstrap, **QUIET}).list_topics(timeout=10)
    assert [b.port for b in md.brokers.values()] == [secured.port]


@pytest.mark.parametrize("user,password,mechanism", [
    ("alice", "wrong", "SCRAM-SHA-512"),
    ("nobody", "alice-secret", "SCRAM-SHA-512"),
    ("bob", "bob-secret", "SCRAM-SHA-512"),  # bob has only a SCRAM-SHA-256 credential
    ("alice", "wrong", "PLAIN"),
    ("nobody", "x", "PLAIN"),
])
def test_wrong_password_and_unknown_user_fail_alike_and_deliver_nothing(secured, user, password, mechanism):
    topic = unique("denied")
    left, errors = produce(sasl_ssl(secured, user, password, mechanism), topic, [b"x"], timeout=3)
    assert left == 1
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and ("Authentication failed during authentication due to invalid credentials "
                     f"with SASL mechanism {mechanism}") in auth[0].str()
    assert consume({"bootstrap.servers": secured.bootstrap, **QUIET}, topic, 1, timeout=3) == []


def test_plain_and_scram_sha_256_on_sasl_plaintext(secured):
    topic = unique("plain")
    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"),
                                      ("SCRAM-SHA-256", "bob", "bob-secret")):
        conf = {"bootstrap.servers": f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": password, **QUIET}
        assert produce(conf, topic, [mechanism.encode()]) == (0, [])
    assert consume(conf, topic, 2) == [b"PLAIN", b"SCRAM-SHA-256"]


def test_ssl_listener_requires_a_certificate_from_the_trusted_ca(secured):
    topic = unique("tls")
    assert produce(ssl_client(secured), topic, [b"by cert"]) == (0, [])
    assert consume(ssl_client(secured), topic, 1) == [b"by cert"]
    for conf in (ssl_client(secured, "mallory"),
                 {k: v for k, v in ssl_client(secured).items() if "certificate" not in k and "key" not in k}):
        left, errors = produce(conf, unique("tls-denied"), [b"x"], timeout=3)
        assert left == 1 and errors


def test_tls_1_1_is_refused(secured):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    try:
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except ssl.SSLError:
        pass
    with socket.create_connection(("127.0.0.1", secured.ports["SASL_SSL"]), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            ctx.wrap_socket(raw).do_handshake()


def test_kafka_python_over_sasl_ssl_scram_and_ssl_client_certificates(secured):
    from kafka import KafkaConsumer, KafkaProducer

    topic = unique("kp")
    ca = str(secured.dir / "ca.pem")
    sasl = dict(bootstrap_servers=f"127.0.0.1:{secured.ports['SASL_SSL']}", security_protocol="SASL_SSL",
                sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                sasl_plain_password="alice-secret", ssl_cafile=ca, ssl_check_hostname=False)
    tls = dict(bootstrap_servers=f"127.0.0.1:{secured.ports['SSL']}", security_protocol="SSL",
               ssl_cafile=ca, ssl_certfile=str(secured.dir / "alice.pem"),
               ssl_keyfile=str(secured.dir / "alice.key"), ssl_check_hostname=False)
    for conf, value in ((sasl, b"sasl"), (tls, b"tls")):
        p = KafkaProducer(**conf)
        p.send(topic, value).get(timeout=15)
        p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=5000, **sasl)
    assert sorted(m.value for m in c) == [b"sasl", b"tls"]
    c.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="needs kcat")
def test_kcat_with_sasl_scram(secured):
    topic = unique("kcat")
    conf = ["-b", f"127.0.0.1:{secured.ports['SASL_PLAINTEXT']}", "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice",
            "-X", "sasl.password=alice-secret"]
    out = subprocess.run(["kcat", *conf, "-P", "-t", topic], input=b"a\nb\n", capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr
    out = subprocess.run(["kcat", *conf, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         capture_output=True, timeout=30)
    assert sorted(out.stdout.split()) == [b"a", b"b"], out.stderr
    bad = [x.replace("alice-secret", "nope") for x in conf]
    out = subprocess.run(["kcat", *bad, "-L", "-m", "3"], capture_output=True, timeout=30)
    assert out.returncode != 0 and b"Authentication failed" in out.stderr


def _sasl_raw(port: int, mechanism: str, token: bytes, handshake_version: int = 1,
              authenticate_version: int = 2):
    """A raw connection through SaslHandshake and one SaslAuthenticate (PLAIN: one token)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(17, handshake_version, mechanism=mechanism))
    hs = decode_response(17, handshake_version, read_frame(s))[1]
    assert hs.error_code == 0
    s.sendall(request(36, authenticate_version, auth_bytes=token))
    frame = read_frame(s)
    return s, (decode_response(36, authenticate_version, frame)[1] if frame else None)


def test_raw_sasl_state_machine(secured):
    port = secured.ports["SASL_PLAINTEXT"]
    # Anything but ApiVersions/SaslHandshake before authenticating closes the connection.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    assert api_versions_ok(s)
    s.sendall(request(3, 12, topics=None, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False))
    assert closed(s)
    # An unknown mechanism is answered with the enabled ones.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(17, 1, mechanism="GSSAPI"))
    hs = decode_response(17, 1, read_frame(s))[1]
    assert hs.error_code == 33 and set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    # PLAIN, good: the connection then serves requests.
    s, auth = _sasl_raw(port, "PLAIN", b"\0alice\0alice-secret")
    assert auth.error_code == 0 and api_versions_ok(s)
    # PLAIN, bad: SASL_AUTHENTICATION_FAILED, delayed, then closed.
    started = time.monotonic()
    s, auth = _sasl_raw(port, "PLAIN", b"\0alice\0nope")
    assert auth.error_code == 58 and time.monotonic() - started >= 0.09 and closed(s)
    # v0 handshake: the token travels bare, and so does the answer.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(17, 0, mechanism="PLAIN"))
    assert decode_response(17, 0, read_frame(s))[1].error_code == 0
    token = b"\0alice\0alice-secret"
    s.sendall(len(token).to_bytes(4, "big") + token)
    assert read_frame(s) == b"\0\0\0\0"
    assert api_versions_ok(s)


def test_expired_session_is_closed_and_librdkafka_reauthenticates(tmp_path, camus_server):
    add_user(tmp_path, "alice", "alice-secret", "SCRAM-SHA-512")
    s = camus_server(tmp_path, ["--listen", "SASL_PLAINTEXT://127.0.0.1:0", "--reauth-ms", "1500"])
    port = listener_ports(s, 1)["SASL_PLAINTEXT"]
    conn, auth = _sasl_raw(port, "PLAIN", b"\0alice\0alice-secret", authenticate_version=1)
    assert auth.error_code == 0 and auth.session_lifetime.total_seconds() == 1.5
    assert api_versions_ok(conn)
    time.sleep(1.7)
    conn.sendall(request(3, 12, topics=None, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False))
    assert closed(conn)  # expired: no answer
    # librdkafka re-authenticates within the session (KIP-368) and keeps producing.
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": "alice-secret", **QUIET}
    topic = unique("reauth")
    errors: list = []
    p = Producer({**conf, "error_cb": errors.append})
    for i in range(8):
        p.produce(topic, str(i).encode())
        assert p.flush(10) == 0
        time.sleep(0.5)
    assert not errors
    # Only the raw connection above outlived its session: librdkafka's never did.
    assert s.stderr().count("SASL session of User:alice expired") == 1
    assert consume(conf, topic, 8) == [str(i).encode() for i in range(8)]


def test_hostile_handshakes_leave_the_broker_serving(secured):
    rng = random.Random(15)
    keep = socket.create_connection(("127.0.0.1", secured.port), timeout=10)
    assert api_versions_ok(keep)
    for i in range(60):
        which = rng.choice(["SASL_SSL", "SSL", "SASL_PLAINTEXT"])
        s = socket.create_connection(("127.0.0.1", secured.ports[which]), timeout=5)
        try:
            kind = i % 4
            if kind == 0:  # garbage where a TLS ClientHello belongs
                s.sendall(os.urandom(rng.randrange(1, 600)))
            elif kind == 1 and which == "SASL_PLAINTEXT":  # random SASL tokens
                s.sendall(request(17, 1, mechanism=rng.choice(["PLAIN", "SCRAM-SHA-512", "x" * 300])))
                read_frame(s)
                s.sendall(request(36, 2, auth_bytes=os.urandom(rng.randrange(0, 300))))
            elif kind == 2:  # a truncated frame, then hang up
                s.sendall(b"\x00\x00\x10\x00" + os.urandom(50))
            else:  # a TLS ClientHello cut short
                s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(40))
            s.settimeout(2)
            try:
                s.recv(100)
            except (socket.timeout, ConnectionError):
                pass
        finally:
            s.close()
    assert api_versions_ok(keep)
    topic = unique("after-fuzz")
    assert produce(sasl_ssl(secured), topic, [b"still here"]) == (0, [])
    assert consume(sasl_ssl(secured), topic, 1) == [b"still here"]


def test_certificate_subject_is_the_principal_acls_see(tmp_path, camus_server):
    """On an SSL listener the principal is User:<subject, RFC 2253>, as Kafka names it: a DENY
    for that principal stops alice's certificate on that topic; an ALLOW for anonymous
    clients keeps them writing (once a topic has an ACL, allow.everyone.if.no.acl.found no
    longer covers it, as in Kafka)."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    make_pki(tmp_path)
    s = camus_server(tmp_path / "data", [
        "--listen", "SSL://127.0.0.1:0", "--ssl-cert", str(tmp_path / "server.pem"),
        "--ssl-key", str(tmp_path / "server.key"), "--ssl-ca", str(tmp_path / "ca.pem"),
        "--ssl-client-auth", "required", "--authorizer", "--allow-everyone-if-no-acl-found"])
    s.ports, s.dir = listener_ports(s, 1), tmp_path
    denied, open_topic = unique("cert-denied"), unique("cert-open")
    a = AdminClient({"bootstrap.servers": s.bootstrap, **QUIET})  # User:ANONYMOUS; no ACL yet
    deny = AclBinding(ResourceType.TOPIC, denied, ResourcePatternType.LITERAL,
                      "User:CN=alice,O=camus-test", "*", AclOperation.WRITE, AclPermissionType.DENY)
    anonymous = AclBinding(ResourceType.TOPIC, denied, ResourcePatternType.LITERAL, "User:ANONYMOUS",
                           "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in a.create_acls([deny, anonymous], request_timeout=15).values():
        f.result()
    assert produce(ssl_client(s), open_topic, [b"ok"]) == (0, [])
    errors: list = []
    p = Producer({**ssl_client(s), "message.timeout.ms": 5000})
    p.produce(denied, b"no", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce({"bootstrap.servers": s.bootstrap, **QUIET}, denied, [b"anonymous"]) == (0, [])
