"""One SASL authentication exchange, sans-IO: tokens in, tokens out, a principal at the end.

PLAIN (RFC 4616) checks the password against the user's stored SCRAM credential (there is
no other copy of it). SCRAM-SHA-256/512 (RFC 5802, RFC 7677) runs in `scram`. A user
who does not exist gets the same treatment as one who does: a SCRAM exchange goes on with a
salt derived from the name and this process's secret, so the first server message looks the
same, and fails at the proof, where a wrong password fails; PLAIN spends the same key
derivation. Every failure is one `AuthenticationFailed` with the same message, which does
not say which part was wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os


from . import users as userdb
from .scram import ScramError, ScramServer

log = logging.getLogger("camus.security")
_SECRET = os.urandom(32)  # keeps made-up salts stable per name within one run


class AuthenticationFailed(Exception):
    def __init__(self, mechanism: str) -> None:
        super().__init__("Authentication failed during authentication due to invalid "
                         f"credentials with SASL mechanism {mechanism}")


class Exchange:
    """Feed client tokens to `step`; `done` once the client is authenticated as `user`."""

    def __init__(self, mechanism: str, store: userdb.UserStore) -> None:
        self.mechanism = mechanism
        self.store = store
        self.user: str | None = None
        self.done = False
        self._scram = None
        if mechanism != "PLAIN":
            self._scram = ScramServer(mechanism, self._lookup)

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    def _lookup(self, user: str):
        self.user = user
        cred = self.store.credential(user, self.mechanism)
        if cred is not None:
            return userdb.keys(cred)
        made_up = hmac.digest(_SECRET, user.encode(), "sha256")
        return made_up, os.urandom(64), os.urandom(64), userdb.MIN_ITERATIONS

    def step(self, token: bytes) -> bytes:
        """The server's answer to `token`; raises AuthenticationFailed."""
        if self.done:
            raise AuthenticationFailed(self.mechanism)
        try:
            if self._scram is None:
                return self._plain(token)
            return self._scram_step(token.decode("utf-8"))
        except (ScramError, UnicodeDecodeError, ValueError, KeyError) as exc:
            log.debug("SASL %s for %r failed: %s", self.mechanism, self.user, exc)
            raise AuthenticationFailed(self.mechanism) from exc

    def _plain(self, token: bytes) -> bytes:
        parts = token.decode("utf-8").split("\0")
        if len(parts) != 3 or not parts[1] or parts[0] not in ("", parts[1]):
            raise ValueError("PLAIN expects [authzid] NUL authcid NUL password")
        _, user, password = parts
        matched = False
        creds = [(m, self.store.credential(user, m)) for m in userdb.HASHES]
        creds = [(m, c) for m, c in creds if c is not None]
        if creds:
            matched = userdb.password_matches(*creds[0], password)
        else:  # the same work as for a real user
            hashlib.pbkdf2_hmac("sha512", password.encode(), _SECRET, userdb.MIN_ITERATIONS)
        if not matched:
            raise ValueError("bad password")
        self.user, self.done = user, True
        return b""

    def _scram_step(self, message: str) -> bytes:
        s = self._scram
        if s.user is None:
            return s.first(message).encode()
        answer = s.final(message)
        if self.store.credential(self.user, self.mechanism) is None:
            raise ValueError("no such user")  # unreachable in practice: the made-up keys fail first
        self.done = True
        return answer.encode()
