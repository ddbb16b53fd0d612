"""The cluster connection and the deployment on the command line: one syntax for `camus serve
--kafka` and every `camus cluster` command. Kept apart from `connection` (which loads the protocol codec) so that
building the command line's parsers stays cheap."""

from __future__ import annotations

from pathlib import Path


def add_connection_options(p, required: bool) -> None:
    """`--kafka`, `--kafka-config FILE` and `--kafka-option KEY=VALUE` on an argparse parser
    or argument group."""
    p.add_argument("--kafka", required=required, metavar="HOST:PORT[,HOST:PORT...]",
                   help="the Apache Kafka cluster's bootstrap servers")
    p.add_argument("--kafka-config", type=Path, action="append", default=[], metavar="FILE",
                   help="the connection's client properties, Java's key=value format "
                        "(security.protocol, sasl.mechanism, sasl.username, sasl.password or "
                        "sasl.jaas.config, ssl.ca.location, ssl.certificate.location, "
                        "ssl.key.location, ...); repeatable")
    p.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                   help="one connection property, applied after the files; repeatable")


def add_deployment_options(p, instance: bool) -> None:
    """`--deployment NAME` (and `--instance NAME` for a command that materialises)."""
    p.add_argument("--deployment", default="camus", metavar="NAME",
                   help="the camus deployment whose views these are (default camus): its "
                        "catalog topic, consumer groups and transactional ids are named by it")
    if instance:
        p.add_argument("--instance", metavar="NAME",
                       help="this instance's name, unique in the deployment and the same across "
                            "its restarts (part of its transactional ids; default HOST-PID)")


def settings_from_args(args):
    """The `shim.cluster.connection.ClusterSettings` those flags describe; SettingsError
    says where a mistake is."""
    from .connection import settings_from

    return settings_from(args.kafka, args.kafka_config, args.kafka_option)
