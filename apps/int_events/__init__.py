"""INT 2.1 telemetry filtered by camus: the fabric's INT-MD source, anomaly subscribers, the demo.

See README.md in this folder for `camus demo int`. `register_demo` adds the `int` command to
`camus demo`; the demo's modules (and matplotlib) load only when it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from apps.cli import add_switch_and_kafka_options, kafka_clients_missing


def register_demo(demo_subparsers: argparse._SubParsersAction) -> None:
    p = demo_subparsers.add_parser(
        "int", help="INT telemetry anomalies: fabric -> software switch -> subscribers, with a plot",
        description="Simulate a leaf-spine fabric emitting INT 2.1 INT-MD packets, filter them in the "
                    "software switch with anomaly subscriptions, check every delivery against the "
                    "reference semantics, and write int-anomalies.png and summary.txt.")
    p.add_argument("--packets", type=int, default=50_000, help="telemetry packets to generate (default 50000)")
    p.add_argument("--out", default="int-demo", help="output directory (default ./int-demo)")
    p.add_argument("--seed", type=int, default=1, help="the fabric's random seed (default 1)")
    add_switch_and_kafka_options(p, "camus serve, the int-anomalies view, a kafka-python consumer")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from apps.int_events import demo, plot

    if args.packets < 1:
        raise SystemExit("--packets must be at least 1")
    if args.kafka and kafka_clients_missing("int"):
        return 2
    out = Path(args.out)
    result = demo.run(args.packets, out, seed=args.seed, impl=args.impl, kafka=args.kafka)
    text = plot.summary(result)
    (out / "summary.txt").write_text(text)
    plot.write_png(result, out / "int-anomalies.png")
    wrote = ["int-anomalies.png", "summary.txt"] + (["int-anomalies.jsonl"] if args.kafka else [])
    print(text + "wrote " + ", ".join(str(out / name) for name in wrote))
    return 0 if result.ok else 1
