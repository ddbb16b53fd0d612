"""`camus demo itch`: the ITCH market-data filtering demo (apps/itch_filter/README.md)."""

from __future__ import annotations

import argparse
import sys

from apps.cli import add_switch_and_kafka_options, kafka_clients_missing


def register_demo(demos: argparse._SubParsersAction) -> None:
    p = demos.add_parser(
        "itch", help="ITCH 5.0 feed through the software switch vs host filtering: latency CDF",
        description="Publish an ITCH 5.0 feed over MoldUDP64 to subscriber processes, once "
                    "filtered by camus's software switch and once unfiltered (host filtering); "
                    "check every subscriber got exactly its messages and plot latency.")
    p.add_argument("--messages", type=int, default=50000, help="messages in the feed (default 50000)")
    p.add_argument("--out", default="itch-demo", help="directory for itch-latency.png and summary.txt")
    p.add_argument("--rate", type=float, default=50000.0,
                   help="messages per second the publisher sends (default 50000; 0 = as fast as it can)")
    p.add_argument("--seed", type=int, default=1, help="seed of the synthetic day (default 1)")
    p.add_argument("--replay", metavar="FILE",
                   help="replay a NASDAQ ITCH 5.0 binary file (2-byte length before each message, "
                        "gzip or plain) instead of the synthetic day")
    p.add_argument("--save-feed", metavar="FILE",
                   help="also write the feed's messages as a NASDAQ binary ITCH file (.gz to compress), "
                        "for --replay or other tools")
    p.add_argument("--rounds", type=int, default=2,
                   help="runs per mode, alternating camus and host (default 2)")
    add_switch_and_kafka_options(p, "camus serve, one view per subscriber; needs kafka-python, "
                                    "installed by pip install -e '.[test]'")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from apps.itch_filter import binaryfile
    from apps.itch_filter.demo import run_demo, summary

    if args.kafka and kafka_clients_missing("itch"):
        return 2
    demo = run_demo(args.messages, args.out, seed=args.seed, rate=args.rate, replay=args.replay,
                    impl=args.impl, rounds=args.rounds, kafka=args.kafka)
    sys.stdout.write(summary(demo))
    if args.save_feed:
        print(f"wrote {binaryfile.write(args.save_feed, demo.messages)} messages to {args.save_feed}")
    print(f"wrote {args.out}/itch-latency.png and {args.out}/summary.txt")
    return 0 if demo.ok() else 1
