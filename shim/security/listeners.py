"""Listeners as Kafka names them, and the broker's security settings.

A listener is `PROTOCOL://HOST:PORT`; a bare `HOST:PORT` means PLAINTEXT, as it always did
for `camus serve --listen`. Metadata advertises the listener a client came in on, so a
client that bootstrapped over SASL_SSL is never sent to the PLAINTEXT port.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# protocol -> (TLS, SASL)
PROTOCOLS = {"PLAINTEXT": (False, False), "SSL": (True, False),
             "SASL_PLAINTEXT": (False, True), "SASL_SSL": (True, True)}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_AUTH = ("none", "requested", "required")


@dataclass
class Listener:
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return PROTOCOLS[self.protocol][0]

    @property
    def sasl(self) -> bool:
        return PROTOCOLS[self.protocol][1]

    def __str__(self) -> str:
        return f"{self.protocol}://{self.host}:{self.port}"


def parse_listener(text: str) -> Listener:
    """`PROTOCOL://HOST:PORT` or `HOST:PORT` (PLAINTEXT); ValueError says what is wrong."""
    protocol, sep, rest = text.partition("://")
    if not sep:
        protocol, rest = "PLAINTEXT", text
    protocol = protocol.upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"{text!r}: unknown security protocol {protocol!r}; expected one of "
                         f"{', '.join(PROTOCOLS)}")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: expected [PROTOCOL://]HOST:PORT with a port in 0..65535")
    return Listener(protocol, host.strip("[]") or "127.0.0.1", int(port))


@dataclass
class Security:
    """Everything `camus serve` was told about authentication and authorization."""

    # Empty: one PLAINTEXT listener at Config.host:Config.port (what `serve` then records here).
    listeners: list[Listener] = field(default_factory=list)
    # TLS (SSL and SASL_SSL listeners): PEM files.
    certfile: Path | None = None
    keyfile: Path | None = None
    key_password: str | None = None
    cafile: Path | None = None  # client certificates are checked against it
    client_auth: str = "none"  # ssl.client.auth: none | requested | required
    mechanisms: tuple[str, ...] = MECHANISMS  # sasl.enabled.mechanisms
    reauth_ms: int = 0  # connections.max.reauth.ms: 0 = sessions do not expire
    failed_auth_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    # sasl.server.max.receive.size: the largest frame a SASL listener reads before the
    # connection has authenticated (a stranger cannot hold the request memory pool).
    sasl_max_receive_size: int = 524288
    authorizer: bool = False  # ACLs are enforced
    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False  # allow.everyone.if.no.acl.found
    quota_window_num: int = 11  # quota.window.num
    quota_window_seconds: float = 1.0  # quota.window.size.seconds

    def check(self) -> None:
        """ValueError when the settings cannot work together."""
        seen = set()
        for lst in self.listeners:
            if lst.port and (lst.host, lst.port) in seen:
                raise ValueError(f"two listeners on {lst.host}:{lst.port}")
            seen.add((lst.host, lst.port))
        if any(lst.tls for lst in self.listeners) and not (self.certfile and self.keyfile):
            raise ValueError("an SSL or SASL_SSL listener needs --ssl-cert and --ssl-key")
        if self.client_auth not in CLIENT_AUTH:
            raise ValueError(f"ssl.client.auth {self.client_auth!r}: expected one of "
                             f"{', '.join(CLIENT_AUTH)}")
        if self.client_auth != "none" and not self.cafile:
            raise ValueError(f"ssl.client.auth={self.client_auth} needs --ssl-ca, the CA that "
                             "signs client certificates")
        unknown = [m for m in self.mechanisms if m not in MECHANISMS]
        if unknown or not self.mechanisms:
            raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unknown) or 'empty'}; "
                             f"camus has {', '.join(MECHANISMS)}")
        for user in self.super_users:
            if not user.startswith("User:"):
                raise ValueError(f"super user {user!r}: principals are written User:NAME")

    def idle_settings(self) -> str | None:
        """A warning when settings were given that do nothing as combined, else None."""
        idle = [name for name, given in (("super users (--super-users, super.users)", self.super_users),
                                         ("--allow-everyone-if-no-acl-found", self.allow_if_no_acl))
                if given]
        if idle and not self.authorizer:
            return (f"{' and '.join(idle)} given without an authorizer (--authorizer, "
                    "authorizer.class.name): ACLs are not enforced, so this does nothing and "
                    "every client may do everything")
        return None

    def apply(self, doc: dict) -> None:
        """Kafka's property names from a `--config` JSON document."""
        if "listeners" in doc:
            value = doc["listeners"]
            items = value.split(",") if isinstance(value, str) else list(value)
            self.listeners = [parse_listener(x.strip()) for x in items if x.strip()]
        for key, attr in (("ssl.certificate.location", "certfile"), ("ssl.key.location", "keyfile"),
                          ("ssl.ca.location", "cafile")):
            if key in doc:
                setattr(self, attr, Path(doc[key]))
        if "ssl.key.password" in doc:
            self.key_password = str(doc["ssl.key.password"])
        if "ssl.client.auth" in doc:
            self.client_auth = str(doc["ssl.client.auth"]).lower()
        if "sasl.enabled.mechanisms" in doc:
            value = doc["sasl.enabled.mechanisms"]
            items = value.split(",") if isinstance(value, str) else list(value)
            self.mechanisms = tuple(m.strip().upper() for m in items if m.strip())
        for key, attr in (("connections.max.reauth.ms", "reauth_ms"),
                          ("connection.failed.authentication.delay.ms", "failed_auth_delay_ms")):
            if key in doc:
                setattr(self, attr, int(doc[key]))
        if "sasl.server.max.receive.size" in doc:
            value = doc["sasl.server.max.receive.size"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"sasl.server.max.receive.size must be a positive integer, "
                                 f"not {value!r}")
            self.sasl_max_receive_size = value
        if "quota.window.num" in doc:
            self.quota_window_num = max(2, int(doc["quota.window.num"]))
        if "quota.window.size.seconds" in doc:
            self.quota_window_seconds = max(0.1, float(doc["quota.window.size.seconds"]))
        if doc.get("authorizer.class.name"):
            self.authorizer = True
        if "super.users" in doc:
            self.super_users = parse_super_users(doc["super.users"])
        if "allow.everyone.if.no.acl.found" in doc:
            self.allow_if_no_acl = str(doc["allow.everyone.if.no.acl.found"]).lower() == "true"


def parse_super_users(value) -> frozenset[str]:
    """Kafka writes `super.users` as `User:a;User:b`; a JSON list works too."""
    items = value.split(";") if isinstance(value, str) else list(value)
    return frozenset(x.strip() for x in items if x.strip())
