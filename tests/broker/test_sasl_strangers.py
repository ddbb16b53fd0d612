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
from tests.broker.test_resource_limits import closed_by_peer, padded_api_versions, read_answer
from tests.broker.test_security import QUIET, produce


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
