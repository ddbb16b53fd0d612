"""The broker's entry budget: an approximated superset on the switch, exact filtering at the edge.

The switch holds at most `max_entries` table entries (`camus serve --max-entries`, by default
the compiler's budget). While the exact rules of every endpoint (one per view or group member,
`shim.subscriptions.rules_for`) compile within it, the switch holds them as they are. Once a
change takes the compiled entries over it, the rules are approximated (the paper's §IV-D,
`compiler.approximate`): numeric range bounds are rounded to multiples of an α chosen per
field from the size estimate (`compiler.fit_alpha`), which makes every filter a superset of
itself with fewer distinct cut points, so fewer entries. The switch then delivers to a view
every record its exact filter selects and some more; the data path re-checks each record a
view receives against the view's exact filter with the reference evaluator
(`compiler.semantics`) before it is stored, and drops and counts the false positives
(`DataPath.stats`, the metrics `camus_edge_*`), so a consumer never sees one. Group members'
ports are not re-checked: Fetch serves members from their topic's or view's log.

While approximating, a change that removes or replaces an endpoint estimates the exact
rules again (linear in the rules: about a second for 10,000 endpoints on a loaded machine) and
goes back to them once the estimate, an upper bound, so a conservative one, fits the budget.
Going to or back from the approximation, or changing α, rebuilds the compiler's state from
the rules and writes only the difference to the switch (`controller.diff`); each is logged.
Changes in between stay incremental: an endpoint's rule is approximated with the α in use
and handed to the incremental compiler like any other, and the entries are counted from its
writes (a change that takes them over the budget is undone and α re-fitted from the one in
use, then the state rebuilt).

A change whose new rules alone have enough conjunctions for the estimate to be close
(`TRUST_ESTIMATE_AT`) and are estimated over the budget is approximated at once, without
trying the exact compile that could blow up (the records are still delivered exactly: the
edge re-checks them). Smaller new rules estimated over the budget, whose estimate can be far
too large, are first compiled alone on a short trial (`compiler.compile.Trial`, TRIAL_SECONDS
of CPU here): approximated if that build passes the budget or its time, exact otherwise. A
view's CreateTopics waits for its compile, so no change may compile for long: a view whose
600 two-field clauses take 25 s to compile exactly into 29,309 entries is approximated
after the trial's second or two into 74 entries, and answered.

A filter too wide for disjunctive normal form (`compiler.formula`: an `and` of 20 `or`s), which
the incremental compiler refuses, is compiled by the compiler's formula path: while any
endpoint's rule is wide, every change compiles all the rules from scratch (`compile_rules`,
held as a `WholeCompile`) and writes the difference, as `controller.network` does for a switch
holding one; once no wide rule is left, the incremental compiler is rebuilt from the rules
(and the budget fitted again). Wide rules are held exact: the size estimate that fits α
works on normal forms, which a wide filter has none of, so a rule set holding one is not
approximated, and one over the budget stays over it, said in the log (the broker still
delivers exactly; `camus serve --max-entries` is then exceeded, not enforced).

Views with state (`Subscription.fed`: one rule per source partition) are never approximated:
a superset of a stateful filter is in scope for more records, which would update its
instances, and the edge could not re-check a filter whose truth depends on the switch's
registers. They are held exact whatever α is, and left out of the fitting of α. A change
that rebuilds the compiler (to or from an approximation, a wide rule) may place a rule's
instances elsewhere than before: `Held.lost` names the fed endpoints whose instances moved,
which the broker then feeds again from their start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from compiler.approximate import approximate_rules
from compiler.ast import Filter, Rule, rule_state
from compiler.compile import TooLarge, compile_rules
from compiler.estimate import estimate
from compiler.formula import wide
from compiler.fit_alpha import alpha_to_fit, size
from compiler.incremental import Incremental
from compiler.normalize import dnf
from compiler.rules import deep_recursion
from compiler.semantics import holds
from compiler.spec import Spec
from controller.diff import Changes, diff
from shim.protocol.records import Record
from shim.schema import SLOTS
from shim.subscriptions import Subscription, published_of, rules_of

log = logging.getLogger("camus.datapath")

SLOT_NAMES = [f"kafka.slot{i}" for i in range(SLOTS)]
# A fit whose real entries still pass the budget is asked again with the budget scaled down
# by how far over it came, at most this many times.
REFITS = 3
# The CPU time a change's new rules, estimated over the budget, may take to compile alone
# exactly before they are approximated instead (`_too_large`).
TRIAL_SECONDS = 2.0
# From this many conjunctions in a change's new rules, an estimate over the budget is trusted
# enough to approximate at once (approximating loses no record, unlike `camus compile`
# refusing, which builds on trial instead).
TRUST_ESTIMATE_AT = 10_000


@dataclass(frozen=True)
class Held:
    """What the compiler holds after a change: α ({} when exact) and the endpoints whose rule
    on the switch is a strict superset of their exact rule, with their exact filters."""

    alpha: Mapping[str, int]
    recheck: Mapping[int, Filter]
    entries: int
    lost: frozenset[int] = frozenset()  # fed endpoints whose instances the change moved


class WholeCompile:
    """Rules compiled from scratch (`compile_rules`), in place of the incremental compiler
    while a rule too wide for it is held: the same `entries()`, `stats()` and `pipeline`."""

    def __init__(self, spec: Spec, rules: list[Rule]) -> None:
        self.compiled = compile_rules(spec, rules, static=True)
        self.pipeline = self.compiled.pipeline

    def entries(self) -> dict:
        return self.compiled.entries

    def stats(self) -> dict:
        return self.compiled.stats


Compiler = Incremental | WholeCompile


class Budget:
    """The endpoints' exact rules and the (possibly approximated) rules the compiler holds.
    Used on one thread at a time (the compile worker), like the compiler."""

    def __init__(self, spec: Spec, max_entries: int) -> None:
        self.spec, self.max_entries = spec, max_entries
        self.exact: dict[int, tuple[Rule, ...]] = {}  # endpoint -> its exact rules
        self.held: dict[int, tuple[Rule, ...]] = {}  # endpoint -> the rules the compiler holds
        self.filters: dict[int, Filter] = {}  # endpoint -> its exact filter (for the edge)
        # endpoint -> what it wants of records entering anywhere (`published_of`)
        self.published: dict[int, tuple[Rule, ...]] = {}
        self.alpha: dict[str, int] = {}
        self.count = 0  # the entries the compiler holds
        self._said_over = False  # the warning that nothing brings them under the budget
        self._fields = Incremental(spec, [], static=True).fields  # static: the spec's order

    def change(self, compiler: Compiler, subs: Mapping[int, Subscription | None]
               ) -> tuple[Compiler, Changes, Held]:
        """Apply the changed endpoints `subs` (None: gone): the compiler that holds them
        (`compiler`, changed in place, or a new one), the writes that take the switch from
        what `compiler` held to it, and what it holds. On an exception, `compiler` may be
        half changed and this object is unchanged: rebuild with `rebuild`."""
        now = [s for s in subs.values() if s is not None]
        exact = dict(self.exact)
        for p in subs:
            exact.pop(p, None)
        exact.update((s.port, rules_of(self.spec, s)) for s in now)
        if any(wide(r.filter) for r in _all(exact)):
            return self._whole(compiler, exact, subs)
        old_doc = None
        alpha = self.alpha
        if isinstance(compiler, WholeCompile):  # the last wide rule went: incremental again
            old_doc, alpha = compiler.entries(), {}
        if self.max_entries:
            if alpha and any(p in self.exact for p in subs) \
                    and size(_all(exact), self._fields).entries <= self.max_entries:
                alpha = {}  # an endpoint went or changed, and the exact rules fit again
            elif not alpha and now and self._too_large(
                    [r for s in now for r in exact[s.port] if not rule_state(r)]):
                alpha = self._fit(exact, {})
        if old_doc is None and alpha == self.alpha:
            held = {p: self._approximated(exact[p], alpha) for p in subs if p in exact}
            # An endpoint's rules that stay as they were are left alone: a fed view's rule
            # for a partition keeps its instances while rules for others come or go.
            added, removed = [], []
            for p in subs:
                old, new = self.held.get(p, ()), held.get(p, ())
                added += [r for r in new if r not in old]
                removed += [r for r in old if r not in new]
            step = compiler.change(added, removed)
            changes: Changes = step
            # Counted from the writes: counting the compiler's entries costs a walk of them all.
            count = self.count + len(step.insert) - len(step.delete)
            refit = alpha
            if self.max_entries and count > self.max_entries:
                refit = self._fit(exact, alpha)
                if refit == alpha:  # nothing rounds further: keep the change, over budget
                    self._over(count, alpha)
            if refit == alpha:
                self._keep(exact, alpha, {**{p: r for p, r in self.held.items() if p not in subs},
                                          **held}, count)
                return compiler, changes, self._state(subs, count)
            # Over budget: undo the change, so that the writes are counted from what the
            # target holds, and approximate (further) from there.
            compiler.change(removed, added)
            old_doc = compiler.entries()
            alpha = refit
        if old_doc is None:
            old_doc = compiler.entries()
        new, count, alpha = self._build(exact, alpha)
        self._keep(exact, alpha, {p: self._approximated(r, alpha) for p, r in exact.items()},
                   count)
        new_doc = new.entries()
        return new, _diff(old_doc, new_doc, new), self._state(subs, count,
                                                              moved(old_doc, new_doc, exact))

    def rebuild(self) -> Compiler:
        """A compiler holding what this object says it holds (after a failed change)."""
        rules = list(_all(self.held))
        compiler: Compiler
        if any(wide(r.filter) for r in rules):
            compiler = WholeCompile(self.spec, rules)
        else:
            compiler = Incremental(self.spec, rules, static=True)
        self.count = _entries(compiler)
        return compiler

    def _whole(self, compiler: Compiler, exact: dict[int, tuple[Rule, ...]],
               subs: Mapping[int, Subscription | None]
               ) -> tuple[WholeCompile, Changes, Held]:
        """`exact` holding a wide rule: compiled whole and exact (see the module text)."""
        new = WholeCompile(self.spec, list(_all(exact)))
        count = _entries(new)
        if self.max_entries and count > self.max_entries and not self._said_over:
            self._said_over = True
            log.warning("the subscriptions hold a filter too wide for normal form and compile "
                        "to %d entries, more than the budget of %d (--max-entries): such rule "
                        "sets are held exact, not approximated", count, self.max_entries)
        old_doc, new_doc = compiler.entries(), new.entries()
        changes = _diff(old_doc, new_doc, new)
        self._keep(exact, {}, dict(exact), count)
        return new, changes, self._state(subs, count, moved(old_doc, new_doc, exact))

    def _too_large(self, rules: list[Rule]) -> bool:
        """Whether `rules` alone do not fit the budget, so neither does any rule set holding
        them, and their exact form is not handed to the incremental compiler: estimated over
        it with enough conjunctions for the estimate to be trusted (`TRUST_ESTIMATE_AT`), or
        estimated over it and, compiled alone, over it or past TRIAL_SECONDS of CPU."""
        conjunctions = [c for r in rules for c in dnf(r.filter, r.line)]
        if estimate(conjunctions, self._fields).entries <= self.max_entries:
            return False
        if len(conjunctions) >= TRUST_ESTIMATE_AT:
            return True
        try:
            compile_rules(self.spec, rules, static=True, max_entries=self.max_entries,
                          trial_seconds=TRIAL_SECONDS)
        except TooLarge:
            return True
        return False

    def _fit(self, exact: dict[int, tuple[Rule, ...]], start: Mapping[str, int],
             budget: int | None = None) -> dict[str, int]:
        # Rules with state are held exact: they have no α to fit.
        return alpha_to_fit([r for r in _all(exact) if not rule_state(r)], self._fields,
                            budget or self.max_entries, start).alpha

    def _build(self, exact: dict[int, tuple[Rule, ...]], alpha: dict[str, int]
               ) -> tuple[Incremental, int, dict[str, int]]:
        """A compiler for `exact` under `alpha`, refitted while its real entries pass the
        budget (the estimate seldom errs low, but may)."""
        budget = self.max_entries
        for _ in range(REFITS + 1):
            new = Incremental(self.spec, [r for rs in exact.values()
                                          for r in self._approximated(rs, alpha)], static=True)
            count = _entries(new)
            if not self.max_entries or count <= self.max_entries:
                break
            budget = max(1, budget * self.max_entries // count)
            refit = self._fit(exact, alpha, budget)
            if refit == alpha:
                break  # nothing left to round
            alpha = refit
        if self.max_entries and count > self.max_entries:
            self._over(count, alpha)
        return new, count, alpha

    def _over(self, count: int, alpha: Mapping[str, int]) -> None:
        """Over the budget with nothing left to round: said once until back under it."""
        if not self._said_over:
            self._said_over = True
            log.warning("the subscriptions compile to %d entries with alpha %s, more than the "
                        "budget of %d (--max-entries): no rounding of their numeric bounds "
                        "brings them under", count, format_alpha(alpha), self.max_entries)

    def _approximated(self, rules: tuple[Rule, ...], alpha: Mapping[str, int]
                      ) -> tuple[Rule, ...]:
        """An endpoint's rules under α; rules with state as they are."""
        if not alpha:
            return rules
        return tuple(r if rule_state(r) else approximate_rules([r], alpha)[0] for r in rules)

    def _keep(self, exact: dict[int, tuple[Rule, ...]], alpha: dict[str, int],
              held: dict[int, tuple[Rule, ...]], count: int) -> None:
        self.exact, self.alpha, self.held, self.count = exact, alpha, held, count
        if not self.max_entries or count <= self.max_entries:
            self._said_over = False

    def _state(self, subs: Mapping[int, Subscription | None], count: int,
               lost: frozenset[int] = frozenset()) -> Held:
        for p, s in subs.items():
            if s is None:
                self.filters.pop(p, None)
                self.published.pop(p, None)
            else:
                self.filters[p] = s.filter
                self.published[p] = published_of(self.spec, s)
        recheck = {p: self.filters[p] for p, r in self.held.items()
                   if self.alpha and r != self.exact[p]}
        return Held(dict(self.alpha), recheck, count, lost)


def _all(by_endpoint: Mapping[int, tuple[Rule, ...]]) -> list[Rule]:
    return [r for rules in by_endpoint.values() for r in rules]


def _entries(compiler: Compiler) -> int:
    return compiler.stats()["entries"]["total"]


def _diff(old_doc: dict, new_doc: dict, new: Compiler) -> Changes:
    """`diff` of two documents, with the resets a whole document needs (docs/pipeline-ir.md,
    "Resets"): every instance range of `new_doc` that `old_doc` does not have for the same
    rule (text and line) at the same place is zeroed, so a rule's instances start empty."""
    changes = diff(old_doc, new_doc)
    kept = {(i["rule"], i["line"], i["application"], i["state"], i["bank"], i["base"])
            for i in old_doc.get("state_instances", ())}
    registers = {(app.name, v.name, b): r for app in new.pipeline.applications if app.state
                 for v in app.state.vars for b, r in enumerate(v.registers)}
    changes.reset_cells = [
        (registers[(i["application"], i["state"], i["bank"])], i["base"], i["buckets"])
        for i in new_doc.get("state_instances", ())
        if (i["rule"], i["line"], i["application"], i["state"], i["bank"], i["base"]) not in kept]
    return changes


def moved(old_doc: dict, new_doc: dict, exact: Mapping[int, tuple[Rule, ...]]) -> frozenset[int]:
    """The endpoints with a rule whose instances are not where they were: ranges of
    entries.json's `state_instances` (docs/pipeline-ir.md, "State"), known by the rule's
    text and line, that differ between the documents (a rule new in `new_doc` has no old
    instances to lose)."""
    def ranges(doc: dict) -> dict[tuple[str, int], set]:
        out: dict[tuple[str, int], set] = {}
        for i in doc.get("state_instances", ()):
            out.setdefault((i["rule"], i["line"]), set()).add(
                (i["application"], i["state"], i["bank"], i["base"], i["buckets"]))
        return out

    before, after = ranges(old_doc), ranges(new_doc)
    if not before:
        return frozenset()
    return frozenset(p for p, rules in exact.items()
                     if any((r.text, r.line) in before
                            and before[(r.text, r.line)] != after.get((r.text, r.line))
                            for r in rules))


def format_alpha(alpha: Mapping[str, int]) -> str:
    return ",".join(f"{f}={a}" for f, a in sorted(alpha.items())) or "none"


def recheck(slots: Mapping[int, tuple[int, ...]], records: list[tuple[int, Record]],
            f: Filter, values: dict[int, dict[str, int]]) -> list[tuple[int, Record]]:
    """The records (offset, record) whose slot values (`slots`, by offset: what the switch
    matched on, read with the topic's schema) pass the exact filter `f`, as the reference
    evaluator decides; `values` caches each offset's field values across views."""
    kept = []
    with deep_recursion():  # a filter may nest MAX_NESTING parentheses deep
        for item in records:
            offset = item[0]
            v = values.get(offset)
            if v is None:
                v = values[offset] = dict(zip(SLOT_NAMES, slots[offset]))
            if holds(f, v):
                kept.append(item)
    return kept
