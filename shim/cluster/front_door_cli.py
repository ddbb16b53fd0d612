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

from .options import add_connection_options, add_deployment_options


def add_serve_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("in front of an Apache Kafka cluster (docs/cluster.md)")
    add_connection_options(g, required=False)
    add_deployment_options(g, instance=True)
    g.add_argument("--no-materialise", "--no-materialize", dest="materialise",
                   action="store_false",
                   help="take views (CreateTopics with camus.source and camus.filter) into the "
                        "deployment's catalog, but leave materialising them to `camus cluster "
                        "materialise` instances; by default this process is one such instance "
                        "too, its switch the one --target/--switch names")


# Flags of the embedded broker that mean nothing when the cluster keeps the records.
_EMBEDDED_ONLY = {
    "data_dir": "--data-dir (the cluster keeps topics, logs and offsets)",
    "config": "--config (topics and their configs are the cluster's: create them with any "
              "Kafka admin client through camus)",
    "metrics": "--metrics",
    "sasl_mechanisms": "--sasl-mechanisms", "reauth_ms": "--reauth-ms",
    "authorizer": "--authorizer", "super_users": "--super-users",
    "allow_everyone_if_no_acl_found": "--allow-everyone-if-no-acl-found",
}


def run(args: argparse.Namespace) -> int:
    from shim.security.listeners import Security, parse_listener

    from .connection import SettingsError
    from .front_door import FrontDoor, FrontDoorError
    from .options import settings_from_args

    def fail(message: str) -> int:
        print(f"camus serve: {message}", file=sys.stderr)
        return 2

    if args.kafka is None:
        return fail("--kafka-config and --kafka-option set up the connection that --kafka "
                    "HOST:PORT[,...] makes; give --kafka too")
    used = [text for name, text in _EMBEDDED_ONLY.items() if getattr(args, name, None)]
    if not args.materialise:
        used += [f"{flag} (the switch is the materialiser's; --no-materialise runs none)"
                 for flag, given in (("--target", args.target != "embedded:native"),
                                     ("--switch", args.switch), ("--max-entries",
                                                                args.max_entries is not None))
                 if given]
    if used:
        return fail("--kafka: not with " + "; ".join(used))
    target = f"embedded:{args.switch}" if args.switch else args.target
    try:
        settings = settings_from_args(args)
        materialiser = _materialiser(args, settings, target) if args.materialise else None
    except (SettingsError, ValueError) as exc:
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
    from .views import Views

    views = Views(settings, args.deployment)
    door = FrontDoor(settings, views=views)
    try:
        asyncio.run(_serve(door, listeners, security, materialiser))
    except FrontDoorError as exc:
        return fail(f"--kafka {args.kafka}: {exc}")
    except OSError as exc:
        hint = " (another camus serve, or a Kafka broker?)" if exc.errno == errno.EADDRINUSE else ""
        return fail(f"{exc.strerror or exc}{hint}")
    except _MaterialiserFailed as exc:
        print(f"camus serve: the materialiser stopped: {exc}", file=sys.stderr)
        return 1
    finally:
        views.close()
    return 0


class _MaterialiserFailed(Exception):
    pass


def _materialiser(args: argparse.Namespace, settings, target: str):
    """The materialiser instance this `camus serve --kafka` runs (`camus cluster materialise`
    with its defaults); ValueError (CatalogError, a bad --target) says why not."""
    from compiler.estimate import DEFAULT_MAX_ENTRIES
    from controller.targets import check_spec

    from .catalog import CatalogError, check_name
    from .materialise import Materialiser, Settings

    check_spec(target)
    if args.max_entries is not None and args.max_entries < 0:
        raise ValueError(f"--max-entries {args.max_entries}: expected 0 (no budget) or more")
    try:
        conf = Settings(deployment=check_name("deployment name", args.deployment))
        if args.instance:
            conf.instance = check_name("instance name", args.instance)
    except CatalogError as exc:
        raise ValueError(str(exc)) from None
    return Materialiser(settings, conf, target, None,
                        DEFAULT_MAX_ENTRIES if args.max_entries is None else args.max_entries)


async def _serve(door, listeners, security, materialiser) -> None:
    """The front door, and once it listens, the materialiser beside it on the same event
    loop, until SIGINT/SIGTERM; if the materialiser fails, the front door stops too, so
    that whoever runs camus sees it exit (status 1) and restarts it."""
    from confluent_kafka import KafkaException

    from .catalog import CatalogError
    from .front_door import serve
    from .materialise import Fatal

    stop = asyncio.Event()
    running: list[asyncio.Task] = []
    log = logging.getLogger("camus.cluster")

    def ready(_door) -> None:
        if materialiser is None:
            return

        def started() -> None:
            log.info("materialising the views of deployment %s as instance %s",
                     materialiser.settings.deployment, materialiser.settings.instance)

        task = asyncio.ensure_future(materialiser.run(stop, started))
        task.add_done_callback(lambda _t: stop.set())
        running.append(task)

    await serve(door, listeners, security, stop=stop, on_ready=ready)
    for task in running:
        try:
            await task
        except Exception as exc:  # Fatal, CatalogError, KafkaException, a target lost, ...
            log.error("the materialiser stopped", exc_info=not isinstance(
                exc, (Fatal, CatalogError, KafkaException)))
            raise _MaterialiserFailed(exc) from exc
