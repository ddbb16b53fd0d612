"""The front door in front of camus's own embedded broker, a real Kafka-protocol server with
SASL and TLS listeners that these tests may stop and restart: the connection's security
settings, and what clients get while the cluster is down."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from kio.index import load_request_schema
from shim.cluster.connection import settings_from
from shim.protocol import ErrorCode, build
from tests.broker.conftest import REPO, Server, unique
from tests.broker.security_helpers import add_user, listener_ports, make_pki
from tests.protocol.protocol_helpers import decode_response, encode_request

from .conftest import QUIET, consume, front_door, read_frame, values

def _run_front_door(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "camus.cli", "serve", "--listen", "127.0.0.1:0",
                           *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _produce(bootstrap: str, topic: str, values: list[bytes], **conf) -> list:
    from confluent_kafka import Producer
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  **QUIET, **conf})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: errors.append(err) if err else None)
    p.flush(30)
    return errors


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """An embedded camus with a SASL_SSL listener and the SCRAM user `camus`."""
    d = tmp_path_factory.mktemp("upstream")
    pki = make_pki(d)
    add_user(d / "data", "camus", "front-door-secret")
    s = Server(d / "data", ["--listen", "SASL_SSL://127.0.0.1:0", "--ssl-cert", str(pki["cert"]),
                            "--ssl-key", str(pki["key"])])
    s.ports = listener_ports(s, 1)
    s.dir = d
    yield s
    s.stop()


def _sasl_options(server, password="front-door-secret", mechanism="SCRAM-SHA-512") -> list[str]:
    return ["--kafka-option", "security.protocol=SASL_SSL",
            "--kafka-option", f"sasl.mechanism={mechanism}",
            "--kafka-option", "sasl.username=camus", "--kafka-option", f"sasl.password={password}",
            "--kafka-option", f"ssl.ca.location={server.dir / 'ca.pem'}"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_sasl_ssl_to_the_cluster(secured, mechanism):
    upstream = f"127.0.0.1:{secured.ports['SASL_SSL']}"
    door = front_door(upstream, *_sasl_options(secured, mechanism=mechanism))
    try:
        topic = unique("sasl")
        assert _produce(door.bootstrap, topic, [b"one", b"two"]) == []
        assert values(consume({"bootstrap.servers": door.bootstrap}, topic, 2)) == [b"one", b"two"]
        # The records are the cluster's: a client of the cluster reads them there, with the
        # same settings as librdkafka takes them.
        settings = settings_from(upstream, None, _sasl_options(secured, mechanism=mechanism)[1::2])
        assert values(consume(settings.client_config(), topic, 2)) == [b"one", b"two"]
    finally:
        door.stop()


def test_tls_between_clients_and_camus(secured):
    """An SSL listener on the front door: TLS ends at camus, which advertises to each client
    the listener it came in on."""
    from confluent_kafka.admin import AdminClient
    upstream = f"127.0.0.1:{secured.ports['SASL_SSL']}"
    door = front_door(upstream, *_sasl_options(secured), "--listen", "SSL://127.0.0.1:0",
                      "--ssl-cert", str(secured.dir / "server.pem"),
                      "--ssl-key", str(secured.dir / "server.key"))
    try:
        door.ports = listener_ports(door, 1)
        tls = {"bootstrap.servers": f"127.0.0.1:{door.ports['SSL']}", "security.protocol": "SSL",
               "ssl.ca.location": str(secured.dir / "ca.pem")}
        md = AdminClient({**tls, **QUIET}).list_topics(timeout=30)
        assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", door.ports["SSL"])]
        topic = unique("tls")
        assert _produce(tls["bootstrap.servers"], topic, [b"sealed"], **{
            k: v for k, v in tls.items() if k != "bootstrap.servers"}) == []
        assert values(consume(tls, topic, 1)) == [b"sealed"]
    finally:
        door.stop()


def test_refused_credentials_and_unreachable_clusters_fail_at_startup(secured, tmp_path):
    upstream = f"127.0.0.1:{secured.ports['SASL_SSL']}"
    out = _run_front_door("--kafka", upstream, *_sasl_options(secured, password="wrong"))
    assert out.returncode == 2
    assert "SASL SCRAM-SHA-512 authentication as 'camus' failed" in out.stderr, out.stderr
    # TLS to a server whose certificate the given CA did not sign.
    other = tmp_path / "other"
    other.mkdir()
    make_pki(other)
    out = _run_front_door("--kafka", upstream, *_sasl_options(secured)[:-1],
                          f"ssl.ca.location={other / 'ca.pem'}")
    assert out.returncode == 2 and "TLS handshake failed" in out.stderr, out.stderr
    # Nothing listens there.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    out = _run_front_door("--kafka", f"127.0.0.1:{free}")
    assert out.returncode == 2
    assert f"no bootstrap server answered: 127.0.0.1:{free}: " in out.stderr, out.stderr
    # Options that mean nothing in front of a cluster are refused, each named.
    out = _run_front_door("--kafka", f"127.0.0.1:{free}", "--data-dir", str(tmp_path))
    assert out.returncode == 2 and "--kafka: not with --data-dir" in out.stderr
    out = subprocess.run([sys.executable, "-m", "camus.cli", "serve", "--kafka", f"127.0.0.1:{free}",
                          "--listen", "SASL_PLAINTEXT://127.0.0.1:0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "camus's listeners are PLAINTEXT or SSL" in out.stderr
    out = _run_front_door("--kafka", "")
    assert out.returncode == 2 and "'' is not HOST:PORT" in out.stderr, out.stderr
    out = _run_front_door("--kafka-option", "security.protocol=SSL")
    assert out.returncode == 2 and "give --kafka too" in out.stderr, out.stderr
    out = _run_front_door("--kafka", f"127.0.0.1:{free}", "--kafka-option", "acks=all")
    assert out.returncode == 2 and "unknown connection setting 'acks'" in out.stderr, out.stderr
    # The switch is the materialiser's: without one, naming a switch is a mistake.
    out = _run_front_door("--kafka", f"127.0.0.1:{free}", "--no-materialise", "--target", "switch")
    assert out.returncode == 2 and "--kafka: not with --target (the switch is the materialiser's" in out.stderr
    out = _run_front_door("--kafka", f"127.0.0.1:{free}", "--instance", "no/slash")
    assert out.returncode == 2 and "illegal instance name 'no/slash'" in out.stderr, out.stderr
    out = _run_front_door("--kafka", f"127.0.0.1:{free}", "--target", "nonsense:1")
    assert out.returncode == 2 and out.stderr.startswith("camus serve: "), out.stderr


def _ask(port: int, api_key: int, version: int, **fields):
    """One raw request to the front door: (decoded answer or None if it closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(encode_request(api_key, version, build(load_request_schema(api_key, version),
                                                         **fields), 11))
        data = read_frame(s)
    return None if data is None else decode_response(api_key, version, data)[1]


def test_a_cluster_that_goes_down_gives_retriable_errors_then_serves_again(tmp_path):
    data = tmp_path / "data"
    upstream = Server(data)
    port = upstream.port
    door = front_door(upstream.bootstrap)
    try:
        topic = unique("down")
        assert _produce(door.bootstrap, topic, [b"before"]) == []
        upstream.stop()
        # No hang and no crash: each request gets the error a client retries on.
        produce = _ask(door.port, 0, 9, acks=-1, timeout=5000, topic_data=[
            {"name": topic, "partition_data": [{"index": 0, "records": None}]}])
        [[part]] = [t.partition_responses for t in produce.responses]
        assert part.error_code == ErrorCode.not_leader_or_follower
        coordinator = _ask(door.port, 10, 3, key="g", key_type=0)
        assert coordinator.error_code == ErrorCode.coordinator_not_available
        join = _ask(door.port, 11, 5, group_id="g", session_timeout=10000, rebalance_timeout=10000,
                    member_id="", protocol_type="consumer", protocols=[])
        assert join.error_code == ErrorCode.coordinator_not_available
        # Metadata cannot say "no topics": the connection closes, and clients reconnect.
        assert _ask(door.port, 3, 12, topics=[{"name": topic}]) is None
        versions = _ask(door.port, 18, 3, client_software_name="t", client_software_version="1")
        assert versions.error_code == ErrorCode.none  # camus itself still answers
        # A client that keeps producing through the outage gets its records in once the
        # cluster is back: librdkafka retries the retriable errors.
        from confluent_kafka import Producer
        errors = []
        p = Producer({"bootstrap.servers": door.bootstrap, "acks": "all",
                      "enable.idempotence": True, "message.timeout.ms": 60000, **QUIET})
        p.produce(topic, b"during", on_delivery=lambda err, msg: errors.append(err))
        p.poll(2)
        assert errors == []  # not yet delivered, not failed either
        upstream = Server(data, ["--listen", f"127.0.0.1:{port}"])
        assert p.flush(60) == 0 and errors == [None]
        assert values(consume({"bootstrap.servers": door.bootstrap}, topic, 2)) == [b"before", b"during"]
        assert door.proc.poll() is None
    finally:
        door.stop()
        upstream.stop()
