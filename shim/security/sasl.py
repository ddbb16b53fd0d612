"""One SASL authentication exchange, sans-IO: tokens in, tokens out, a principal at the end.

PLAIN (RFC 4616) checks the password against the user's stored SCRAM credential (there is
no other copy of it). SCRAM-SHA-256/512 (RFC 5802, RFC 7677) runs in `scram`. A user
who does not exist gets the same treatment as one who does, through the store's decoy
credential (`users.UserStore.decoy`): a SCRAM exchange goes on with the decoy's salt and
iteration count, which look like a real user's and stay the same for the name across
restarts, and fails at the proof, where a wrong password fails; PLAIN checks the password
against the decoy exactly as against a real credential (`plain_credential`). Every failure
is one `AuthenticationFailed` with the same message, which does not say which part was
wrong.
"""

from __future__ import annotations

import logging

from . import users as userdb
from .scram import ScramError, ScramServer

log = logging.getLogger("camus.security")


def plain_credential(store: userdb.UserStore, user: str) -> tuple[str, dict, bool]:
    """(mechanism, credential, real) a PLAIN password for `user` is checked against: the
    user's first SCRAM credential or, for a name that has none, a decoy of the mechanism
    most users' first credential has, so that both cost the same key derivation. The decoy
    is made either way, and the lookups are the same."""
    mechanism = store.typical()
    decoy = store.decoy(user, mechanism)
    creds = [(m, store.credential(user, m)) for m in userdb.HASHES]
    return next(((m, c, True) for m, c in creds if c is not None), (mechanism, decoy, False))


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
        decoy = self.store.decoy(user, self.mechanism)  # made for everyone: the same work
        return userdb.keys(self.store.credential(user, self.mechanism) or decoy)

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
        mechanism, cred, real = plain_credential(self.store, user)
        if not (userdb.password_matches(mechanism, cred, password) and real):
            raise ValueError("bad password")
        self.user, self.done = user, True
        return b""

    def _scram_step(self, message: str) -> bytes:
        s = self._scram
        if s.user is None:
            return s.first(message).encode()
        answer = s.final(message)
        if self.store.credential(self.user, self.mechanism) is None:
            raise ValueError("no such user")  # unreachable in practice: the decoy's keys fail first
        self.done = True
        return answer.encode()
