"""A DNS cache of N names (p4/dns/dns.p4): compiling `name == "hK" : answerDNS(ip)` rules
against the same names with `fwd(2)` (the baseline, same run), and the Python reference
switch answering queries against forwarding them (docs/actions.md).

    python bench/dns_cache.py [--names 10000] [--queries 5000] [--seed 1]

Prints one line per measurement and the ratios; BENCHMARKS.md records them.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dns.message  # noqa: E402

from compiler.compile import compile_rules  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import load_spec  # noqa: E402
from switch.packet import udp_frame  # noqa: E402
from switch.reference import ReferenceDataPlane  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--names", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = load_spec(ROOT / "p4/dns/dns.p4")
    if not 1 <= args.names <= 100_000:
        ap.error("--names: 1..100000 (h99999 is the longest name that fits 8 bytes)")
    names = [f"h{k}" for k in range(args.names)]
    answer = "\n".join(f'name == "{n}" : answerDNS(10.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255})'
                       for k, n in enumerate(names))
    forward = "\n".join(f'name == "{n}" : fwd(2)' for n in names)
    compiled = {}
    for label, text in (("fwd (baseline)", forward), ("answerDNS", answer)):
        t0 = time.perf_counter()
        rules = parse_rules(text, spec)
        t1 = time.perf_counter()
        c = compile_rules(spec, rules)
        t2 = time.perf_counter()
        print(f"{label:15} {len(rules)} rules: parse {t1 - t0:.2f} s, compile {t2 - t1:.2f} s, "
              f"{c.stats['entries']['total']} entries")
        compiled[label] = (c, t1 - t0, t2 - t1)
    rng = random.Random(args.seed)
    queries = [udp_frame(dns.message.make_query(rng.choice(names), "A").to_wire(), dst_port=53)
               for _ in range(args.queries)]
    rates = {}
    for label, (c, _, _) in compiled.items():
        sw = ReferenceDataPlane(c.pipeline)
        sw.load_entries(c.entries)
        t0 = time.perf_counter()
        for q in queries:
            sw.process(q, 7)
        rates[label] = args.queries / (time.perf_counter() - t0)
        print(f"{label:15} reference switch: {rates[label]:,.0f} queries/s")
    (fc, fp, fcomp), (ac, ap_, acomp) = compiled["fwd (baseline)"], compiled["answerDNS"]
    print(f"ratios answerDNS / fwd: parse {ap_ / fp:.2f}, compile {acomp / fcomp:.2f}, "
          f"switch rate {rates['answerDNS'] / rates['fwd (baseline)']:.2f}")


if __name__ == "__main__":
    main()
