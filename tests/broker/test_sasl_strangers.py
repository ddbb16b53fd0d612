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
    mechanisms, at 16384 iterations (camus user add's default is 4096)."""
    data = tmp_path_factory.mktemp("strangers") / "data"
    add_user(data, "alice", "alice-secret", iterations=16384)
    s = _start(data)
    s.dir = data
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


# -- user names cannot be enumerated ---------------------------------------------------------

def scram_first(port: int, user: str, mechanism: str, password: str = "wrong"):
    """(socket, scramp client, client nonce, server-first attributes) after SaslHandshake v1
    and the client-first SaslAuthenticate v2."""
    import scramp

    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request(17, 1, mechanism=mechanism))
    assert decode_response(17, 1, read_frame(s))[1].error_code == 0
    client = scramp.ScramClient([mechanism], user, password)
    first = client.get_client_first()
    s.sendall(request(36, 2, auth_bytes=first.encode()))
    answer = decode_response(36, 2, read_frame(s))[1]
    assert answer.error_code == 0, answer.error_message
    client.set_server_first(answer.auth_bytes.decode())
    attrs = dict(part.split("=", 1) for part in answer.auth_bytes.decode().split(","))
    return s, client, first.rpartition(",r=")[2], attrs


def scram_final(s: socket.socket, client) -> tuple[int, str | None]:
    s.sendall(request(36, 2, auth_bytes=client.get_client_final().encode()))
    answer = decode_response(36, 2, read_frame(s))[1]
    return answer.error_code, answer.error_message


def unknown_salt(server, user: str = "nobody", mechanism: str = "SCRAM-SHA-256") -> str:
    s, _, _, attrs = scram_first(server.ports["SASL_PLAINTEXT"], user, mechanism)
    s.close()
    return attrs["s"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_tells_a_known_user_from_an_unknown_one_only_by_the_final_failure(sasl_broker,
                                                                                 mechanism):
    import base64

    port = sasl_broker.ports["SASL_PLAINTEXT"]
    seen = {}
    for user in ("alice", "nobody"):
        s, client, nonce, attrs = scram_first(port, user, mechanism)
        assert sorted(attrs) == ["i", "r", "s"]
        assert attrs["r"].startswith(nonce)
        seen[user] = {"iterations": attrs["i"], "salt bytes": len(base64.b64decode(attrs["s"])),
                      "server nonce": len(attrs["r"]) - len(nonce),
                      "final": scram_final(s, client), "closed": closed(s)}
    assert seen["alice"]["iterations"] == "16384"
    assert seen["nobody"] == seen["alice"]
    assert seen["nobody"]["final"][0] == 58  # SASL_AUTHENTICATION_FAILED
    # The decoy salt is the same every time for a name, and differs between names.
    assert unknown_salt(sasl_broker, "nobody", mechanism) == unknown_salt(sasl_broker, "nobody",
                                                                          mechanism)
    assert unknown_salt(sasl_broker, "nobody", mechanism) != unknown_salt(sasl_broker, "nobody2",
                                                                          mechanism)


def test_an_unknown_users_salt_survives_a_restart_and_is_the_brokers_own(tmp_path):
    first, other = tmp_path / "first", tmp_path / "other"
    for d in (first, other):
        add_user(d, "alice", "alice-secret")
    a, b = _start(first), _start(other)
    try:
        before, elsewhere = unknown_salt(a), unknown_salt(b)
    finally:
        a.stop()
        b.stop()
    a = _start(first)
    try:
        assert unknown_salt(a) == before
    finally:
        a.stop()
    assert before != elsewhere  # a secret per broker: the salt cannot be computed from outside
    assert (first / "sasl-secret").stat().st_mode & 0o777 == 0o600


def test_plain_checks_an_unknown_users_password_as_hard_as_a_known_users(sasl_broker):
    """Structural, not timed: the credential an unknown name's PLAIN password is checked
    against has the mechanism, iteration count and salt length of a real user's, and goes
    through the same password_matches."""
    from shim.security.sasl import plain_credential
    from shim.security.users import UserStore, keys

    store = UserStore(sasl_broker.dir)
    known = plain_credential(store, "alice")
    unknown = plain_credential(store, "nobody")
    shape = lambda m, cred, real: (m, keys(cred)[3], len(keys(cred)[0]), real)  # noqa: E731
    assert shape(*known) == ("SCRAM-SHA-256", 16384, 32, True)
    assert shape(*unknown) == ("SCRAM-SHA-256", 16384, 32, False)
    assert plain_credential(store, "nobody")[1]["salt"] == unknown[1]["salt"]


def test_decoys_take_the_shape_most_users_have(tmp_path):
    from shim.security.users import UserStore, keys, make_credential

    store = UserStore(tmp_path / "data")
    assert store.typical("SCRAM-SHA-512") == (4096, 32)  # camus user add's, before any user
    for name, salt in (("a", b"s" * 20), ("b", b"t" * 20), ("c", None)):
        iterations = 4096 if salt is None else 8192
        store.set(name, "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "p", iterations, salt))
    salt, _, _, iterations = keys(store.decoy("x", "SCRAM-SHA-512"))
    assert (iterations, len(salt)) == (8192, 20)
    assert store.typical() == "SCRAM-SHA-512"  # what PLAIN's decoy is
    memory = UserStore(None)  # no data dir: users from AlterUserScramCredentials only
    assert memory.typical("SCRAM-SHA-256") == (4096, 32)
    memory.set("a", "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "p", 16384))
    assert memory.typical("SCRAM-SHA-256") == (16384, 32)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sasl-secret").write_bytes(b"short")
    with pytest.raises(OSError, match="expected 32 random bytes"):
        UserStore(broken).load_secret()
