"""Motor highway monitoring (seed 000, section V-6): speeding cars' position reports selected
by camus's switch for the monitors of the regions they are in.

See README.md in this folder for `camus demo highway`. `register_demo` adds the command to
`camus demo`; the demo's modules load only when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register_demo(demo_subparsers: argparse._SubParsersAction) -> None:
    from apps.highway.traffic import TrafficConfig

    t = TrafficConfig()
    p = demo_subparsers.add_parser(
        "highway", help="highway monitoring: cars' position reports -> switch -> regions' monitors",
        description="Cars on a grid of highways send 10 position reports a second each, as UDP to "
                    "camus switch serve; one rule per monitored region (x > X0 and x < X1 and y > Y0 "
                    "and y < Y1 and spd > 55 : fwd(n)) sends its speeding reports to the region's "
                    "monitor. Checks every delivery against the reference evaluator, prints the table "
                    "sizes, checks that the rules take one pipeline pass, and the rates; writes "
                    "summary.txt and regions.txt.")
    g = p.add_argument_group("traffic")
    g.add_argument("--cars", type=int, default=t.cars, help=f"cars (default {t.cars})")
    g.add_argument("--duration", type=float, default=t.duration,
                   help=f"seconds of reports, 10 a second per car (default {t.duration:g})")
    g.add_argument("--highways", type=int, default=t.highways, help=f"highways, half each way (default {t.highways})")
    g.add_argument("--side-km", type=float, default=t.side_km, help=f"the map's width (default {t.side_km:g})")
    g.add_argument("--speeders", type=float, default=t.speeders,
                   help=f"share of drivers who want well over 55 mph (default {t.speeders:g})")
    g.add_argument("--slow-stretches", type=int, default=t.slow_stretches,
                   help=f"slow stretches per highway and direction (default {t.slow_stretches})")
    g.add_argument("--seed", type=int, default=t.seed, help=f"the traffic's and regions' seed (default {t.seed})")
    g = p.add_argument_group("monitoring and run")
    g.add_argument("--regions", type=int, default=300, help="monitored regions, one switch port each (default 300)")
    g.add_argument("--speed", type=float, default=1.0,
                   help="1: send at the motes' own pace; k: k times faster; 0: as fast as possible (default 1)")
    g.add_argument("--impl", choices=("native", "python"), default="native",
                   help="software switch implementation (default native)")
    g.add_argument("--no-p4c", dest="p4c", action="store_false",
                   help="do not compile the static program with p4c-bm2-ss even where it is on PATH")
    g.add_argument("--out", default="highway-demo", help="output directory (default ./highway-demo)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from apps.highway import demo, report
    from apps.highway.traffic import TrafficConfig

    settings = demo.Settings(
        TrafficConfig(args.cars, args.duration, args.highways, args.side_km, args.speeders,
                      args.slow_stretches, args.seed),
        args.regions, args.speed, args.impl, args.p4c)
    try:
        settings.check()
    except ValueError as exc:
        raise SystemExit(f"camus demo highway: {exc}") from None
    out = Path(args.out)
    try:
        result = demo.run(settings, out)
    except (RuntimeError, OSError, ValueError) as exc:
        print(f"camus demo highway: {exc}", file=sys.stderr)
        return 2
    text = report.summary(result)
    (out / "summary.txt").write_text(text)
    (out / "regions.txt").write_text(report.region_table(result))
    print(text + f"wrote {out / 'summary.txt'} and {out / 'regions.txt'}")
    return 0 if result.ok else 1
