"""`camus serve --kafka HOST:PORT[,...]`: the flags, and the command with them.

Registered on `camus serve` by shim/cli.py, which hands the command here when `--kafka` is
given; without it `camus serve` is the embedded broker, unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import sys

from .options import add_connection_options


def add_serve_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("in front of an Apache Kafka cluster (docs/cluster.md)")
    add_connection_options(g, required=False)


# Flags of the embedded broker that mean nothing when the cluster keeps the records.
_EMBEDDED_ONLY = {
    "data_dir": "--data-dir (the cluster keeps topics, logs and offsets)",
    "config": "--config (topics and their configs are the cluster's: create them with any "
              "Kafka admin client through camus)",
    "switch": "--switch", "max_entries": "--max-entries", "metrics": "--metrics",
    "sasl_mechanisms": "--sasl-mechanisms", "reauth_ms": "--reauth-ms",
    "authorizer": "--authorizer", "super_users": "--super-users",
    "allow_everyone_if_no_acl_found": "--allow-everyone-if-no-acl-found",
}


def run(args: argparse.Namespace) -> int:
    from shim.security.listeners import Security, parse_listener

    from .connection import SettingsError
    from .options import settings_from_args
    from .front_door import FrontDoor, FrontDoorError, serve

    def fail(message: str) -> int:
        print(f"camus serve: {message}", file=sys.stderr)
        return 2

    if args.kafka is None:
        return fail("--kafka-config and --kafka-option set up the connection that --kafka "
                    "HOST:PORT[,...] makes; give --kafka too")
    used = [text for name, text in _EMBEDDED_ONLY.items() if getattr(args, name, None)]
    if args.target != "embedded:native":
        used.append("--target (views under --kafka are materialised by issue 27 item 2)")
    if used:
        return fail("--kafka: not with " + "; ".join(used))
    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        return fail(str(exc))
    security = Security()
    try:
        listeners = [parse_listener(x) for x in args.listen or ["127.0.0.1:9092"]]
    except ValueError as exc:
        return fail(f"--listen {exc}")
    for lst in listeners:
        if lst.sasl:
            return fail(f"--listen {lst}: under --kafka camus's listeners are PLAINTEXT or SSL "
                        "(SASL between clients and camus is not forwarded to the cluster, where "
                        "camus authenticates as itself)")
    if any(lst.tls for lst in listeners):
        if args.ssl_cert is None or args.ssl_key is None:
            return fail("an SSL listener needs --ssl-cert and --ssl-key")
        security.certfile, security.keyfile, security.cafile = args.ssl_cert, args.ssl_key, args.ssl_ca
        security.client_auth = args.ssl_client_auth or "none"
    levels = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}
    logging.basicConfig(level=levels[max(-1, min(1, args.verbose - args.quiet))],
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    door = FrontDoor(settings)
    try:
        asyncio.run(serve(door, listeners, security))
    except FrontDoorError as exc:
        return fail(f"--kafka {args.kafka}: {exc}")
    except OSError as exc:
        hint = " (another camus serve, or a Kafka broker?)" if exc.errno == errno.EADDRINUSE else ""
        return fail(f"{exc.strerror or exc}{hint}")
    return 0
