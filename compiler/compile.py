"""The compiler as one call: spec + rules -> diagram -> pipeline IR, entries and stats."""

from __future__ import annotations

import contextlib
import gc
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compiler import diagram, estimate, lowering, order, tables
from compiler.ast import And, Atom, Filter, Not, Or, Rule
from compiler.errors import CamusError
from compiler.normalize import dnf
from compiler.rules import deep_recursion, load_rules, parse_rules
from compiler.spec import Spec, load_spec, parse_spec
from pipeline import document, entries as entries_json, interpreter
from pipeline.model import MAX_PORTS_WIDTH, Application, Pipeline, Stage


@dataclass
class Compiled:
    spec: Spec
    rules: list[Rule]
    diagram: diagram.Diagram
    stages: list[Stage]
    pipeline: Pipeline
    entries: dict  # entries.json
    stats: dict = field(default_factory=dict)

    @property
    def application(self) -> Application:
        return self.pipeline.applications[0]

    def tables(self) -> interpreter.Tables:
        """The compiled entries loaded into the pipeline's tables (what `camus eval` runs)."""
        return interpreter.load(self.pipeline, self.entries)


class TooLarge(CamusError):
    """The estimated size is over the budget: refused before the expensive phases."""


def compile_rules(spec: Spec, rules: Sequence[Rule], field_order: Sequence[str] | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  static: bool = False, max_entries: int | None = None,
                  on_estimate: Callable[[estimate.Estimate], None] | None = None) -> Compiled:
    """Tables for `rules`. With `static`, the pipeline (stages, match kinds) depends on the
    spec alone: every query field gets a stage with its declared match kind, so any rule set
    compiles to entries for one and the same pipeline.

    With `max_entries` (or `on_estimate`), the size is estimated first (`compiler.estimate`,
    linear in the rules); an estimate over `max_entries` raises TooLarge, whose message says
    which fields and rules drive the size and what would bring it under. `on_estimate` is
    given the estimate (a progress bar takes its states as its total)."""
    with no_cyclic_gc(), deep_recursion():
        return _compile_rules(spec, rules, field_order, progress, static, max_entries, on_estimate)


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
                   on_estimate: Callable[[estimate.Estimate], None] | None = None) -> Compiled:
    started = time.perf_counter()
    items = []
    append = items.append
    for rule in rules:
        ports = rule.ports
        for conj in dnf(rule.filter, rule.line):
            append((conj, ports))
    fields = order.choose(spec, (c for c, _ in items), field_order, static)
    predicted = None
    if max_entries or on_estimate:
        predicted = _check_size(items, rules, fields, max_entries)
        if on_estimate:
            on_estimate(predicted)
    kinds = {q.qname: q.kind for q in fields} if static else match_kinds(spec, rules)
    stages = lowering.stages_for(spec, fields, kinds)
    d = diagram.build(items, fields, progress)
    reachable = d.reachable()
    app = lowering.application(spec, stages)
    state_width = tables.state_bits(len(reachable), static)
    entries, groups = tables.emit(d, stages, app.leaf_table, reachable, app.multicast_group,
                                  state_width)
    ports_width = MAX_PORTS_WIDTH
    if not static:  # a static pipeline has a bit for every port; else up to the highest used
        ports_width = 1 + max((r["port"] for g in groups for r in g["replicas"]), default=0)
    pipeline = lowering.pipeline([app], state_width, ports_width)
    entries_doc = {"camus_entries": entries_json.ENTRIES_VERSION, "table_entries": entries,
                   "multicast_groups": groups}
    per_table: dict[str, int] = {}
    for e in entries:
        per_table[e["table"]] = per_table.get(e["table"], 0) + 1
    stats = {
        "rules": len(rules),
        "conjunctions": len(items),
        "fields": [s.field.name for s in stages],
        "entries": {"total": len(entries), "per_table": per_table},
        "states": len(reachable),
        "state_width": state_width,
        "multicast_groups": len(groups),
        "compile_seconds": round(time.perf_counter() - started, 4),
    }
    if predicted is not None:
        stats["estimate"] = {"entries": predicted.entries, "states": predicted.states}
    return Compiled(spec, list(rules), d, stages, pipeline, entries_doc, stats)


def check_size(spec: Spec, rules: Sequence[Rule], field_order: Sequence[str] | None,
               static: bool, max_entries: int) -> estimate.Estimate:
    """The estimate `compile_rules` makes before compiling `rules`; TooLarge if it is over
    `max_entries` (for compiles that do not go through compile_rules: `--changes`)."""
    with deep_recursion():
        items = [(conj, r.ports) for r in rules for conj in dnf(r.filter, r.line)]
        fields = order.choose(spec, (c for c, _ in items), field_order, static)
        return _check_size(items, rules, fields, max_entries)


def _check_size(items, rules: Sequence[Rule], fields, max_entries: int | None) -> estimate.Estimate:
    conjunctions = [c for c, _ in items]
    predicted = estimate.estimate(conjunctions, fields)
    if max_entries and predicted.entries > max_entries:
        lines = [r.line for r in rules for _ in dnf(r.filter, r.line)]  # as `items` lists them
        others = estimate.alternatives(conjunctions, fields)
        raise TooLarge(estimate.explain(predicted, max_entries, conjunctions, lines, others,
                                        _alpha_that_fits(rules, fields, max_entries)))
    return predicted


def _alpha_that_fits(rules: Sequence[Rule], fields, max_entries: int) -> estimate.Estimate | None:
    """The estimate under the smallest power-of-ten alpha (`compiler.approximate`, numeric
    bounds rounded to multiples of alpha) that fits the budget, with its alpha; None if
    none up to 10^6 does."""
    from compiler.approximate import approximate_rules

    for alpha in (10, 100, 1000, 10_000, 100_000, 1_000_000):
        approx = [c for r in approximate_rules(list(rules), alpha) for c in dnf(r.filter, r.line)]
        guess = estimate.estimate(approx, fields)
        if guess.entries <= max_entries:
            guess.alpha = alpha
            return guess
    return None


def compile_text(spec_text: str, rules_text: str, field_order: Sequence[str] | None = None,
                 name: str = "app", static: bool = False) -> Compiled:
    spec = parse_spec(spec_text, name=name)
    with no_cyclic_gc():
        rules = parse_rules(rules_text, spec)
    return compile_rules(spec, rules, field_order, static=static)


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
        entries_json.write(c.entries, fh)
    (out / "stats.json").write_text(json.dumps(c.stats, indent=2) + "\n")
