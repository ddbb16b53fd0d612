"""What a client that has not authenticated can do to a SASL listener (issue 24).

Kafka's SASL server authenticator bounds strangers: frames before authentication may be no
larger than `sasl.server.max.receive.size`, only ApiVersions and the SASL requests are
answered, and a user name cannot be told to exist from outside. Driven over real sockets:
raw frames built with the project's codec for what no client sends, confluent-kafka and
scramp for what clients do.
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from shim.security.listeners import Security
from tests.broker.conftest import Server, unique
from tests.broker.security_helpers import add_user, listener_ports
from tests.broker.test_bad_input import api_versions_ok, closed, read_frame, request
from tests.broker.test_resource_limits import closed_by_peer, padded_api_versions, read_answer
from tests.broker.test_security import QUIET, produce
from tests.protocol.protocol_helpers import decode_response


def _start(data_dir, config: dict | None = None) -> Server:
    extra = ["--listen", "SASL_PLAINTEXT://127.0.0.1:0"]
    if config is not None:
        path = data_dir.parent / f"{data_dir.name}.json"
        path.write_text(json.dumps(config))
        extra += ["--config", str(path)]
    s = Server(data_dir, extra)
    s.ports = listener_ports(s, 1)
    return s


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """camus serve with PLAINTEXT and SASL_PLAINTEXT listeners; alice has both SCRAM
    mechanisms."""
    data = tmp_path_factory.mktemp("strangers") / "data"
    add_user(data, "alice", "alice-secret")
    s = _start(data)
    yield s
    s.stop()


def sasl_port(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.ports["SASL_PLAINTEXT"]), timeout=10)


def alice(server, mechanism: str = "PLAIN") -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{server.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": "alice", "sasl.password": "alice-secret", **QUIET}


# -- sasl.server.max.receive.size ------------------------------------------------------------

def test_a_strangers_huge_frame_closes_it_and_leaves_request_memory_to_the_rest(sasl_broker):
    stranger = sasl_port(sasl_broker)
    # 100 MiB announced (all of queued.max.request.bytes), a Produce header begun, then nothing.
    stranger.sendall(struct.pack(">ihhi", 100 << 20, 0, 9, 1))
    time.sleep(0.3)  # read by the broker by now
    # With the stranger's socket still open, an authenticated client's large requests are
    # served, even those past the pre-authentication limit.
    topic = unique("after-stranger")
    assert produce(alice(sasl_broker), topic, [b"a" * 300_000, b"b" * 700_000]) == (0, [])
    assert closed_by_peer(stranger, 5)
    stranger.close()
    assert "sasl.server.max.receive.size before authentication" in sasl_broker.stderr()


def test_sasl_server_max_receive_size_is_configurable(tmp_path):
    s = _start(tmp_path / "data", {"sasl.server.max.receive.size": 4096})
    try:
        small, big = sasl_port(s), sasl_port(s)
        small.sendall(padded_api_versions(3000, 1))
        assert read_answer(small, 5) == 1
        big.sendall(padded_api_versions(5000, 2))
        assert closed_by_peer(big, 5)
        # PLAINTEXT authenticates nobody: the limit does not apply there.
        plain = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        plain.sendall(padded_api_versions(5000, 3))
        assert read_answer(plain, 5) == 3
    finally:
        s.stop()


@pytest.mark.parametrize("value", [0, -1, "524288", True, 1.5])
def test_a_bad_sasl_server_max_receive_size_is_refused_by_name(value):
    with pytest.raises(ValueError, match="sasl.server.max.receive.size"):
        Security().apply({"sasl.server.max.receive.size": value})


# -- what is answered before authentication --------------------------------------------------

SASL_OPENERS = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate


def every_request_kio_knows() -> list[tuple[int, int]]:
    """(API key, version) for every request schema the codec has, served or not."""
    from kio.index import load_request_schema
    from kio.schema.index import api_key_map

    out = []
    for key in sorted(api_key_map):
        for version in range(64):
            try:
                load_request_schema(key, version)
            except Exception:
                continue
            out.append((key, version))
    return out


def test_before_authentication_only_api_versions_and_sasl_get_an_answer(sasl_broker):
    """Every request the codec knows, at every version it knows, each its body's zero value:
    on a SASL listener before authentication, anything but ApiVersions and the SASL requests
    (supported, unsupported, or an API camus does not implement) closes the connection
    without an answer, as Kafka's authenticator does."""
    answered = []
    for key, version in every_request_kio_knows():
        if key in SASL_OPENERS:
            continue
        s = sasl_port(sasl_broker)
        s.sendall(request(key, version))
        if not closed(s):
            answered.append(f"{key}v{version}")
        s.close()
    assert answered == []
    # ApiVersions, even one too new to parse, is answered and keeps the connection.
    s = sasl_port(sasl_broker)
    s.sendall(request(18, 4, client_software_name="t", client_software_version="1"))
    too_new = struct.pack(">ihhih", 10, 18, 99, 5, -1)  # v99, no body: answered in v0
    s.sendall(too_new)
    assert decode_response(18, 4, read_frame(s))[1].error_code == 0
    assert decode_response(18, 0, read_frame(s))[1].error_code == 35  # UNSUPPORTED_VERSION
    assert api_versions_ok(s)


def test_after_authentication_unsupported_requests_are_answered_and_keep_the_connection(sasl_broker):
    s = sasl_port(sasl_broker)
    s.sendall(request(17, 1, mechanism="PLAIN"))
    assert decode_response(17, 1, read_frame(s))[1].error_code == 0
    s.sendall(request(36, 2, auth_bytes=b"\0alice\0alice-secret"))
    assert decode_response(36, 2, read_frame(s))[1].error_code == 0
    for key, version in ((22, 6), (38, 3)):  # InitProducerId v6, CreateDelegationToken v3
        s.sendall(request(key, version))
        assert decode_response(key, version, read_frame(s))[1].error_code == 35
    assert api_versions_ok(s)
