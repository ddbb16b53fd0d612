"""A DNS cache answered by the switch, in front of a real DNS server (the paper's §V-5).

See README.md in this folder for `camus demo dns`. `register_demo` adds the command to
`camus demo`; the demo's modules (dnspython, matplotlib) load only when it runs.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path


def register_demo(demo_subparsers: argparse._SubParsersAction) -> None:
    from apps.dns.workload import Workload

    w = Workload()
    p = demo_subparsers.add_parser(
        "dns", help="DNS: the switch answers cached names (answerDNS), dnsmasq the rest; latency CDF, server load",
        description="dnspython queries names with a Zipf popularity through camus's reference switch, "
                    "which answers the cached names itself (a `name == \"hX\" : answerDNS(ip)` rule "
                    "each) and forwards the rest to a real dnsmasq on loopback; against a baseline "
                    "with no rules. Checks every answer (dnspython), and that the switch answered "
                    "exactly the queries the reference evaluator says; writes dns.png and summary.txt.")
    g = p.add_argument_group("workload")
    g.add_argument("--names", type=int, default=w.names, help=f"names the server knows (default {w.names})")
    g.add_argument("--long-every", type=int, default=w.long_every,
                   help=f"every Nth name is too long for the switch's 8-byte name field, 0 for none "
                        f"(default {w.long_every})")
    g.add_argument("--cache", type=int, default=w.cache,
                   help=f"the most popular short names the switch answers (default {w.cache})")
    g.add_argument("--queries", type=int, default=w.queries, help=f"queries per run (default {w.queries})")
    g.add_argument("--zipf", type=float, default=w.zipf, help=f"Zipf exponent of popularity (default {w.zipf:g})")
    g.add_argument("--seed", type=int, default=w.seed, help=f"the workload's seed (default {w.seed})")
    p.add_argument("--out", default="dns-demo", help="output directory (default ./dns-demo)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from apps.dns import demo, plot, report
    from apps.dns.workload import Workload

    workload = Workload(args.names, args.long_every, args.cache, args.queries, args.zipf, args.seed)
    try:
        workload.check()
    except ValueError as exc:
        raise SystemExit(f"camus demo dns: {exc}") from None
    out = Path(args.out)
    # SIGTERM as an exception, so that the demo's cleanup stops dnsmasq and the switch too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        result = demo.run_demo(workload, out)
    except demo.ServerUnavailable as exc:
        print(f"camus demo dns: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:
        print(f"camus demo dns: {exc}", file=sys.stderr)
        return 2
    text = report.summary(result)
    (out / "summary.txt").write_text(text)
    (out / "report.json").write_text(report.as_json(result))
    plot.write_png(result, out / "dns.png")
    print(text + f"wrote {out / 'dns.png'}, {out / 'summary.txt'} and {out / 'report.json'}")
    return 0 if result.ok else 1
