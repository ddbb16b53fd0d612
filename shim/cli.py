"""`camus serve`: the Kafka-compatible broker backed by a target (the embedded software switch
by default; `controller.targets.open_target` knows the others)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import faulthandler
import json
import logging
import signal
from pathlib import Path

LOG_LEVELS = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}  # -q, default, -v


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="run the Kafka-compatible broker (camus's main command)",
        description="A Kafka broker for unmodified clients; records flow through the embedded "
                    "software switch, which delivers each view and group member what it asked for.")
    p.add_argument("--listen", action="append", metavar="[PROTOCOL://]HOST:PORT",
                   help="a listener, repeatable: PLAINTEXT (the default protocol), SSL, "
                        "SASL_PLAINTEXT or SASL_SSL; each is advertised to the clients that "
                        "connect to it (default PLAINTEXT://127.0.0.1:9092; port 0 = any)")
    from shim.security.cli import add_serve_options
    add_serve_options(p)
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="keep topics, logs and committed offsets here (default: in memory)")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="JSON: {\"topics\": [{\"name\", \"partitions\", \"configs\": {...}}], "
                        "\"partitions\": N, \"auto_create\": bool, "
                        "\"log.flush.interval.messages\": N, \"log.flush.interval.ms\": N, "
                        "\"max.connections\": N, \"connections.max.idle.ms\": N, "
                        "\"queued.max.request.bytes\": N, \"fetch.max.bytes\": N}")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--switch", choices=("native", "python"),
                       help="the embedded software switch's implementation: --target embedded:IMPL")
    where.add_argument("--target", default="embedded:native", metavar="SPEC",
                       help="what records flow through, as controller.targets.open_target names "
                            "it (default embedded:native, the in-process software switch; switch, "
                            "switch-veth, bmv2 or p4runtime://HOST:PORT?io=... put a P4Runtime "
                            "device in the loop: docs/remote-target.md; "
                            "fabric://HOST:PORT?host=H makes this broker host H of the network "
                            "camus net serve runs: docs/routing.md)")
    p.add_argument("--metrics", metavar="HOST:PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics")
    p.add_argument("--max-entries", type=int, metavar="N",
                   help="the switch's table entry budget: subscriptions whose exact rules compile "
                        "to more are approximated (a superset, views re-check every record "
                        "exactly; docs/approximation.md); default the compiler's, 0 = no budget")
    from shim.cluster.front_door_cli import add_serve_options as add_cluster_options
    add_cluster_options(p)
    p.add_argument("-v", "--verbose", action="count", default=0, help="log debug detail")
    p.add_argument("-q", "--quiet", action="count", default=0, help="log warnings and errors only")
    p.set_defaults(func=run)

    t = subparsers.add_parser(
        "topic", help="create, delete, list or describe topics and views on a running camus serve",
        description="Topic administration (kafka-topics refuses camus.* configs on the client "
                    "side). Example: camus topic create big --config camus.source=orders "
                    "--config 'camus.filter=price > 100'")
    actions = t.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    for name, text in (("create", "create a topic or a view"), ("delete", "delete a topic or view"),
                       ("list", "topics and views, with each view's source and filter"),
                       ("describe", "a topic's or view's configs, partitions, offsets and counters")):
        a = actions.add_parser(name, help=text, description=text)
        if name != "list":
            a.add_argument("name")
        a.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
        if name == "create":
            a.add_argument("--partitions", type=int, default=-1,
                           help="default: the broker's (a view always has its source's)")
            a.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                           help="a topic config (split at the first '='); repeatable")
    t.set_defaults(func=run_topic)
    from shim.security.cli import register_user
    register_user(subparsers)


def run_topic(args: argparse.Namespace) -> int:
    import sys

    from shim import topic_client

    what = f"camus topic {args.action}" + (f" {args.name}" if getattr(args, "name", None) else "")
    try:
        if args.action == "list":
            for row in topic_client.list_topics(args.bootstrap_server):
                print("\t".join(map(str, row)))
            return 0
        if args.action == "describe":
            found = topic_client.describe(args.bootstrap_server, args.name)
            if found is None:
                print(f"{what}: topic {args.name!r} does not exist", file=sys.stderr)
                return 1
            print(found)
            return 0
        if args.action == "create":
            error, made = topic_client.create(args.bootstrap_server, args.name, args.partitions,
                                              topic_client.parse_configs(args.config))
            if not error and args.partitions not in (-1, made):
                print(f"{what}: warning: a view has its source's partitions: {made}, not "
                      f"{args.partitions}", file=sys.stderr)
        else:
            error = topic_client.delete(args.bootstrap_server, args.name)
    except topic_client.Unreachable as exc:
        print(f"{what}: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"{what}: {exc}", file=sys.stderr)
        return 2
    if error:
        print(f"{what}: {error}", file=sys.stderr)
        return 1
    print(f"{'created' if args.action == 'create' else 'deleted'} {args.name}")
    return 0


def run(args: argparse.Namespace) -> int:
    import sys

    if args.kafka is not None or args.kafka_config or args.kafka_option:  # shim/cluster
        from shim.cluster.front_door_cli import run as run_in_front
        return run_in_front(args)

    from controller.target import TargetUnavailable
    from controller.targets import check_spec
    from shim.broker import Config
    from shim.limits import Limits
    from shim.server import serve
    from shim.topics import BROKER_DEFAULTS, TopicError

    def fail(message: str) -> int:
        print(f"camus serve: {message}", file=sys.stderr)
        return 2

    # `kill -USR1 <pid>` prints every thread's stack to stderr: a hung broker explains itself.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    from shim.security.cli import security_from_args

    config = Config(data_dir=args.data_dir,
                    target=f"embedded:{args.switch}" if args.switch else args.target)
    try:
        check_spec(config.target)
    except ValueError as exc:
        return fail(f"--target {config.target!r}: {exc}")
    if args.metrics:
        mhost, sep, mport = args.metrics.rpartition(":")
        if not sep or not mport.isdigit() or not 0 <= int(mport) <= 65535:
            return fail(f"--metrics {args.metrics!r}: expected HOST:PORT with a port in 0..65535")
        config.metrics = (mhost or "127.0.0.1", int(mport))
    if args.max_entries is not None:
        if args.max_entries < 0:
            return fail(f"--max-entries {args.max_entries}: expected 0 (no budget) or more")
        config.max_entries = args.max_entries
    if args.config:
        try:
            doc = json.loads(args.config.read_text())
            if not isinstance(doc, dict):
                raise ValueError("expected a JSON object")
            config.default_partitions = int(doc.get("partitions", config.default_partitions))
            config.auto_create = bool(doc.get("auto_create", config.auto_create))
            config.topic_defaults = {topic_name: str(int(doc[name])) for name, topic_name
                                     in BROKER_DEFAULTS.items() if name in doc}
            config.limits = Limits.from_config(doc)
            config.topics = list(doc.get("topics", []))
            config.security.apply(doc)
        except OSError as exc:
            return fail(f"--config {args.config}: {exc.strerror}")
        except json.JSONDecodeError as exc:
            return fail(f"--config {args.config}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}")
        except (TypeError, ValueError) as exc:
            return fail(f"--config {args.config}: {exc}")
    try:
        security_from_args(args, config.security)
        config.security.check()
    except ValueError as exc:
        return fail(str(exc))
    if config.security.listeners:
        config.host, config.port = config.security.listeners[0].host, config.security.listeners[0].port
    logging.basicConfig(level=LOG_LEVELS[max(-1, min(1, args.verbose - args.quiet))],
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        asyncio.run(serve(config))
    except TopicError as exc:
        return fail(f"--config: {exc}")
    except TargetUnavailable as exc:
        return fail(f"--target {config.target!r}: {exc}")
    except OSError as exc:
        hint = " (another camus serve, or a Kafka broker?)" if exc.errno == errno.EADDRINUSE else ""
        return fail(f"{exc.strerror or exc}{hint}")
    return 0
