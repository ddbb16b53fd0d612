"""The compiler as one call: spec + rules -> diagram -> pipeline IR, entries and stats."""

from __future__ import annotations

import bisect
import contextlib
import gc
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

from compiler import (actions as actions_mod, diagram, estimate, exact_only, lanes as lanes_mod,
                      lowering, order, stateful as stateful_mod, tables)
from compiler.ast import And, Atom, Filter, Not, Or, Rule
from compiler.errors import CamusError
from compiler import formula
from compiler.formula import Wide, conjunctions as normal_form, sizing
from compiler.rules import deep_recursion, load_rules, parse_rules
from compiler.spec import Spec, load_spec, parse_spec
from compiler.state import check_slots
from pipeline import document, entries as entries_json, interpreter
from pipeline.model import CTX_WIDTH, MAX_PORTS_WIDTH, Application, Lane, Pipeline, Stage


@dataclass
class Compiled:
    spec: Spec
    rules: list[Rule]
    diagram: diagram.Diagram
    stages: list[Stage]
    pipeline: Pipeline
    # entries.json; or, from the exact-only path, what builds it when first read (`entries`)
    # and writes it without building it (`write_outputs`: 1M hICN rules need no entry objects)
    _entries: dict | exact_only.ExactOnly
    stats: dict = field(default_factory=dict)
    # With several lanes: every lane's diagram and stages (`diagram`, `stages`: the first's).
    lanes: list[tuple[diagram.Diagram, list[Stage]]] = field(default_factory=list)

    @property
    def entries(self) -> dict:
        """entries.json as a document."""
        if not isinstance(self._entries, dict):
            self._entries = self._entries.document()
        return self._entries

    def write_entries(self, fh) -> None:
        """entries.json's text, as `pipeline.entries.write` gives it, onto `fh`."""
        if isinstance(self._entries, dict):
            entries_json.write(self._entries, fh)
        else:
            self._entries.write(fh)

    @property
    def application(self) -> Application:
        return self.pipeline.applications[0]

    def tables(self) -> interpreter.Tables:
        """The compiled entries loaded into the pipeline's tables (what `camus eval` runs)."""
        return interpreter.load(self.pipeline, self.entries)


# Where verdicts' pseudo-ports start: past every port a rule names (ports are 1..511).
PSEUDO_PORT_BASE = 1 << 20


class TooLarge(CamusError):
    """The rules compile to more entries than the budget: refused as soon as the diagram
    shows it, with the estimate's explanation."""


def compile_rules(spec: Spec, rules: Sequence[Rule], field_order: Sequence[str] | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  static: bool = False, max_entries: int | None = None,
                  on_estimate: Callable[[estimate.Estimate], None] | None = None,
                  lanes: str | int = 1, trial_seconds: float | None = None) -> Compiled:
    """Tables for `rules`. With `static`, the pipeline (stages, match kinds) depends on the
    spec alone: every query field gets a stage with its declared match kind, so any rule set
    compiles to entries for one and the same pipeline.

    With `max_entries` (or `on_estimate`), the size is estimated first (`compiler.estimate`,
    linear in the rules, an upper bound); when the estimate is over `max_entries`, the build
    runs on trial (`Trial`): TooLarge as soon as the entries counted for sure pass
    `max_entries`, or after `trial_seconds` of CPU (None: TRIAL_SECONDS). Whatever the
    estimate, TooLarge if the entries come out over it. The message says which fields and
    rules drive the size and what would bring it under. `on_estimate` is given the estimate
    (a progress bar takes its states as its total).

    `lanes`: 1 compiles one diagram; N (> 1) at most N lanes, diagrams on groups of rules
    whose decisions are unioned (`compiler.lanes`); "auto" lanes only when the estimate says
    they are much smaller than one diagram. A static pipeline has one lane, and so does an
    application whose spec declares state.

    Stateful rules (docs/stateful.md) compile to the state stages (`compiler.stateful`;
    docs/pipeline-ir.md, "State"); a rule set the machine model cannot hold (over a state's
    slots or banks, too many thresholds or combinations) is refused (StateError) naming
    the rules."""
    with no_cyclic_gc(), deep_recursion():
        return _compile_rules(spec, rules, field_order, progress, static, max_entries, on_estimate,
                              lanes, trial_seconds)


@contextlib.contextmanager
def no_cyclic_gc():
    """Pause Python's cycle collector while building large acyclic structures.

    Compiling 100K rules allocates millions of small tuples and sets, none of them in a
    cycle; the collector would walk them over and over (about a quarter of the time) and
    find nothing. Reference counting still frees everything.

    On the way out, what the block built and kept (rules, the diagram, the tables) goes
    straight to the oldest generation (`gc.freeze()` then `gc.unfreeze()`, when nothing
    else is frozen): otherwise the first young collection after `gc.enable()` walks all of
    it at once (0.1-0.3 s for the 100K-rule benchmark) to move it there. It is still
    collected as usual by full collections.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _compile_rules(spec: Spec, rules: Sequence[Rule], field_order: Sequence[str] | None,
                   progress: Callable[[int, int], None] | None, static: bool,
                   max_entries: int | None = None,
                   on_estimate: Callable[[estimate.Estimate], None] | None = None,
                   lanes: str | int = 1, trial_seconds: float | None = None) -> Compiled:
    started = time.perf_counter()
    st = None
    # Verdicts (drop, declared actions; docs/actions.md) ride in the diagram's leaves as
    # pseudo-ports past every real one, numbered in rank order (`compiler.actions.rank`), so
    # the numbering depends on the rule set's meaning; `tables.decision` turns them back.
    verdicts = {PSEUDO_PORT_BASE + i: v for i, v in enumerate(
        sorted({r.verdict for r in rules if r.verdict is not None}, key=actions_mod.rank))}
    pseudo = {v: p for p, v in verdicts.items()}
    if spec.state_vars and any(map(stateful_mod.stateful, rules)):
        st = stateful_mod.State(spec)  # rules with state: one lane, the general path
    elif not verdicts and spec.default is None and (fast := exact_only.diagram_for(
            spec, rules, field_order, static, max_entries, on_estimate)):
        # 1M hICN rules: entries straight from the values, the diagram built only if read.
        # A spec declaring state whose rules use none (hicn.p4's meter) still goes this way.
        return _emit(spec, rules, len(rules), fast.diagram(), fast.stages, fast.predicted,
                     static, started, fast)
    elif spec.state_vars:
        st = stateful_mod.State(spec)
    items = []
    append = items.append
    expanded = rules  # the rules the match kinds come from: stateful ones as pseudo-rules
    if st is not None:
        expanded = []
        for rule in rules:
            if stateful_mod.stateful(rule):
                rs = st.add(rule)
                expanded += rs.pseudo
                items += stateful_mod.items(rs)
            else:
                expanded.append(rule)
                items += [(conj, rule.ports) for conj in normal_form(rule.filter, rule.line)]
        # Before the diagram: a rule set over its slots is refused. Each rule's states are
        # known from compiling it.
        vars_of = {id(rs.rule): rs.vars for rs in st.rules.values()}
        check_slots(st.live_rules(), states=lambda r: vars_of[id(r)])
    else:
        for rule in rules:
            ports = rule.ports
            if rule.verdict is not None:
                ports = ports | {pseudo[rule.verdict]}
            for conj in normal_form(rule.filter, rule.line):  # or a wide filter whole
                append((conj, ports))
    fields = order.choose(spec, sizing(c for c, _ in items), field_order, static)
    # Lanes partition conjunctions by the fields they test; a wide filter kept whole as a
    # formula tests many fields at once, so a rule set holding one compiles as one diagram.
    # Verdicts are ranked across every rule a message matches: one diagram holds them all.
    if lanes != 1 and not static and st is None and not verdicts and \
            not any(type(c) is Wide for c, _ in items):
        chosen = _choose_lanes(spec, items, fields, field_order, lanes)
        if chosen is not None:
            return _compile_lanes(spec, rules, items, chosen, field_order, progress, max_entries,
                                  on_estimate, started, trial_seconds)
    predicted = None
    trial = None
    if max_entries or on_estimate:
        predicted = _estimate([c for c, _ in items], fields)
        if on_estimate:
            on_estimate(predicted)
        if max_entries and predicted.entries > max_entries:
            # The estimate is an upper bound, and a loose one wherever the diagram merges what
            # it multiplies (20,000 random ITCH rules estimated at 1.5M entries compile to
            # 8,007; random 10-field Kafka rule sets at 10^7-10^11 to a few hundred): build on
            # trial, refused only when the entries counted pass the budget or the trial's
            # CPU bound is hit.
            trial = Trial(max_entries, trial_seconds, lambda counted, stopped: _too_large(
                items, rules, fields, max_entries, predicted, counted, stopped))
    kinds = {q.qname: q.kind for q in fields} if static else match_kinds(spec, expanded)
    stages = lowering.stages_for(spec, fields, kinds)
    d = diagram.build(items, fields, progress, trial)
    c = _emit(spec, rules, len(items), d, stages, predicted, static, started, state=st,
              verdicts=verdicts)
    total = c.stats["entries"]["total"]
    if max_entries and total > max_entries:
        raise _too_large(items, rules, fields, max_entries, predicted, total)
    return c


# How long a build the estimate put over the budget may run: a rule set that really is far
# over it (100K three-field ITCH rules: 40M entries; 100 Siena subscriptions on 8 attributes,
# whose every split is slow) is refused after this much CPU time in the build, which also
# bounds the memory it takes. Only such a build runs under it.
TRIAL_SECONDS = 10.0


class Trial:
    """The watch on a build (or the lanes' builds) that the estimate put over `budget`: raises
    `refusal(counted, stopped)` once the entries the finished diagram holds at least
    (`diagram.build`'s lower bound, plus `done` for lanes already built) pass the budget
    (`stopped` None), or after `seconds` (None: TRIAL_SECONDS) of this thread's CPU time
    (`stopped` = those seconds), whichever comes first. It never refuses on the estimate: a
    rule set whose diagram fits is built to the end and counted."""

    def __init__(self, budget: int, seconds: float | None,
                 refusal: Callable[[int, float | None], Exception]) -> None:
        seconds = seconds or TRIAL_SECONDS
        self.budget, self.seconds, self.refusal = budget, seconds, refusal
        self.until = time.thread_time() + seconds
        self.done = 0
        self.floor = 0

    def __call__(self, floor: int) -> None:
        self.floor = floor
        if self.done + floor > self.budget:
            raise self.refusal(self.done + floor, None)
        if time.thread_time() > self.until:
            raise self.refusal(self.done + floor, self.seconds)


def _emit(spec: Spec, rules: Sequence[Rule], conjunctions: int, d: diagram.Diagram,
          stages: list[Stage], predicted: estimate.Estimate | None, static: bool,
          started: float, fast: exact_only.ExactOnly | None = None,
          state: stateful_mod.State | None = None, verdicts: dict | None = None) -> Compiled:
    # `fast` (the exact-only path) knows its states and, mostly, its entries without `d`.
    reachable = None if fast else d.reachable()
    states = fast.states() if fast else len(reachable)
    app = lowering.application(spec, stages)
    state_width = tables.state_bits(states, static)
    contexts = 0
    if fast is not None and fast.prepare(app.leaf_table, app.multicast_group, state_width,
                                        bool(app.state)):
        entries_doc, groups, per_table = fast, fast.groups, fast.per_table()
    elif state is not None:
        entries, groups, contexts = _emit_stateful(d, stages, app, reachable, state_width, state)
        entries_doc = {"camus_entries": entries_json.STATE_ENTRIES_VERSION,
                       "table_entries": entries, "multicast_groups": groups,
                       "state_instances": state.instances(app.name)}
        per_table = _per_table(entries)
    else:
        entries, groups = tables.emit(d, stages, app.leaf_table, reachable or d.reachable(),
                                      app.multicast_group, state_width, verdicts=verdicts)
        entries_doc = {"camus_entries": entries_json.ENTRIES_VERSION, "table_entries": entries,
                       "multicast_groups": groups}
        if app.state:  # state declared, used by no rule: the state tables stay empty
            entries_doc["camus_entries"] = entries_json.STATE_ENTRIES_VERSION
            entries_doc["state_instances"] = []
        per_table = _per_table(entries)
    if spec.default is not None and spec.default[0]:
        groups = entries_doc["multicast_groups"] = _with_ports(groups, app.multicast_group,
                                                               spec.default[0])
    ports_width = MAX_PORTS_WIDTH
    if not static:  # a static pipeline has a bit for every port; else up to the highest used
        ports_width = 1 + max((r["port"] for g in groups for r in g["replicas"]), default=0)
    pipeline = lowering.pipeline([app], state_width, ports_width)
    stats = _stats(rules, conjunctions, stages, per_table, states, state_width, groups,
                   started, predicted)
    if state is not None:
        stats["state"] = {"stateful_rules": len(state.rules), "contexts": contexts}
    return Compiled(spec, list(rules), d, stages, pipeline, entries_doc, stats)


def _with_ports(groups: list[dict], group: int, ports: frozenset[int]) -> list[dict]:
    """`groups` with the application's group reaching `ports` too (the default action's:
    a MoldUDP64 packet mixing it with rules' decisions multicasts through the group)."""
    have = {r["port"] for g in groups for r in g["replicas"]}
    every = sorted(have | ports)
    if every == sorted(have):
        return groups
    return [{"id": group, "replicas": [{"port": p, "rid": 0} for p in every]}]


def _emit_stateful(d: diagram.Diagram, stages: list[Stage], app: Application,
                   reachable: list[int], state_width: int, state: stateful_mod.State
                   ) -> tuple[list[dict], list[dict], int]:
    """The entries of an application with state: the stage tables as `tables.emit` makes
    them (leaves that need state deciding `stateful(ctx)`), then each context's bind and
    decide entries in context id order; its multicast groups; the number of contexts."""
    contents = d.contents
    ctx_of_leaf = {}
    texts: dict[stateful_mod.Context, str] = {}
    # The leaves' sorted port lists and texts, shared with the state ids (`tables.emit`),
    # which sort them anyway: markers sort after every port, so a leaf's markers are the
    # tail of its list and its context's ports text is a prefix of the leaf's.
    port_texts: dict = {}
    marker = stateful_mod.MARKER_BASE
    for s in reachable:
        g, pending = contents[s]
        if not pending and g:
            text = diagram.port_list(g, port_texts)
            order = port_texts[g][0]
            if order[-1] < marker:
                continue  # no markers: no state
            ctx = state.context(g, order[bisect.bisect_left(order, marker):])
            ctx_of_leaf[s] = ctx
            if ctx not in texts:
                markers = len(g) - len(ctx.ports)
                texts[ctx] = ctx.text(text.rsplit(",", markers)[0] if ctx.ports else "")
    contexts = texts.keys()
    for ctx in contexts:
        state.check(ctx)
    state.allocate(contexts)  # a fresh target's cells are zero: no resets to make
    ids = tables.stable_ids(texts, CTX_WIDTH, {})
    entries, groups = tables.emit(d, stages, app.leaf_table, reachable, app.multicast_group,
                                  state_width, {s: ids[c] for s, c in ctx_of_leaf.items()},
                                  state.real_ports, port_texts=port_texts)
    names = stateful_mod.tables_for(state.spec, app.state)
    for ctx in sorted(contexts, key=ids.__getitem__):
        entries += state.entries(ctx, ids[ctx], names)
    return entries, groups, len(contexts)


def _choose_lanes(spec: Spec, items, fields, field_order, lanes: str | int):
    """The lanes to compile `items` into, or None for one diagram (`compiler.lanes`)."""
    def order_of(conjunctions):
        return order.choose(spec, conjunctions, field_order)

    cap = lanes_mod.AUTO_MAX_LANES if lanes == "auto" else lanes
    chosen = lanes_mod.partition(items, order_of, cap)
    if len(chosen) < 2:
        return None
    if lanes == "auto":
        single = estimate.estimate([c for c, _ in items], fields).entries
        if not lanes_mod.worth_it(single, chosen):
            return None
    return chosen


def _compile_lanes(spec: Spec, rules: Sequence[Rule], items, chosen, field_order,
                   progress, max_entries: int | None, on_estimate, started: float,
                   trial_seconds: float | None) -> Compiled:
    """One diagram per lane, each with its own stages and leaf, one application and group."""
    kinds = match_kinds(spec, rules)
    total = sum(lane.entries for lane in chosen)
    predicted = None
    trial = None
    if max_entries or on_estimate:
        predicted = estimate.Estimate([], total, 0)
        if on_estimate:
            on_estimate(predicted)
        if max_entries and total > max_entries:  # an upper bound: built on trial
            def refusal(counted: int, stopped: float | None) -> TooLarge:
                return TooLarge(
                    f"the rules would compile to about {total:,} entries in {len(chosen)} "
                    f"lanes by the estimate, more than the budget of {max_entries:,} entries "
                    f"(--max-entries); " + _trial_outcome(counted, stopped)
                    + "; raise it, or pass --max-entries 0 to compile regardless")
            trial = Trial(max_entries, trial_seconds, refusal)
    built = []
    for k, lane in enumerate(chosen):
        conj = [c for c, _ in lane.items]
        fields = order.choose(spec, conj, field_order)
        stages = lowering.stages_for(spec, fields, kinds, lane=k)
        built.append((diagram.build(lane.items, fields, progress, trial), stages))
        if trial is not None:
            trial.done, trial.floor = trial.done + trial.floor, 0
    reachable = [d.reachable() for d, _ in built]
    state_width = tables.state_bits(max(len(r) for r in reachable))
    extra = tuple(Lane(tuple(stages), lowering.leaf_table(spec, k))
                  for k, (_, stages) in enumerate(built) if k)
    app = lowering.application(spec, built[0][1], extra)
    entries: list[dict] = []
    ports: set[int] = set()
    lane_stats = []
    for k, ((d, stages), live) in enumerate(zip(built, reachable)):
        lane_entries, groups = tables.emit(d, stages, lowering.leaf_table(spec, k), live,
                                           app.multicast_group, state_width)
        entries += lane_entries
        ports.update(r["port"] for g in groups for r in g["replicas"])
        lane_stats.append({"fields": [s.field.name for s in stages],
                           "conjunctions": len(chosen[k].items), "entries": len(lane_entries),
                           "states": len(live), "estimate": chosen[k].entries})
    replicas = [{"port": p, "rid": 0} for p in sorted(ports)]
    groups = [{"id": app.multicast_group, "replicas": replicas}] if ports else []
    pipeline = lowering.pipeline([app], state_width, 1 + max(ports, default=0))
    stats = _stats(rules, len(items), [s for _, st in built for s in st], _per_table(entries),
                   sum(len(r) for r in reachable), state_width, groups, started, predicted)
    stats["lanes"] = lane_stats
    c = Compiled(spec, list(rules), built[0][0], built[0][1], pipeline,
                 {"camus_entries": entries_json.ENTRIES_VERSION, "table_entries": entries,
                  "multicast_groups": groups}, stats, built)
    if max_entries and len(entries) > max_entries:
        raise TooLarge(f"the rules compile to {len(entries):,} entries in {len(chosen)} lanes, "
                       f"more than the budget of {max_entries:,} entries (--max-entries)")
    return c


def _per_table(entries: list[dict]) -> dict[str, int]:
    """Entries per table, tables in the order of their first entry (counted in C)."""
    return dict(Counter(map(itemgetter("table"), entries)))


def _stats(rules, conjunctions: int, stages, per_table: dict[str, int], states: int,
           state_width: int, groups: list, started: float, predicted) -> dict:
    stats = {
        "rules": len(rules),
        "conjunctions": conjunctions,
        "fields": [s.field.name for s in stages],
        "entries": {"total": sum(per_table.values()), "per_table": per_table},
        "states": states,
        "state_width": state_width,
        "multicast_groups": len(groups),
        "compile_seconds": round(time.perf_counter() - started, 4),
    }
    if predicted is not None:
        stats["estimate"] = {"entries": predicted.entries, "states": predicted.states}
    return stats


def check_size(spec: Spec, rules: Sequence[Rule], field_order: Sequence[str] | None,
               static: bool, max_entries: int) -> estimate.Estimate:
    """TooLarge if `rules` compile to more than `max_entries` entries, for compiles that do not
    go through compile_rules (`--changes`), found as compile_rules finds it: the estimate
    when it fits, else a trial build (`Trial`); returns the estimate."""
    with deep_recursion():
        items = _items(spec, rules)
        fields = order.choose(spec, sizing(c for c, _ in items), field_order, static)
        predicted = _estimate([c for c, _ in items], fields)
    if max_entries and predicted.entries > max_entries:
        with no_cyclic_gc():
            compile_rules(spec, rules, field_order, static=static, max_entries=max_entries)
    return predicted


def _without_state(rules: Sequence[Rule]) -> list[Rule]:
    """The rules with each stateful one as its pseudo-rules (stateless filters): what an
    explanation of the diagram's size reads."""
    out: list[Rule] = []
    for r in rules:
        out += stateful_mod.compile_rule(r, 0).pseudo if stateful_mod.stateful(r) else [r]
    return out


def _items(spec: Spec, rules: Sequence[Rule]) -> list:
    """The diagram's items of `rules`, stateful ones as their pseudo-rules."""
    if not spec.state_vars:
        return [(conj, r.ports) for r in rules for conj in normal_form(r.filter, r.line)]
    st = stateful_mod.State(spec)
    out = []
    for r in rules:
        if stateful_mod.stateful(r):
            out += stateful_mod.items(st.add(r))
        else:
            out += [(conj, r.ports) for conj in normal_form(r.filter, r.line)]
    return out


def _estimate(conjs: list, fields) -> estimate.Estimate:
    """`estimate.estimate` of the conjunctions, plus each wide filter's own diagram in this
    field order (`formula.own_size`): the estimate multiplies the intervals of every field a
    filter's atoms test, which for a formula whose residuals collapse is millions of
    entries where the diagram has dozens."""
    wide = [c for c in conjs if type(c) is Wide]
    if not wide:
        return estimate.estimate(conjs, fields)
    est = estimate.estimate([c for c in conjs if type(c) is not Wide], fields)
    for w in wide:
        states, entries = formula.own_size(w.filter, fields)
        est.entries += entries
        est.states += states
        est.splits += states
    return est


def _too_large(items, rules: Sequence[Rule], fields, max_entries: int,
               predicted: estimate.Estimate, counted: int | None = None,
               stopped: float | None | bool = False) -> TooLarge:
    """The refusal of `items` over `max_entries`, explained (`estimate.explain`). `counted`:
    the entries the build counted; all of them when `stopped` is False, else those a `Trial`
    had counted for sure when it stopped the build (`stopped`: the CPU seconds it stopped
    at, or None when the count passed the budget)."""
    names = " -> ".join(q.qname for q in fields)
    if counted is None:
        lead = None
    elif stopped is False:
        lead = (f"the rules compile to {counted:,} entries with the field order {names}, "
                f"more than the budget of {max_entries:,} entries (--max-entries).")
    elif stopped:
        lead = (f"the rules would compile to about {predicted.entries:,} entries by the "
                f"estimate with the field order {names}, more than the budget of "
                f"{max_entries:,} entries (--max-entries); {_trial_outcome(counted, stopped)}.")
    else:
        lead = (f"the rules compile to more than the budget of {max_entries:,} entries "
                f"(--max-entries) with the field order {names}: "
                f"{_trial_outcome(counted, None)} (the estimate: about "
                f"{predicted.entries:,}).")
    conjs, lines = [], []  # a wide filter's atoms each count as one (who uses a field)
    for r in _without_state(rules):
        for c in sizing(normal_form(r.filter, r.line)):
            conjs.append(c)
            lines.append(r.line)
    items_conjs = [c for c, _ in items]
    others = sorted((_estimate(items_conjs, e.order) for e in estimate.alternatives(
        [c for c in items_conjs if type(c) is not Wide], fields)), key=lambda e: e.entries)
    text = estimate.explain(predicted, max_entries, conjs, lines, others,
                            _alpha_that_fits(rules, fields, max_entries), lead)
    if not any(type(c) is Wide for c in items_conjs):  # lanes do not take wide filters
        split = lanes_mod.partition(items, lambda c: _order_like(fields, c),
                                    lanes_mod.AUTO_MAX_LANES)
        total = sum(lane.entries for lane in split)
        if len(split) > 1 and total < predicted.entries:
            text += (f" In lanes (--lanes auto: one diagram per group of rules testing the same "
                     f"fields, their decisions OR-ed) it would be about {total:,} entries in "
                     f"{len(split)} lanes" + (", within the budget." if total <= max_entries
                                             else "."))
    return TooLarge(text)


def _trial_outcome(counted: int, stopped: float | None) -> str:
    """What a `Trial` found when it stopped a build: at its CPU bound (`stopped` seconds), or
    (None) as soon as the entries counted for sure (`counted`) passed the budget."""
    if stopped:
        return (f"building them was stopped after {stopped:g} s of CPU time, "
                + (f"with {counted:,} entries counted for sure by then" if counted else
                   "before any entry was counted for sure")
                + " (the estimate is an upper bound, often far above the real count; "
                "--max-entries 0 builds to the end)")
    return f"building them was stopped once {counted:,} entries were counted for sure"


def _order_like(fields, conjunctions) -> list:
    """`fields` (one diagram's order) restricted to the fields `conjunctions` test."""
    tested = {q for c in conjunctions for q in c}
    return [q for q in fields if q in tested]


def _alpha_that_fits(rules: Sequence[Rule], fields, max_entries: int) -> estimate.Estimate | None:
    """The estimate under the smallest power-of-ten alpha (`compiler.approximate`, numeric
    bounds rounded to multiples of alpha) that fits the budget, with its alpha; None if
    none up to 10^6 does."""
    from compiler.approximate import approximate_rules

    if any(stateful_mod.stateful(r) for r in rules):
        return None  # --alpha takes no stateful rule (compiler.alpha_option)
    for alpha in (10, 100, 1000, 10_000, 100_000, 1_000_000):
        guess = _estimate([c for r in approximate_rules(list(rules), alpha)
                           for c in normal_form(r.filter, r.line)], fields)
        if guess.entries <= max_entries:
            guess.alpha = alpha
            return guess
    return None


def compile_text(spec_text: str, rules_text: str, field_order: Sequence[str] | None = None,
                 name: str = "app", static: bool = False, lanes: str | int = 1) -> Compiled:
    spec = parse_spec(spec_text, name=name)
    with no_cyclic_gc():
        rules = parse_rules(rules_text, spec)
    return compile_rules(spec, rules, field_order, static=static, lanes=lanes)


def compile_files(spec_path: str | Path, rules_path: str | Path,
                  field_order: Sequence[str] | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  static: bool = False) -> Compiled:
    spec = load_spec(spec_path)
    with no_cyclic_gc():
        rules = load_rules(rules_path, spec)
    return compile_rules(spec, rules, field_order, progress, static)


def match_kinds(spec: Spec, rules: Sequence[Rule]) -> dict[str, str]:
    """Exact where a field is declared exact or only full-width equalities touch it."""
    ranged: set[str] = set()
    todo: list[Filter] = []
    for r in rules:  # the usual `a and b` without the general walk
        f = r.filter
        if type(f) is And:
            for a in f.items:
                if type(a) is Atom:
                    if a.prefix_len is not None or a.op != "==" and a.op != "!=":
                        ranged.add(a.field.qname)
                else:
                    todo.append(a)
        else:
            todo.append(f)
    while todo:
        f = todo.pop()
        if isinstance(f, Atom):
            if f.prefix_len is not None or f.op != "==" and f.op != "!=":
                ranged.add(f.field.qname)
        elif isinstance(f, (And, Or)):
            todo.extend(f.items)
        elif isinstance(f, Not):
            todo.append(f.item)
    return {q.qname: "exact" if q.kind == "exact" or q.qname not in ranged else q.kind
            for q in spec.query_fields.values()}


def write_outputs(c: Compiled, out: str | Path) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pipeline.json").write_text(document.dumps(c.pipeline))
    with open(out / "entries.json", "w") as fh:
        c.write_entries(fh)
    (out / "stats.json").write_text(json.dumps(c.stats, indent=2) + "\n")
