"""The demo's figures in text (summary.txt, printed) and JSON (report.json)."""

from __future__ import annotations

import json
import math

from apps.dns.demo import MODES, Demo, Run


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile by nearest rank; NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)]


def latencies(run: Run, by: str) -> list[float]:
    return [q.ms for q in run.answered(by) if q.ms is not None]


def run_figures(run: Run) -> dict:
    out = {"rules": run.rules, "entries": run.entries, "queries": len(run.queries),
           "seconds": round(run.seconds, 3),
           "answered_by_switch": len(run.answered("switch")),
           "answered_by_server": len(run.answered("server")),
           "unanswered": sum(q.ms is None for q in run.queries),
           "server_load": {"relayed": run.relayed, "dnsmasq_log": len(run.server_log)},
           "latency_ms": {}}
    for by in ("switch", "server"):
        xs = latencies(run, by)
        out["latency_ms"][by] = {f"p{p}": round(percentile(xs, p), 3) for p in (50, 90, 99)} if xs else None
    out["failures"] = run.failures()
    return out


def as_json(demo: Demo) -> str:
    return json.dumps({"settings": demo.workload.__dict__,
                       "runs": {m: run_figures(demo.runs[m]) for m in MODES}}, indent=1)


def summary(demo: Demo) -> str:
    w = demo.workload
    long_names = f"1 name in {w.long_every}" if w.long_every else "no name"
    lines = [f"camus demo dns: {w.queries} queries per run over {w.names} names (Zipf {w.zipf:g}, seed {w.seed}; "
             f"{long_names} too long for the switch), {w.cache} cached at the switch",
             f"{'mode':9} {'rules':>5} {'switch':>7} {'server':>7} {'lost':>5} {'server load':>18}   "
             f"{'latency ms p50/p90/p99: switch':>31} {'server':>20}"]
    for mode in MODES:
        f = run_figures(demo.runs[mode])
        lat = {by: ("-" if v is None else f"{v['p50']:.3f}/{v['p90']:.3f}/{v['p99']:.3f}")
               for by, v in f["latency_ms"].items()}
        load = f"{f['server_load']['dnsmasq_log']} (relay {f['server_load']['relayed']})"
        lines.append(f"{mode:9} {f['rules']:5} {f['answered_by_switch']:7} {f['answered_by_server']:7} "
                     f"{f['unanswered']:5} {load:>18}   {lat['switch']:>31} {lat['server']:>20}")
    cache, base = (len(demo.runs[m].server_log) for m in MODES)
    if base:
        lines.append(f"server load with the switch's answers: {cache}/{base} queries = "
                     f"{cache / base:.1%} of the baseline's")
    problems = [f"{m}: {p}" for m in MODES for p in demo.runs[m].failures()]
    if problems:
        lines.append(f"FAILED: {len(problems)} problems")
        lines += [f"  {p}" for p in problems[:20]]
    else:
        lines.append("checks passed: every answer valid (dnspython) with the name's address; the switch "
                     "answered exactly what the reference evaluator says; the server saw each other query once")
    return "\n".join(lines) + "\n"
