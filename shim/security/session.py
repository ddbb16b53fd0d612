"""A connection's authentication state, as Kafka's SASL server authenticator keeps it.

On a SASL listener a connection may send ApiVersions and SaslHandshake, then (handshake
v1) SaslAuthenticate until the exchange completes; anything else before that closes the
connection, as Kafka closes it. A v0 handshake means the tokens follow as bare
size-prefixed frames with no request header (`raw_tokens`); the server reads them
through `step`.

Sessions (KIP-368): with `connections.max.reauth.ms` set, an authentication holds for
that long; SaslAuthenticate v1+ tells the client (session_lifetime_ms) so it
re-authenticates in time with a new SaslHandshake + SaslAuthenticate on the same
connection, which must name the same principal and mechanism. A connection whose session
has expired is closed at its next request other than SaslHandshake, whatever the client's
version. A failed authentication is answered SASL_AUTHENTICATION_FAILED, after
`connection.failed.authentication.delay.ms`, and the connection closes.

Until a connection has authenticated, and while it re-authenticates, no frame may be larger
than `sasl.server.max.receive.size` (`max_receive_size`), as in Kafka: a larger one closes
the connection before it can take any of the shared request memory.
"""

from __future__ import annotations

import time

from shim.protocol import ErrorCode

from .listeners import Listener, Security
from .sasl import AuthenticationFailed, Exchange
from .users import UserStore

ANONYMOUS = "User:ANONYMOUS"
BEFORE_AUTH = {"ApiVersions", "SaslHandshake"}


class Session:
    def __init__(self, listener: Listener, security: Security, users: UserStore,
                 tls_principal: str | None = None, clock=time.monotonic) -> None:
        self.listener = listener
        self.security = security
        self.users = users
        self.clock = clock
        self.principal = tls_principal or ANONYMOUS
        self.authenticated = not listener.sasl
        self.mechanism: str | None = None
        self.exchange: Exchange | None = None
        self.raw_tokens = False
        self.expires: float | None = None
        self.close_after_answer = False  # set when an authentication failed

    @property
    def max_receive_size(self) -> int | None:
        """The frame size limit while (re-)authenticating, Kafka's sasl.server.max.receive.size;
        None once authenticated (the broker's own limit then applies)."""
        if self.authenticated and self.exchange is None:
            return None
        return self.security.sasl_max_receive_size

    @property
    def expired(self) -> bool:
        return self.expires is not None and self.clock() >= self.expires

    def refuse(self, api_name: str) -> str | None:
        """Why a request for `api_name` closes the connection now, or None to serve it."""
        if self.exchange is not None and api_name != "SaslAuthenticate":
            return f"{api_name} in the middle of a SASL {self.exchange.mechanism} exchange"
        if not self.authenticated and self.exchange is None and api_name not in BEFORE_AUTH:
            return f"{api_name} before SASL authentication"
        if self.authenticated and self.expired and api_name not in BEFORE_AUTH:
            return f"{api_name} after the SASL session of {self.principal} expired"
        return None

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if not self.listener.sasl:
            return ErrorCode.illegal_sasl_state
        if mechanism not in self.security.mechanisms:
            return ErrorCode.unsupported_sasl_mechanism
        if self.authenticated and mechanism != self.mechanism:
            return ErrorCode.illegal_sasl_state  # re-authentication keeps the mechanism
        self.exchange = Exchange(mechanism, self.users)
        self.raw_tokens = version == 0
        return ErrorCode.none

    def step(self, token: bytes) -> tuple[bytes, str | None, int]:
        """(answer token, error message or None, session lifetime in ms) for one token."""
        exchange = self.exchange
        if exchange is None:
            self.close_after_answer = True
            return b"", "SaslAuthenticate without a SaslHandshake", 0
        try:
            answer = exchange.step(token)
            if exchange.done and self.authenticated and exchange.principal != self.principal:
                raise AuthenticationFailed(exchange.mechanism)  # a new principal on re-auth
        except AuthenticationFailed as exc:
            self.exchange, self.raw_tokens, self.close_after_answer = None, False, True
            return b"", str(exc), 0
        if not exchange.done:
            return answer, None, 0
        self.exchange, self.raw_tokens = None, False
        self.authenticated, self.principal, self.mechanism = True, exchange.principal, exchange.mechanism
        lifetime = self.security.reauth_ms
        self.expires = self.clock() + lifetime / 1000 if lifetime > 0 else None
        return answer, None, lifetime
