"""How camus reaches an Apache Kafka cluster, and one connection to one of its brokers.

`ClusterSettings` holds what a Kafka client is told about a cluster: the bootstrap servers,
`security.protocol`, the SASL mechanism and credentials, the TLS files, and timeouts. They
come from `camus serve --kafka HOST:PORT,...` plus client properties, in a file
(`--kafka-config FILE`, Java's `key=value` format, the file a Kafka client already has) or one
at a time (`--kafka-option key=value`), under the names librdkafka and the Java client use.
A setting camus does not know is an error naming its file, line and column: a typo in a
security setting must not fall back silently to an unauthenticated connection.

`BrokerConnection` is one asyncio connection to one broker: TCP, then TLS, then SASL (PLAIN
or SCRAM-SHA-256/512, through SaslHandshake v1 and SaslAuthenticate), then requests.
Requests are pipelined: each is written at once with the connection's own correlation id,
and the answers, which a Kafka broker sends in request order, resolve them in turn. The
front door forwards a client's request bytes unchanged except for the correlation id
(`call`); camus's own questions (Metadata, FindCoordinator) go through `request`, which
encodes and decodes with kio, the codec `shim.protocol` uses.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses
import hashlib
import hmac
import io
import os
import re
import ssl
import struct
from pathlib import Path
from typing import Any

from kio.index import load_request_schema, load_response_schema

from shim.protocol import ErrorCode, build
from shim.protocol import headers as wire
from shim.protocol.framing import frame

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_RESPONSE = 512 * 1024 * 1024  # a larger size prefix means the stream is not Kafka


class SettingsError(ValueError):
    """A connection setting that cannot be used; the message says where and why."""


class BrokerUnavailable(ConnectionError):
    """The broker could not be reached, refused camus's credentials, or went away."""


@dataclasses.dataclass
class ClusterSettings:
    bootstrap: list[tuple[str, int]]
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True  # ssl.endpoint.identification.algorithm=https, Java's default
    client_id: str = "camus"
    request_timeout_ms: int = 30000
    connect_timeout_ms: int = 10000  # socket.connection.setup.timeout.ms
    metadata_max_age_ms: int = 300000

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def check(self) -> None:
        """SettingsError when the settings cannot work together."""
        if self.sasl and (self.sasl_username is None or self.sasl_password is None):
            raise SettingsError(f"security.protocol={self.security_protocol} needs sasl.username and "
                                "sasl.password (or a sasl.jaas.config naming both)")
        if not self.sasl and (self.sasl_username is not None):
            raise SettingsError(f"sasl.username is set but security.protocol={self.security_protocol} "
                                "does not authenticate with SASL (SASL_PLAINTEXT or SASL_SSL does)")
        tls_files = [f for f in (self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile) if f is not None]
        if tls_files and not self.tls:
            raise SettingsError(f"TLS files are set but security.protocol={self.security_protocol} "
                                "does not use TLS (SSL or SASL_SSL does)")
        if (self.ssl_keyfile is None) != (self.ssl_certfile is None) and self.ssl_keyfile is not None:
            raise SettingsError("ssl.key.location needs ssl.certificate.location too")
        for f in tls_files:
            if not f.is_file():
                raise SettingsError(f"{f}: no such file")
        if self.tls:
            self.ssl_context()  # unreadable PEM files fail here, at startup

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        try:
            if self.ssl_cafile is not None:
                ctx.load_verify_locations(cafile=str(self.ssl_cafile))
            if self.ssl_certfile is not None:
                ctx.load_cert_chain(str(self.ssl_certfile),
                                    str(self.ssl_keyfile) if self.ssl_keyfile else None,
                                    self.ssl_key_password)
        except (ssl.SSLError, OSError) as exc:
            raise SettingsError(f"TLS files: {exc} (camus reads PEM files only: "
                                "ssl.truststore.type=PEM / ssl.keystore.type=PEM)") from exc
        ctx.check_hostname = self.ssl_check_hostname
        return ctx

    def client_config(self, producer: bool = False, **extra: Any) -> dict[str, Any]:
        """These settings as a confluent-kafka (librdkafka) configuration, `extra` over them:
        for camus's own Kafka clients of the same cluster (the materialiser's and the
        catalog's). `producer`: for a Producer, the only client for which librdkafka takes
        request.timeout.ms (a consumer or admin client logs a warning for it)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}"
                                          for h, p in self.bootstrap),
            "security.protocol": self.security_protocol, "client.id": self.client_id,
            "socket.connection.setup.timeout.ms": self.connect_timeout_ms,
            "metadata.max.age.ms": self.metadata_max_age_ms}
        if producer:
            conf["request.timeout.ms"] = self.request_timeout_ms
        if self.sasl:
            conf.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.sasl_username,
                         "sasl.password": self.sasl_password})
        if self.tls:
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.ssl_check_hostname else "none"
            for key, value in (("ssl.ca.location", self.ssl_cafile),
                               ("ssl.certificate.location", self.ssl_certfile),
                               ("ssl.key.location", self.ssl_keyfile),
                               ("ssl.key.password", self.ssl_key_password)):
                if value is not None:
                    conf[key] = str(value)
        return {**conf, **extra}

    def describe(self) -> str:
        """The settings for a log line, the password left out."""
        servers = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        who = f", {self.sasl_mechanism} as {self.sasl_username}" if self.sasl else ""
        return f"{servers} ({self.security_protocol}{who})"


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT...]` (IPv6 hosts in brackets) as (host, port) pairs."""
    servers = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not item or not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise SettingsError(f"--kafka {text!r}: {item!r} is not HOST:PORT with a port in 1..65535")
        servers.append((host.strip("[]"), int(port)))
    return servers


# Setting name (and the aliases librdkafka and the Java client give it) -> field.
_NAMES = {
    "bootstrap.servers": "bootstrap", "metadata.broker.list": "bootstrap",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism", "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_username", "sasl.password": "sasl_password",
    "sasl.jaas.config": "jaas",
    "ssl.ca.location": "ssl_cafile", "ssl.truststore.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile", "ssl.keystore.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_key_password", "ssl.keystore.password": "ssl_key_password",
    "ssl.truststore.type": "pem_only", "ssl.keystore.type": "pem_only",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "connect_timeout_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
}
_JAAS_FIELD = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _apply(settings: ClusterSettings, key: str, value: str, where: str) -> None:
    name = _NAMES.get(key)
    if name is None:
        hint = (" (camus forwards each client's own producer and consumer settings, such as acks, "
                "untouched)" if key in ("acks", "enable.idempotence", "transactional.id", "group.id",
                                        "isolation.level", "compression.type", "linger.ms") else "")
        raise SettingsError(f"{where}: unknown connection setting {key!r}{hint}; camus knows "
                            + ", ".join(sorted(_NAMES)))
    try:
        if name == "bootstrap":
            servers = parse_bootstrap(value)
            if servers != settings.bootstrap:
                raise SettingsError(f"{key}={value} disagrees with --kafka "
                                    + ",".join(f"{h}:{p}" for h, p in settings.bootstrap))
        elif name == "security_protocol":
            if value.upper() not in PROTOCOLS:
                raise SettingsError(f"{key}={value!r}: expected one of {', '.join(PROTOCOLS)}")
            settings.security_protocol = value.upper()
        elif name == "sasl_mechanism":
            if value.upper() not in MECHANISMS:
                raise SettingsError(f"{key}={value!r}: camus authenticates with "
                                    f"{', '.join(MECHANISMS)} (not GSSAPI or OAUTHBEARER)")
            settings.sasl_mechanism = value.upper()
        elif name == "jaas":
            found = {k: bytes(v, "utf-8").decode("unicode_escape") for k, v in _JAAS_FIELD.findall(value)}
            if "username" not in found or "password" not in found:
                raise SettingsError(f"{key}: expected a login module with username=\"...\" and "
                                    "password=\"...\"")
            settings.sasl_username, settings.sasl_password = found["username"], found["password"]
        elif name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            setattr(settings, name, Path(value).expanduser())
        elif name == "pem_only":
            if value.upper() != "PEM":
                raise SettingsError(f"{key}={value!r}: camus reads PEM files only (JKS and PKCS12 "
                                    "stores: convert them with keytool/openssl)")
        elif name == "ssl_check_hostname":
            if value.lower() not in ("", "https", "none"):
                raise SettingsError(f"{key}={value!r}: expected https, or empty/none to skip the "
                                    "host name check")
            settings.ssl_check_hostname = value.lower() == "https"
        elif name.endswith("_ms"):
            if not value.isdigit() or int(value) <= 0:
                raise SettingsError(f"{key}={value!r}: expected a positive number of milliseconds")
            setattr(settings, name, int(value))
        else:
            setattr(settings, name, value)
    except SettingsError as exc:
        if str(exc).startswith(where):
            raise
        raise SettingsError(f"{where}: {exc}") from None


def read_properties(path: Path) -> list[tuple[str, str, str]]:
    """(key, value, FILE:LINE:COL of the key) from a Java properties file: `key=value` or
    `key: value`, `#` and `!` comments, a trailing backslash continuing a line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError(f"--kafka-config {path}: {exc.strerror or exc}") from None
    entries = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i]
        i += 1
        while line.endswith("\\") and not line.endswith("\\\\") and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        stripped = line.lstrip()
        if not stripped or stripped[0] in "#!":
            continue
        column = len(line) - len(stripped) + 1
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", stripped)
        if m is None:
            raise SettingsError(f"{path}:{number}:{column}: expected key=value, got {stripped!r}")
        entries.append((m.group(1), m.group(2).rstrip(), f"{path}:{number}:{column}"))
    return entries


def settings_from(bootstrap: str, config_files: list[Path] | None = None,
                  options: list[str] | None = None) -> ClusterSettings:
    """The settings `--kafka`, `--kafka-config FILE` (repeatable) and `--kafka-option k=v`
    (repeatable, applied after the files) describe; SettingsError names the culprit."""
    settings = ClusterSettings(parse_bootstrap(bootstrap))
    for path in config_files or ():
        for key, value, where in read_properties(path):
            _apply(settings, key, value, where)
    for option in options or ():
        key, sep, value = option.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"--kafka-option {option!r}: expected KEY=VALUE")
        _apply(settings, key.strip(), value.strip(), f"--kafka-option {key.strip()}")
    settings.check()
    return settings


# --- one broker connection -------------------------------------------------------------

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


def with_correlation(payload: bytes, correlation_id: int) -> bytes:
    """A request payload with its correlation id (bytes 4..8 of the header) replaced."""
    return payload[:4] + _CORRELATION.pack(correlation_id) + payload[8:]


def answer_with_correlation(payload: bytes, correlation_id: int) -> bytes:
    """A response payload with its correlation id (bytes 0..4 of the header) replaced."""
    return _CORRELATION.pack(correlation_id) + payload[4:]


def encode_request(api_key: int, version: int, body: Any, client_id: str,
                   correlation_id: int = 0) -> bytes:
    """A request payload (no size prefix) for `body`, a kio dataclass or plain data."""
    cls = load_request_schema(api_key, version)
    if not isinstance(body, cls):
        body = build(cls, body)
    header_cls = cls.__header_schema__
    buffer = io.BytesIO()
    wire._writer(header_cls)(buffer, header_cls(request_api_key=api_key, request_api_version=version,
                                                correlation_id=correlation_id, client_id=client_id))
    wire.write_body(buffer, cls, body)
    return buffer.getvalue()


def decode_response(api_key: int, version: int, payload: bytes) -> Any:
    """The kio response body in `payload` (a response header first)."""
    cls = load_response_schema(api_key, version)
    _, offset = wire._reader(cls.__header_schema__)(payload, 0)
    body, _ = wire.read_body(payload, offset, cls)
    return body


class BrokerConnection:
    """One authenticated connection to one broker; `await open()` before use."""

    def __init__(self, settings: ClusterSettings, host: str, port: int) -> None:
        self.settings = settings
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: collections.deque[tuple[int, asyncio.Future]] = collections.deque()
        self._next_id = 1
        self._reading: asyncio.Task | None = None
        self.failure: BrokerUnavailable | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def usable(self) -> bool:
        return self._writer is not None and self.failure is None

    async def open(self) -> BrokerConnection:
        s = self.settings
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20,
                                        ssl=s.ssl_context() if s.tls else None,
                                        server_hostname=self.host if s.tls else None),
                s.connect_timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise BrokerUnavailable(f"{self}: no connection within socket.connection.setup.timeout.ms="
                                    f"{s.connect_timeout_ms}") from None
        except ssl.SSLError as exc:
            raise BrokerUnavailable(f"{self}: TLS handshake failed: {exc.reason or exc}") from None
        except OSError as exc:
            raise BrokerUnavailable(f"{self}: {exc.strerror or exc}") from None
        self._reading = asyncio.create_task(self._read_loop())
        try:
            if s.sasl:
                await asyncio.wait_for(self._authenticate(), s.request_timeout_ms / 1000)
        except BaseException as exc:
            self.close()
            if isinstance(exc, asyncio.TimeoutError):
                raise BrokerUnavailable(f"{self}: SASL authentication timed out") from None
            raise
        return self

    def close(self, failure: BrokerUnavailable | None = None) -> None:
        if self.failure is None:
            self.failure = failure or BrokerUnavailable(f"{self}: connection closed by camus")
        if self._writer is not None:
            self._writer.close()
        while self._waiting:
            _, future = self._waiting.popleft()
            if not future.done():
                future.set_exception(self.failure)
                # Whoever awaits it gets the failure; nobody may (its client left first),
                # and then asyncio need not log it.
                future.exception()
        if self._reading is not None and self._reading is not asyncio.current_task():
            self._reading.cancel()

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                size = _SIZE.unpack(await self._reader.readexactly(4))[0]
                if not 4 <= size <= MAX_RESPONSE:
                    raise BrokerUnavailable(f"{self}: response size {size}: not a Kafka broker?")
                payload = await self._reader.readexactly(size)
                correlation = _CORRELATION.unpack_from(payload, 0)[0]
                if not self._waiting or self._waiting[0][0] != correlation:
                    raise BrokerUnavailable(f"{self}: answer to correlation id {correlation} "
                                            "out of order")
                _, future = self._waiting.popleft()
                if not future.done():
                    future.set_result(payload)
        except asyncio.CancelledError:
            pass
        except BrokerUnavailable as exc:
            self.close(exc)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, OSError) as exc:
            reason = "closed the connection" if isinstance(exc, asyncio.IncompleteReadError) else str(exc)
            self.close(BrokerUnavailable(f"{self}: {reason}"))

    def send(self, payload: bytes, expects_response: bool = True) -> asyncio.Future | None:
        """Write one request (its correlation id replaced by the connection's own) and
        return the future of its response payload, whose correlation id is the connection's
        (the caller puts its own back); None when no answer comes (Produce with acks=0)."""
        if self.failure is not None:
            raise self.failure
        assert self._writer is not None, "open() first"
        correlation = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        self._writer.write(frame(with_correlation(payload, correlation)))
        if not expects_response:
            return None
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((correlation, future))
        return future

    async def drain(self) -> None:
        if self._writer is not None and self.failure is None:
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as exc:
                self.close(BrokerUnavailable(f"{self}: {exc}"))
                raise self.failure from None

    async def call(self, payload: bytes, expects_response: bool = True) -> bytes | None:
        future = self.send(payload, expects_response)
        await self.drain()
        return None if future is None else await future

    async def request(self, api_key: int, version: int, body: Any, timeout: float | None = None) -> Any:
        """camus's own request: encode `body`, send, decode the answer; BrokerUnavailable
        when no answer comes within `timeout` (request.timeout.ms by default)."""
        payload = encode_request(api_key, version, body, self.settings.client_id)
        timeout = self.settings.request_timeout_ms / 1000 if timeout is None else timeout
        try:
            answer = await asyncio.wait_for(self.call(payload), timeout)
        except asyncio.TimeoutError:
            self.close(BrokerUnavailable(f"{self}: no answer within request.timeout.ms"))
            raise self.failure from None
        return decode_response(api_key, version, answer)

    # --- SASL ----------------------------------------------------------------------------

    async def _authenticate(self) -> None:
        s = self.settings
        shake = await self.request(17, 1, {"mechanism": s.sasl_mechanism})
        if shake.error_code != ErrorCode.none:
            raise BrokerUnavailable(f"{self}: the broker does not offer SASL {s.sasl_mechanism} "
                                    f"(it offers {', '.join(shake.mechanisms) or 'none'})")
        if s.sasl_mechanism == "PLAIN":
            await self._sasl_step(f"\0{s.sasl_username}\0{s.sasl_password}".encode())
            return
        digest = hashlib.sha256 if s.sasl_mechanism == "SCRAM-SHA-256" else hashlib.sha512
        user = s.sasl_username.replace("=", "=3D").replace(",", "=2C")
        nonce = base64.b64encode(os.urandom(24)).decode()
        first_bare = f"n={user},r={nonce}"
        server_first = (await self._sasl_step(f"n,,{first_bare}".encode())).decode()
        fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        if not fields.get("r", "").startswith(nonce) or "s" not in fields or "i" not in fields:
            raise BrokerUnavailable(f"{self}: SCRAM: unexpected server-first message")
        salted = hashlib.pbkdf2_hmac(digest().name, s.sasl_password.encode(),
                                     base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.digest(salted, b"Client Key", digest)
        final_bare = f"c=biws,r={fields['r']}"
        message = f"{first_bare},{server_first},{final_bare}".encode()
        signature = hmac.digest(digest(client_key).digest(), message, digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_final = (await self._sasl_step(
            f"{final_bare},p={base64.b64encode(proof).decode()}".encode())).decode()
        expected = hmac.digest(hmac.digest(salted, b"Server Key", digest), message, digest)
        if server_final != f"v={base64.b64encode(expected).decode()}":
            raise BrokerUnavailable(f"{self}: SCRAM: the broker's signature does not match "
                                    "(not the server holding these credentials)")

    async def _sasl_step(self, token: bytes) -> bytes:
        answer = await self.request(36, 1, {"auth_bytes": token})
        if answer.error_code != ErrorCode.none:
            raise BrokerUnavailable(f"{self}: SASL {self.settings.sasl_mechanism} authentication "
                                    f"as {self.settings.sasl_username!r} failed: "
                                    f"{answer.error_message or ErrorCode(answer.error_code).name}")
        return answer.auth_bytes
