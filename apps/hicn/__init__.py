"""hICN content requests routed by a stateful packet subscription (the paper's §V, Fig. 11).

See README.md in this folder for `camus demo hicn`. `register_demo` adds the command to
`camus demo`; the demo's modules (and matplotlib) load only when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register_demo(demo_subparsers: argparse._SubParsersAction) -> None:
    from apps.hicn.settings import FRONTS
    from apps.hicn.settings import Settings as demo_settings
    from apps.hicn.workload import WorkloadConfig

    w = WorkloadConfig()
    p = demo_subparsers.add_parser(
        "hicn", help="hICN requests: a keyed meter sends only hot content to the forwarder; latency CDF",
        description="Clients request content (Zipf popularity) through camus's switch, which sends a "
                    "request to the caching forwarder only when its content's meter says it is hot, "
                    "else upstream to the producer; against a baseline sending everything to the "
                    "forwarder. Checks every request was answered once and routed as the reference "
                    "evaluator says; writes hicn.png and summary.txt.")
    g = p.add_argument_group("workload")
    g.add_argument("--rate", type=float, default=w.rate, help=f"browsing requests per second (default {w.rate:g})")
    g.add_argument("--duration", type=float, default=w.duration, help=f"seconds of requests per run (default {w.duration:g})")
    g.add_argument("--contents", type=int, default=w.contents, help=f"content identifiers (default {w.contents})")
    g.add_argument("--zipf", type=float, default=w.zipf, help=f"Zipf exponent of popularity (default {w.zipf:g})")
    g.add_argument("--streams", type=int, default=w.streams,
                   help=f"closed-loop streaming clients of one hot content (default {w.streams})")
    g.add_argument("--window", type=int, default=w.window,
                   help=f"requests each stream keeps outstanding (default {w.window})")
    g.add_argument("--seed", type=int, default=w.seed, help=f"the workload's seed (default {w.seed})")
    g = p.add_argument_group("rules, forwarder and producer")
    d = demo_settings()
    g.add_argument("--threshold", type=int, default=d.threshold,
                   help=f"requests per second that make a content hot: rate(hot) >= T (default {d.threshold})")
    g.add_argument("--service-us", type=float, default=d.service_us,
                   help=f"the forwarder's time per packet, request or data (default {d.service_us:g})")
    g.add_argument("--capacity", type=int, default=d.capacity,
                   help=f"the forwarder's cache, in contents (default {d.capacity})")
    g.add_argument("--producer-ms", type=float, default=d.producer_ms,
                   help=f"the producer's extra delay (default {d.producer_ms:g})")
    g.add_argument("--jitter-ms", type=float, default=d.jitter_ms,
                   help=f"mean of the producer's exponential jitter (default {d.jitter_ms:g})")
    g.add_argument("--data-bytes", type=int, default=d.data_bytes,
                   help=f"content bytes in an answer (default {d.data_bytes})")
    g = p.add_argument_group("run")
    g.add_argument("--switch", choices=FRONTS, default="embedded",
                   help="embedded: camus's switch in this process; serve: `camus switch serve` as a "
                        "process; bmv2: simple_switch_grpc (needs p4c and bmv2 on PATH, and root)")
    g.add_argument("--impl", choices=("native", "python"), default="python",
                   help="software switch implementation (default python)")
    g.add_argument("--rounds", type=int, default=1, help="runs per mode, alternating (default 1)")
    g.add_argument("--grace", type=float, default=5.0, help="seconds to wait for late answers (default 5)")
    g.add_argument("--out", default="hicn-demo", help="output directory (default ./hicn-demo)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from apps.hicn import demo, plot, report
    from apps.hicn.settings import Settings
    from apps.hicn.workload import WorkloadConfig

    settings = Settings(
        WorkloadConfig(args.rate, args.duration, args.contents, args.zipf, args.streams, args.window, args.seed),
        args.threshold, args.service_us, args.capacity, args.producer_ms, args.jitter_ms, args.data_bytes,
        args.grace, args.switch, args.impl, args.rounds)
    try:
        settings.check()
    except ValueError as exc:
        raise SystemExit(f"camus demo hicn: {exc}") from None
    out = Path(args.out)
    try:
        result = demo.run_demo(settings, out)
    except (demo.FrontError, RuntimeError, OSError) as exc:
        print(f"camus demo hicn: {exc}", file=sys.stderr)
        return 2
    text = report.summary(result)
    (out / "summary.txt").write_text(text)
    plot.write_png(result, out / "hicn.png")
    print(text + f"wrote {out / 'hicn.png'} and {out / 'summary.txt'}")
    return 0 if result.ok else 1
