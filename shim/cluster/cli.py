"""`camus cluster`: camus's views in an Apache Kafka cluster (docs/cluster.md).

    camus cluster materialise --kafka HOST:PORT[,...] [--instance NAME] [--target SPEC]
    camus cluster view create NAME --source TOPIC --filter TEXT --kafka ...
    camus cluster view delete NAME --kafka ...
    camus cluster view list --kafka ...
    camus cluster schema set TOPIC SCHEMA --kafka ...

Every command takes the cluster connection as `camus serve --kafka` does (`--kafka`,
repeatable `--kafka-config FILE` of client properties and `--kafka-option KEY=VALUE`) and a deployment
name (`--deployment`, default "camus"): the instances that share one deployment's views.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

LOG_LEVELS = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}  # -q, default, -v


def _connection_options(p: argparse.ArgumentParser, instance: bool = False) -> None:
    from shim.cluster.options import add_connection_options, add_deployment_options

    add_connection_options(p, required=True)
    add_deployment_options(p, instance)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cluster", help="views materialised into an Apache Kafka cluster, exactly once",
        description="camus beside an Apache Kafka cluster: views are topics of the cluster, "
                    "filled by camus's switch with Kafka transactions (docs/cluster.md).")
    actions = p.add_subparsers(dest="cluster_command", metavar="ACTION")
    actions.required = True

    m = actions.add_parser(
        "materialise", aliases=["materialize"],
        help="run this instance's share of the deployment's views until stopped",
        description="Reads the deployment's catalog and materialises each view: its source "
                    "through the switch, what the switch delivers into the view topic, in "
                    "transactions with the source offsets. Instances of one deployment share "
                    "each view's source partitions through Kafka's consumer groups.")
    _connection_options(m, instance=True)
    m.add_argument("--view", action="append", metavar="NAME",
                   help="materialise only this view (repeatable; default every view)")
    m.add_argument("--target", default="embedded:native", metavar="SPEC",
                   help="what records flow through, as `camus serve --target` takes it "
                        "(default embedded:native, the in-process software switch)")
    m.add_argument("--max-entries", type=int, metavar="N",
                   help="the switch's table entry budget, as for camus serve")
    m.add_argument("--batch", type=int, default=5000, metavar="N",
                   help="source records per transaction, at most (default 5000)")
    m.add_argument("--transaction-timeout-ms", type=int, default=10_000, metavar="MS",
                   help="how long the cluster keeps a dead instance's transaction open, and so "
                        "how long its partitions wait before another instance resumes them "
                        "(default 10000)")
    m.add_argument("--session-timeout-ms", type=int, default=6_000, metavar="MS",
                   help="how long the group waits for a silent instance before moving its "
                        "partitions (default 6000)")
    m.add_argument("-v", "--verbose", action="count", default=0, help="log debug detail")
    m.add_argument("-q", "--quiet", action="count", default=0, help="log warnings and errors only")
    m.set_defaults(func=run_materialise)

    v = actions.add_parser("view", help="create, delete or list the deployment's views",
                           description="Views live in the deployment's catalog topic; the view "
                                       "topic itself is an ordinary topic of the cluster.")
    va = v.add_subparsers(dest="view_action", metavar="ACTION")
    va.required = True
    c = va.add_parser("create", help="create a view topic and record it in the catalog")
    c.add_argument("name")
    c.add_argument("--source", required=True, metavar="TOPIC")
    c.add_argument("--filter", required=True, metavar="TEXT",
                   help="the filter over the source's camus.schema, e.g. 'price > 100'")
    c.add_argument("--replication", type=int, metavar="N",
                   help="the view topic's replication factor (default: its source's)")
    _connection_options(c)
    d = va.add_parser("delete", help="remove a view: catalog entry, topic and consumer group")
    d.add_argument("name")
    _connection_options(d)
    ls = va.add_parser("list", help="the deployment's views")
    _connection_options(ls)
    v.set_defaults(func=run_view)

    s = actions.add_parser("schema", help="set a source topic's camus.schema")
    sa = s.add_subparsers(dest="schema_action", metavar="ACTION")
    sa.required = True
    ss = sa.add_parser("set", help="give a topic of the cluster its filterable fields")
    ss.add_argument("topic")
    ss.add_argument("schema", help="as camus.schema, e.g. 'stock:str8=$.stock,price:u32=$.price'; "
                                   "'' removes it")
    _connection_options(ss)
    s.set_defaults(func=run_schema)


def _connect(args: argparse.Namespace):
    from shim.cluster.options import settings_from_args

    return settings_from_args(args)


def _fail(what: str, exc: BaseException) -> int:
    """Say why in one line; exit status 2 for bad arguments, 1 for the rest."""
    from confluent_kafka import KafkaException

    if isinstance(exc, KafkaException):  # the cluster out of reach, or refusing the request
        exc = exc.args[0].str()
    print(f"camus cluster {what}: {exc}", file=sys.stderr)
    return 2 if isinstance(exc, (ValueError, OSError)) else 1


def run_view(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from compiler.errors import CamusError
    from shim.cluster import catalog

    what = f"view {args.view_action}" + (f" {args.name}" if getattr(args, "name", None) else "")
    try:
        conn = _connect(args)
        if args.view_action == "create":
            catalog.create_view(conn, args.deployment, args.name, args.source, args.filter,
                                args.replication)
            print(f"created view {args.name}")
        elif args.view_action == "delete":
            catalog.delete_view(conn, args.deployment, args.name)
            print(f"deleted view {args.name}")
        else:
            cat = catalog.Catalog(conn, args.deployment)
            try:
                state = cat.read()
            finally:
                cat.close()
            for view in state.views.values():
                print(f"{view.name}\tview of {view.source} where {view.filter}")
    except (CamusError, catalog.CatalogError, KafkaException, ValueError, OSError) as exc:
        return _fail(what, exc)
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from compiler.errors import CamusError
    from shim.cluster import catalog

    try:
        catalog.set_schema(_connect(args), args.deployment, args.topic, args.schema or None)
    except (CamusError, catalog.CatalogError, KafkaException, ValueError, OSError) as exc:
        return _fail(f"schema set {args.topic}", exc)
    print(f"schema of {args.topic}: {args.schema or 'none'}")
    return 0


def run_materialise(args: argparse.Namespace) -> int:
    from compiler.estimate import DEFAULT_MAX_ENTRIES
    from controller.targets import check_spec
    from shim.cluster.catalog import CatalogError, check_name
    from shim.cluster.materialise import Fatal, Materialiser, Settings

    logging.basicConfig(level=LOG_LEVELS[max(-1, min(1, args.verbose - args.quiet))],
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        conn = _connect(args)
        check_spec(args.target)
        settings = Settings(deployment=check_name("deployment name", args.deployment),
                            batch=args.batch, transaction_timeout_ms=args.transaction_timeout_ms,
                            session_timeout_ms=args.session_timeout_ms)
        if args.instance:
            settings.instance = check_name("instance name", args.instance)
        if args.batch < 1:
            raise ValueError(f"--batch {args.batch}: must be at least 1")
    except (CatalogError, ValueError, OSError) as exc:
        return _fail("materialise", exc)
    mat = Materialiser(conn, settings, args.target, set(args.view) if args.view else None,
                       DEFAULT_MAX_ENTRIES if args.max_entries is None else args.max_entries)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def ready() -> None:
            print(f"camus: materialising the views of deployment {settings.deployment} as "
                  f"instance {settings.instance}", flush=True)

        await mat.run(stop, ready)

    from confluent_kafka import KafkaException

    try:
        asyncio.run(main())
    except (Fatal, CatalogError) as exc:
        return _fail("materialise", exc)
    except KafkaException as exc:  # the cluster out of reach at start, or refusing us
        return _fail("materialise", exc)
    return 0
