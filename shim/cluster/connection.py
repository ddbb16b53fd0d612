"""How camus reaches an Apache Kafka cluster: bootstrap servers and client settings.

The settings are librdkafka's (confluent-kafka's) property names, which are also the Java
client's for everything a connection needs (`security.protocol`, `sasl.mechanism`,
`sasl.username`, `sasl.password`, `ssl.ca.location`, ...): given as `KEY=VALUE` options or
in a properties file of such lines, as a Kafka client takes them. Everything here is
checked before anything connects, so a typo is reported with where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class ConnectionSettingsError(ValueError):
    """A bootstrap list or client setting that cannot be right (the message says where)."""


@dataclass(frozen=True)
class KafkaConnection:
    bootstrap: str  # HOST:PORT[,HOST:PORT...]
    options: dict[str, str] = field(default_factory=dict)  # client properties

    def client(self, **extra: object) -> dict:
        """A confluent-kafka configuration: these settings, then `extra` over them."""
        return {"bootstrap.servers": self.bootstrap, **self.options, **extra}


def parse_bootstrap(text: str) -> str:
    """`text` if it is a comma-separated list of HOST:PORT; ConnectionSettingsError naming the
    column of the first entry that is not."""
    col = 1
    for entry in text.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConnectionSettingsError(f"--kafka column {col}: expected HOST:PORT, got {entry!r}")
        col += len(entry) + 1
    return text


def parse_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConnectionSettingsError(f"expected KEY=VALUE (a Kafka client property), got {text!r}")
    return key.strip(), value.strip()


def read_properties(path: Path) -> dict[str, str]:
    """A client properties file: `key=value` lines, `#` and `!` comments, blank lines."""
    out: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        try:
            key, value = parse_option(line)
        except ConnectionSettingsError as exc:
            raise ConnectionSettingsError(f"{path}:{number}: {exc}") from None
        out[key] = value
    return out


def connection(bootstrap: str, options: list[str] = (), config_file: Path | None = None
               ) -> KafkaConnection:
    """The connection the command line describes: the file's settings, then each option."""
    settings = read_properties(config_file) if config_file else {}
    settings.update(parse_option(o) for o in options)
    return KafkaConnection(parse_bootstrap(bootstrap), settings)
