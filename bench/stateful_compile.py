"""Benchmark: compile 100K ITCH rules of which 10 % are stateful, against the same rules
without their state (issue 25 item 8, the compile half).

The stateless 90 %: the paper's workload as `bench/compile_itch.py` makes it,
`stock == S and price > P : fwd(H)` with S one of 100 symbols, P in 1..999, H one of 200 ports.
The stateful 10 % (every tenth rule), on symbols drawn from a wider universe (`--symbols`,
default 5,000: the 100 hot symbols and cold ones, as a market has thousands of listed
symbols and alerts are spread over them):

* 40 % an average alert:      `stock == S and avg(price) > N : fwd(H)`
* 30 % a quota:               `stock == S and price > P and orders < Q : fwd(H), count(orders)`
* 30 % an order-rate alert:   `stock == S and rate(flow) >= R : fwd(H)`
* `--keyed` (default 1) market-wide rules on a meter keyed by stock_locate:
  `rate(hot) >= R : fwd(H)` (whatever stock is hot right now), in place of as many of the
  above.

Every state uses the message's ITCH timestamp (`query_timestamp(itch_order.timestamp, ns)`)
and a one-second window. Both compiles take the field order stock, price
(`camus compile --field-order itch_order.stock,itch_order.price`). Why the stateful rules are spread thin: a message in the scope of k
stateful rules needs k banks of their states and a decide entry per combination of their
regions (2^k for one threshold each), so a rule set where a message is in the scope of dozens of
stateful rules is refused (banks) or huge; this workload keeps it to a few, as real alerts
on a market would.

The baseline, compiled in the same run, is the *same rule set without state*: each state
predicate replaced by `true` (every one sits under `and`, so that is the rule's scope) and the
update actions dropped, compiled with the plain ITCH spec. The ratio is stateful / baseline
compile time (parse excluded), best of `--repeat` alternating runs; the issue's goal is 1.5x.

    python bench/stateful_compile.py [--rules N] [--share F] [--symbols K] [--keyed K]
                                     [--banks B] [--repeat R] [--seed S] [--profile FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's compiler, not an installed one

from compiler import stateful as stateful_mod  # noqa: E402
from compiler.compile import compile_rules, no_cyclic_gc  # noqa: E402
from compiler.rules import parse_rules  # noqa: E402
from compiler.spec import parse_spec  # noqa: E402

WINDOW_US = 1_000_000
HOT_BUCKETS = 1024


def spec_texts(stateful_rules: int, keyed: int, banks: int) -> tuple[str, str]:
    """The plain ITCH spec, and the same with the workload's state declared (slots enough
    for every stateful rule, rounded up to a power of two as a program would size them)."""
    plain = (ROOT / "p4/itch/itch.p4").read_text()
    slots = 1 << max(1, stateful_rules).bit_length()
    state = (f"\n@pragma query_timestamp(itch_order.timestamp, ns)\n"
             f"@pragma query_average(itch_order.price, {WINDOW_US}, {slots})\n"
             f"@pragma query_counter(orders, {WINDOW_US}, {slots})\n"
             f"@pragma query_meter(flow, packets, {WINDOW_US}, {slots})\n"
             f"@pragma query_meter(hot, packets, {WINDOW_US}, {HOT_BUCKETS * max(1, keyed)}, "
             f"itch_order.stock_locate, {HOT_BUCKETS})\n"
             f"@pragma query_banks({banks})\n")
    return plain, plain + state


def workload(n: int, share: float, symbols: int, keyed: int, seed: int
             ) -> tuple[str, str, Counter]:
    """(stateful rule text, its stateless twin, count of rules by kind)."""
    plain_rng = random.Random(seed)  # the same stream as bench/compile_itch.py
    rng = random.Random(seed + 1)
    hot = [f"S{i:03d}" for i in range(100)]
    universe = hot + [f"C{i:04d}" for i in range(max(0, symbols - 100))]
    every = round(1 / share) if share else 0
    n_stateful = n // every if every else 0
    keyed_at = set(rng.sample(range(n_stateful), min(keyed, n_stateful)))
    stateful, twin, kinds = [], [], Counter()
    k = 0
    for i in range(n):
        if not every or i % every != every - 1:
            line = (f'stock == "{plain_rng.choice(hot)}" and price > '
                    f'{plain_rng.randint(1, 999)} : fwd({plain_rng.randint(1, 200)})')
            stateful.append(line)
            twin.append(line)
            kinds["stateless"] += 1
            continue
        s, port = rng.choice(universe), rng.randint(1, 200)
        roll = rng.random()
        if k in keyed_at:
            kind, state, plain = "keyed meter", f"rate(hot) >= {rng.choice([50, 100, 500])}", ""
            actions = ""
        elif roll < 0.4:
            kind, state, plain = "average", f"avg(price) > {rng.randint(1, 999)}", f'stock == "{s}"'
            actions = ""
        elif roll < 0.7:
            kind = "quota"
            plain = f'stock == "{s}" and price > {rng.randint(1, 999)}'
            state, actions = f"orders < {rng.choice([10, 100, 1000])}", ", count(orders)"
        else:
            kind, state, plain = "rate", f"rate(flow) >= {rng.choice([10, 100, 1000])}", f'stock == "{s}"'
            actions = ""
        k += 1
        kinds[kind] += 1
        stateful.append(f"{plain + ' and ' if plain else ''}{state} : fwd({port}){actions}")
        twin.append(f"{plain or 'true'} : fwd({port})")
    return "\n".join(stateful), "\n".join(twin), kinds


# Stock first, as in bench/compile_itch.py. The order heuristic would put price first here
# (5,000 symbols make more distinct cut values than 999 prices), and every price interval
# would then test the stock: 1.5M entries for 20,000 rules, with or without state.
FIELD_ORDER = ["itch_order.stock", "itch_order.price"]


def timed_compile(spec, rules, profile: cProfile.Profile | None = None):
    """The compiled rules, wall seconds and CPU seconds of this process."""
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    if profile:
        profile.enable()
    c = compile_rules(spec, rules, field_order=FIELD_ORDER)
    if profile:
        profile.disable()
    return c, time.perf_counter() - t0, time.process_time() - c0


def kind_of(table: str, app_state) -> str:
    if app_state is not None:
        if table == app_state.decide_table:
            return "decide"
        if any(table in v.bind_tables for v in app_state.vars):
            return "bind"
    return "stages"


def binding_id_entries(c, rules, spec) -> tuple[int, int, int]:
    """What a context keyed by its bound rules alone (a *binding id*: the leaf's action
    would carry the stateless ports itself, which IR 4 does not allow) would need:
    (bindings, bind entries, decide entries). A binding is a distinct set of bound rules
    with where each fires; its decide entries are its combinations where some rule fires
    (the others would miss: no ports, no update). Worked out from the compiled diagram's
    leaves with the compiler's own `State`, whose serials follow rule order as in
    `compile_rules`."""
    st = stateful_mod.State(spec)
    for r in rules:
        if stateful_mod.stateful(r):
            st.add(r)
    d = c.diagram
    bounds = set()
    for s in d.reachable():
        g, pending = d.contents[s]
        if not pending and g:
            ctx = st.context(g)
            if ctx is not None:
                bounds.add(ctx.bound)
    binds = decides = 0
    for bound in bounds:
        every = silent = 1
        for s, fired in bound:
            rs = st.rules[s]
            binds += len(rs.vars)
            every *= rs.combinations
            silent *= rs.combinations - (len(fired) if rs.rule.ports or rs.updates else 0)
        decides += every - silent
    return len(bounds), binds, decides


def phase_timers() -> dict:
    """CPU seconds per phase of the compiles that follow, by wrapping the compiler's own
    functions (`--phases`); the wrappers cost well under 1 % here."""
    from compiler import compile as compile_mod, diagram, tables
    spent: dict = Counter()

    def wrap(owner, name, label):
        f = getattr(owner, name)

        def timed(*a, **k):
            t0 = time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[label] += time.process_time() - t0
        setattr(owner, name, timed)

    wrap(stateful_mod.State, "add", "stateful rules compiled (State.add)")
    wrap(diagram, "build", "decision diagram (diagram.build)")
    wrap(stateful_mod.State, "context", "contexts of the leaves (State.context)")
    wrap(stateful_mod.State, "allocate", "banks and cells (State.allocate)")
    wrap(tables, "stable_ids", "state and context ids (tables.stable_ids)")
    wrap(tables, "emit", "stage entries (tables.emit)")
    wrap(stateful_mod.State, "entries", "bind and decide entries (State.entries)")
    wrap(compile_mod, "_emit", "emission in all (compile._emit)")
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=100_000)
    ap.add_argument("--share", type=float, default=0.1, help="stateful share (every 1/F-th)")
    ap.add_argument("--symbols", type=int, default=5000, help="symbols stateful rules use")
    ap.add_argument("--keyed", type=int, default=1, help="market-wide keyed-meter rules")
    ap.add_argument("--banks", type=int, default=8, help="query_banks")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs; best is shown")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", help="write a cProfile of the last stateful compile here")
    ap.add_argument("--phases", action="store_true",
                    help="CPU seconds per phase of the last baseline and stateful compiles")
    args = ap.parse_args()
    import compiler
    print(f"compiler from      {Path(compiler.__file__).parent}")
    text, twin, kinds = workload(args.rules, args.share, args.symbols, args.keyed, args.seed)
    n_stateful = args.rules - kinds["stateless"]
    plain_text, state_text = spec_texts(n_stateful, args.keyed, args.banks)
    plain_spec, state_spec = parse_spec(plain_text, "itch"), parse_spec(state_text, "itch")
    t0 = time.perf_counter()
    with no_cyclic_gc():
        rules = parse_rules(text, state_spec)
    parse_s = time.perf_counter() - t0
    with no_cyclic_gc():
        base_rules = parse_rules(twin, plain_spec)
    print(f"rules              {len(rules)}: "
          + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])))
    print(f"parse seconds      {parse_s:.2f} (stateful set)")
    prof = cProfile.Profile() if args.profile else None
    runs = {"baseline": [], "stateful": []}
    spent = phase_timers() if args.phases else None
    phases = {}
    for r in range(args.repeat):
        for label, spec, rs in (("baseline", plain_spec, base_rules),
                                ("stateful", state_spec, rules)):
            if spent is not None:
                spent.clear()
            comp, wall, cpu = timed_compile(spec, rs, prof if label == "stateful" and
                                            r == args.repeat - 1 else None)
            runs[label].append((wall, cpu))
            if spent is not None:
                phases[label] = dict(spent)
            if label == "baseline":
                b = comp
            else:
                c = comp
        print(f"  run {r + 1}: baseline {runs['baseline'][-1][0]:.2f} s "
              f"({runs['baseline'][-1][1]:.2f} s CPU), stateful {runs['stateful'][-1][0]:.2f} s "
              f"({runs['stateful'][-1][1]:.2f} s CPU)")
    if prof:
        prof.dump_stats(args.profile)
    app_state = c.pipeline.applications[0].state
    for label, comp, app_st in (("baseline", b, None), ("stateful", c, app_state)):
        by = Counter()
        for table, n in comp.stats["entries"]["per_table"].items():
            by[kind_of(table, app_st)] += n
        extra = ""
        if "state" in comp.stats:
            extra = f", contexts {comp.stats['state']['contexts']}"
        print(f"{label:<18} entries {comp.stats['entries']['total']} ("
              + ", ".join(f"{k} {n}" for k, n in by.items())
              + f"), states {comp.stats['states']}, groups {comp.stats['multicast_groups']}"
              + extra)
    bindings, binds, decides = binding_id_entries(c, rules, state_spec)
    stages = c.stats["entries"]["total"] - sum(
        n for t, n in c.stats["entries"]["per_table"].items() if kind_of(t, app_state) != "stages")
    print(f"with a binding id  entries {stages + binds + decides} (stages {stages}, bind {binds}, "
          f"decide {decides}) for {bindings} bindings: not IR 4, not built")
    (bw, bc), (sw, scpu) = (min(runs[k], key=lambda x: x[1]) for k in ("baseline", "stateful"))
    best_wall = min(w for w, _ in runs["baseline"]), min(w for w, _ in runs["stateful"])
    print(f"compile seconds    baseline {best_wall[0]:.2f}, stateful {best_wall[1]:.2f} wall; "
          f"baseline {bc:.2f}, stateful {scpu:.2f} CPU (best of {args.repeat}, parse excluded)")
    print(f"stateful/baseline  {best_wall[1] / best_wall[0]:.2f}x wall, {scpu / bc:.2f}x CPU "
          f"(goal <= 1.5x), {c.stats['entries']['total'] / b.stats['entries']['total']:.2f}x "
          f"entries")
    if phases:
        print("CPU seconds by phase (last run; nested phases are inside 'emission in all')")
        for name in dict.fromkeys([*phases["stateful"], *phases["baseline"]]):
            print(f"  {name:<44} baseline {phases['baseline'].get(name, 0):5.2f}  "
                  f"stateful {phases['stateful'].get(name, 0):5.2f}")


if __name__ == "__main__":
    main()
