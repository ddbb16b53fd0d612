"""`camus serve`: the Kafka-compatible broker backed by the embedded software switch."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import signal
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="run the Kafka-compatible broker (camus's main command)",
        description="A Kafka broker for unmodified clients; records flow through the embedded "
                    "software switch, which delivers each view and group member what it asked for.")
    p.add_argument("--listen", default="127.0.0.1:9092", metavar="HOST:PORT",
                   help="address to listen on and advertise (default 127.0.0.1:9092; port 0 = any)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="keep topics, logs and committed offsets here (default: in memory)")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="JSON: {\"topics\": [{\"name\", \"partitions\", \"configs\": {...}}], "
                        "\"partitions\": N, \"auto_create\": bool, "
                        "\"log.flush.interval.messages\": N, \"log.flush.interval.ms\": N, "
                        "\"max.connections\": N, \"connections.max.idle.ms\": N, "
                        "\"queued.max.request.bytes\": N, \"fetch.max.bytes\": N}")
    p.add_argument("--switch", choices=("native", "python"), default="native",
                   help="software switch implementation")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=run)

    t = subparsers.add_parser(
        "topic", help="create, delete or list topics and views on a running camus serve",
        description="Topic administration (kafka-topics refuses camus.* configs on the client "
                    "side). Example: camus topic create big --config camus.source=orders "
                    "--config 'camus.filter=price > 100'")
    t.add_argument("action", choices=("create", "delete", "list"))
    t.add_argument("name", nargs="?")
    t.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    t.add_argument("--partitions", type=int, default=-1, help="default: the broker's")
    t.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config (split at the first '='); repeatable")
    t.set_defaults(func=run_topic)


def run_topic(args: argparse.Namespace) -> int:
    import sys

    from shim import topic_client

    if args.action == "list":
        for name, partitions in topic_client.list_topics(args.bootstrap_server):
            print(f"{name}\t{partitions}")
        return 0
    if not args.name:
        print(f"camus topic {args.action}: a topic name is needed", file=sys.stderr)
        return 2
    try:
        if args.action == "create":
            error = topic_client.create(args.bootstrap_server, args.name, args.partitions,
                                        topic_client.parse_configs(args.config))
        else:
            error = topic_client.delete(args.bootstrap_server, args.name)
    except (ValueError, OSError) as exc:
        print(f"camus topic {args.action}: {exc}", file=sys.stderr)
        return 2
    if error:
        print(f"camus topic {args.action} {args.name}: {error}", file=sys.stderr)
        return 1
    print(f"{'created' if args.action == 'create' else 'deleted'} {args.name}")
    return 0


def run(args: argparse.Namespace) -> int:
    from shim.broker import Config
    from shim.limits import Limits
    from shim.server import serve
    from shim.topics import BROKER_DEFAULTS, TopicError

    # `kill -USR1 <pid>` prints every thread's stack to stderr: a hung broker explains itself.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    host, _, port = args.listen.rpartition(":")
    config = Config(host=host or "127.0.0.1", port=int(port), data_dir=args.data_dir,
                    switch_impl=args.switch)
    topics = []
    if args.config:
        doc = json.loads(args.config.read_text())
        config.default_partitions = int(doc.get("partitions", config.default_partitions))
        config.auto_create = bool(doc.get("auto_create", config.auto_create))
        config.topic_defaults = {topic_name: str(int(doc[name])) for name, topic_name
                                 in BROKER_DEFAULTS.items() if name in doc}
        config.limits = Limits.from_config(doc)
        topics = doc.get("topics", [])
    config.topics = topics
    try:
        asyncio.run(serve(config))
    except TopicError as exc:
        logging.error("--config: %s", exc)
        return 2
    return 0
