"""The demo's text report: the workload, the tables, the single pass, deliveries and rates."""

from __future__ import annotations

from apps.highway.demo import Result
from apps.highway.traffic import SPEED_LIMIT


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def tables(result: Result) -> list[str]:
    c = result.compiled
    app = c.application
    per_table = c.stats["entries"]["per_table"]
    order = ", ".join(s.field.name.split(".")[-1] for s in app.stages)
    lines = [f"tables (the compile the switch ran, {len(app.stages)} stages in the compiler's field order "
             f"{order}; {c.stats['states']:,} states of the decision diagram, {c.stats['state_width']}-bit state):",
             f"  {'stage':<6} {'table':<22} {'match':<6} {'entries':>8} {'default entries':>16}"]
    for n, s in enumerate(app.stages, 1):
        lines.append(f"  {n:<6} {s.table:<22} {s.match_kind:<6} {per_table.get(s.table, 0):>8,} "
                     f"{per_table.get(s.default_table, 0):>16,}")
    lines.append(f"  {'leaf':<6} {app.leaf_table:<22} {'exact':<6} {per_table.get(app.leaf_table, 0):>8,}")
    lines.append(f"  total {c.stats['entries']['total']:,} entries, {c.stats['multicast_groups']} multicast "
                 f"group (reports in several regions: one port bitmap per decision)")
    st = result.static_stats
    lines.append(f"  the spec's static pipeline (P4 targets; the spec's order "
                 f"{', '.join(f.split('.')[-1] for f in st['fields'])}): {st['entries']['total']:,} entries, "
                 f"{st['states']:,} states")
    return lines


def one_pass(result: Result) -> list[str]:
    prog, p4c, counters = result.program, result.p4c, result.counters
    app = result.compiled.application
    lines = ["one pipeline pass (seed 000, V-6: \"evaluated in a single pipeline pass, without recirculation\"):",
             f"  in camus: a report is one message per packet ('{app.framing}' framing, {max(1, len(app.lanes))} "
             f"lane), parsed once; it walks the {len(app.stages)} field-ordered stages once, each table looked "
             "up at most once, then the leaf; only several messages per packet (MoldUDP64) resubmit",
             f"  generated program ({prog.lines} lines): "
             + ", ".join(f"{t} x{prog.applies[t]}" for t in prog.stage_tables)
             + f"; resubmit/recirculate/clone calls: {len(prog.again)}: {_yes(prog.ok)}"]
    if p4c.ran:
        lines.append(f"  p4c-bm2-ss: compiled; bmv2 JSON primitives {', '.join(p4c.primitives)}; "
                     f"{len(p4c.ingress_tables)} ingress tables; none resubmits, recirculates or clones: "
                     f"{_yes(p4c.ok)}")
    else:
        lines.append(f"  p4c-bm2-ss: not run ({p4c.why_not})")
    if counters is not None:
        lookups = ", ".join(f"{t} {n:,}" for t, n in counters.lookups.items())
        lines.append(f"  switch counters: {counters.received:,} reports in; lookups {lookups}; "
                     f"first stage once per report, none more: {_yes(counters.ok)}")
    return lines


def deliveries(result: Result) -> list[str]:
    expected = result.expected
    in_regions = sum(1 for p in expected if p)
    regions_hit = len(result.by_region)
    lines = [f"expected (compiler.semantics.evaluate over all {len(result.regions)} rules, per report; "
             f"{result.evaluations:,} distinct (x, y, spd) evaluated in {result.evaluate_seconds:.1f} s):",
             f"  speeding reports inside a region: {in_regions:,} of {len(expected):,} "
             f"({100 * in_regions / max(1, len(expected)):.1f} %); copies {result.copies_expected:,} "
             f"(a report in k regions goes to k monitors; {sum(len(p) > 1 for p in expected):,} reports "
             f"in more than one); {regions_hit} of {len(result.regions)} regions have some",
             "",
             f"delivered    {'copies':>8} {'missing':>8} {'extra':>6} {'dupl.':>6} {'altered':>8}  regions exact"]

    def row(name: str, delivered: dict[int, list[int]], altered: int, extra_bad: int = 0) -> str:
        rows = result.region_rows(delivered)
        exact = sum(1 for _, _, _, m, x, d in rows if m == x == d == 0)
        return (f"{name:<12} {sum(len(v) for v in delivered.values()):>8,} {sum(r[3] for r in rows):>8,} "
                f"{sum(r[4] for r in rows) + extra_bad:>6,} {sum(r[5] for r in rows):>6,} {altered:>8,}  "
                f"{exact}/{len(rows)}")

    lines.append(row("in process", result.inprocess.copies, result.inprocess.altered))
    lv = result.live
    if lv is not None:
        lines.append(row("live", result.live_indices, lv.altered, lv.strangers + lv.undecodable))
        latencies = [(arrival - lv.send_ns[i]) / 1e6 for got in lv.delivered.values() for i, arrival in got]
        seen = {i for got in lv.delivered.values() for i, _ in got}
        short = {i for p, want in result.by_region.items() for i in want
                 if i not in seen or i not in {j for j, _ in lv.delivered.get(p, [])}}
        if short:
            lost = lv.kernel_drops.get("switch ingress", 0) + lv.kernel_drops.get("monitors", 0)
            lines.append(f"  {len(short):,} reports lack a copy; the kernel dropped {lost:,} datagrams at full "
                         "receive buffers on the way (the switch's socket, the monitors'): nothing retransmits")
        if latencies:
            lines.append(f"  live latency, report sent -> monitor: p50 {_pct(latencies, 0.5):.2f} ms, "
                         f"p99 {_pct(latencies, 0.99):.2f} ms, max {max(latencies):.2f} ms")
    return lines


def rates(result: Result) -> list[str]:
    s, lv, ip = result.settings, result.live, result.inprocess
    lines = ["rates:"]
    if lv is not None:
        n = len(result.reports)
        pace = "the motes' own pace" if s.speed == 1 else ("as fast as one sender goes" if s.speed == 0
                                                           else f"{s.speed:g}x the motes' pace")
        lines.append(f"  offered: {n:,} reports in {lv.seconds:.2f} s = {n / max(lv.seconds, 1e-9):,.0f} "
                     f"reports/s ({pace}; {s.traffic.cars:,} cars x 10/s = {s.traffic.cars * 10:,}/s at speed 1)")
        ports = lv.counters.get("ports", {})
        received = ports.get(0, {}).get("rx", 0)
        copies = sum(v["tx"] for p, v in ports.items() if p != 0)
        drops = lv.counters.get("drops", {})
        lines.append(f"  camus switch serve ({s.impl}): took in {received:,} reports, sent {copies:,} copies, "
                     f"dropped {drops.get('no_route', 0):,} (in no region or not speeding: no route); "
                     f"kernel drops: {lv.kernel_drops.get('switch ingress', 0)} at its socket, "
                     f"{lv.kernel_drops.get('monitors', 0)} at the monitors'")
        last = max((a for got in lv.delivered.values() for _, a in got), default=None)
        if last is not None and received:
            took = (last - lv.send_ns[0]) / 1e9
            lines.append(f"  through the switch: {received:,} reports from the first sent to the last copy at a "
                         f"monitor in {took:.2f} s = {received / took:,.0f} reports/s")
    lines.append(f"  in process, no sockets ({s.impl} data plane, the same frames, best of {ip.rounds}): "
                 f"{ip.rate:,.0f} reports/s")
    return lines


def summary(result: Result) -> str:
    s = result.settings
    t = s.traffic
    speeding = sum(r.spd > SPEED_LIMIT for r in result.reports)
    lines = [f"camus demo highway: {t.cars:,} cars ({result.speeders} want well over {SPEED_LIMIT} mph) on "
             f"{t.highways} highways across a {t.side_km:g} km map, {t.duration:g} s of position reports, 10 a "
             f"second per car: {len(result.reports):,} reports, {speeding:,} over {SPEED_LIMIT} mph; "
             f"{len(result.regions)} regions, one monitor each; seed {t.seed}",
             f"rule per region: {result.regions[0].rule}   (all in highway.rules)",
             ""]
    lines += tables(result) + [""] + one_pass(result) + [""] + deliveries(result) + [""] + rates(result)
    lines.append(f"load average after the run {result.load:.1f}; {result.wall_seconds:.1f} s in all")
    lines.append("")
    if result.ok:
        lines.append("every monitor got exactly its region's speeding reports, each once and unaltered, in "
                     "process and live; one pass: yes")
    else:
        lines.append("MISMATCH: " + "; ".join(
            what for what, bad in (("in-process copies differ from the evaluator's", not result.inprocess_ok),
                                   ("live deliveries differ from the evaluator's", not result.live_ok),
                                   ("the single pass did not hold", not result.one_pass_ok))
            if bad))
    return "\n".join(lines) + "\n"


def region_table(result: Result) -> str:
    """Per region: its rule and the counts, for regions.txt."""
    lines = [f"{'port':>4} {'highway':>7} {'expected':>8} {'in-proc':>8} {'live':>8}  rule"]
    live = result.region_rows(result.live_indices) if result.live else None
    for k, (r, want, got, *_rest) in enumerate(result.region_rows(result.inprocess.copies)):
        lines.append(f"{r.port:>4} {r.highway:>7} {want:>8} {got:>8} {live[k][2] if live else '-':>8}  {r.filter}")
    return "\n".join(lines) + "\n"
