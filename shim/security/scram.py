"""SCRAM (RFC 5802, with SHA-256/512 as RFC 7677 and Kafka name them), the server side.

Written here rather than taken from a library for one quirk: Kafka's ScramSaslServer accepts
a client-final nonce that merely *ends with* the nonce it sent, and librdkafka 2.0.x relies
on it (it sends the client nonce twice); a server that insists on equality, as RFC 5802 and
`scramp` do, locks those clients out. The proof is checked over the client-final message
exactly as sent, as Kafka checks it. Channel binding is not offered (gs2 flag `n` or `y`);
Kafka's delegation-token extension (`tokenauth=true`) is refused.

Credentials hold RFC 5802's StoredKey and ServerKey, never the password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramError(ValueError):
    pass


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode("utf-8"), salt, iterations)


def keys_from_salted(mechanism: str, salted: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) from SaltedPassword."""
    name = HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", name)
    return hashlib.new(name, client_key).digest(), hmac.digest(salted, b"Server Key", name)


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed attribute {part[:40]!r}")
        out.append((key, value))
    return out


def _saslname(value: str) -> str:
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ScramError("bad escape in user name")
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """Two steps: `first(client_first) -> server_first`, `final(client_final) -> server_final`.

    `lookup(user) -> (salt, stored_key, server_key, iterations)`; for an unknown user it
    should return made-up values, so that the exchange fails only at the proof.
    """

    def __init__(self, mechanism: str, lookup) -> None:
        self.hash = HASHES[mechanism]
        self.lookup = lookup
        self.user: str | None = None
        self._state = 0

    def first(self, client_first: str) -> str:
        if self._state != 0:
            raise ScramError("unexpected client-first message")
        flag, sep, rest = client_first.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag not in ("n", "y"):
            raise ScramError("bad gs2 header (channel binding is not offered)")
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("client-first must start n=USER,r=NONCE")
        if any(k == "m" for k, _ in attrs):
            raise ScramError("mandatory extension not supported")
        if ("tokenauth", "true") in [tuple(p.split("=", 1)) for p in bare.split(",")[2:] if "=" in p]:
            raise ScramError("delegation tokens are not supported")
        self.user = _saslname(attrs[0][1])
        if authzid and _saslname(authzid.removeprefix("a=")) != self.user:
            raise ScramError("authorization id differs from the user")
        self._salt, self._stored, self._server, iterations = self.lookup(self.user)
        self._gs2 = f"{flag},{authzid},"
        self._nonce = attrs[1][1] + base64.b64encode(os.urandom(24)).decode()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(self._salt).decode()},"
                              f"i={iterations}")
        self._client_first_bare = bare
        self._state = 1
        return self._server_first

    def final(self, client_final: str) -> str:
        if self._state != 1:
            raise ScramError("unexpected client-final message")
        self._state = 2
        without_proof, sep, proof = client_final.rpartition(",p=")
        if not sep:
            raise ScramError("client-final without a proof")
        attrs = dict(_attributes(without_proof))
        if attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise ScramError("channel binding data differs from the gs2 header")
        if not attrs.get("r", "").endswith(self._nonce):  # Kafka's leniency: see the module doc
            raise ScramError("nonce mismatch")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(self._stored, auth_message, self.hash)
        try:
            sent = base64.b64decode(proof, validate=True)
        except ValueError as exc:
            raise ScramError("proof is not base64") from exc
        if len(sent) != len(signature):
            raise ScramError("proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(sent, signature))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), self._stored):
            raise ScramError("proof does not verify")
        return "v=" + base64.b64encode(hmac.digest(self._server, auth_message, self.hash)).decode()
