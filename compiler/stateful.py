"""Stateful rules compiled to the state stages of docs/pipeline-ir.md ("State").

Theory of operation. A stateful rule R reads or updates states s1..sm. The predicates of R
on a state s cut s's value line at their thresholds, the *boundaries* of (R, s): a value
satisfies a boundary (t, strict) when it is >= t (strict: > t), and the number of
boundaries it satisfies is its *region* (boundaries ascend, so satisfied ones form a
prefix). Every predicate of R on s has one truth value per region. A *combination* c picks a
region for each of R's states; R's filter with each state predicate replaced by its truth
in c is a stateless filter R_c. So R fires on a message exactly when R_c holds for the
combination its instances are in, and whether a message is in R's scope is the stateless
scope filter (docs/stateful.md, "Scope").

The stateless filters R_c and R's scope go into the one decision diagram as pseudo-rules
whose "ports" are *markers* (integers from MARKER_BASE up, one per rule instance and
combination, and one for its scope; equal filters are one pseudo-rule with all their
markers): the diagram decides them with the stateless rules, and
a leaf's port set then says, besides the stateless ports, for each stateful rule whether
the message is in scope and for which combinations the rule fires. A leaf that needs state
(a rule that is in scope with state to update, or that fires for some combination) is a
*context*: the leaf's decision is `stateful(ctx)`, and the context's entries bind each such
rule's instances (one bank per state) and list, per combination of the bound banks'
regions, the ports and updates (the decide table).

Allocation. Each stateful rule's instances of a state get a bank and a unit of `buckets`
cells when the rule is added, and keep them until it is removed: rules sharing a context
take different banks of a state (the lowest free one), units are the lowest free. A rule set
that needs more banks than declared is refused naming the rules; one over its slots is
refused by `compiler.state.check_slots` first. Because the bank and unit depend on what was
allocated before, an incrementally changed rule set may hold its instances elsewhere than a
from-scratch compile of the same rules would; the stateless tables are the same.

Speed (bench/stateful_compile.py). Nearly every leaf where a stateful rule is in scope is
a context of its own (its stateless ports differ from its neighbours'), so the work per
context is kept to what differs between contexts: its ports' bitmap and its entries'
dicts. What depends only on the bound rules (`Context.bound`: bind parameters, each
combination's regions key, fired ports and updates) is planned once per bound set and per
rule (`State._plan`, `State._part`); a leaf's bound set is found from its markers once
(`State._bound`); a rule of the usual shape is compiled from the shape of its state
predicates, once per shape (`_compile_flat`). These memos live as long as the `State`
(one compile, or an incremental compiler's life): plans and parts naming a removed rule
go with it, and every memo starts again past MEMO_LIMIT entries.
"""

from __future__ import annotations

import functools
import itertools
import operator
from dataclasses import dataclass, field

from compiler.ast import (And, Atom, Const, Filter, Not, Or, Rule, StateAtom, rule_state,
                          state_atoms)
from compiler.diagram import port_list
from compiler.errors import StateError
from compiler.formula import conjunctions
from compiler.spec import COUNT_BITS, Spec, StateVar
from compiler.state import NAMED_RULES
from compiler.tables import bitmap
from pipeline.model import CTX_WIDTH, MAX_BOUNDARIES, REGION_WIDTH

MAX_COMBINATIONS = 64  # region combinations of one rule's states
MAX_DECIDE_ENTRIES = 4096  # decide entries of one context (combinations of its banks)
# Markers are diagram "ports" far above any real port (ports are 9 bits); each rule instance
# has a block of STRIDE: one per combination, then its scope.
MARKER_BASE = 1 << 20
STRIDE = MAX_COMBINATIONS + 1
SCOPE = MAX_COMBINATIONS
N_MAX = (1 << COUNT_BITS) - 1
MEMO_LIMIT = 1 << 16  # entries a memo of `State` keeps at most (then it starts again)
Boundary = tuple[int, int]  # (threshold, strict)


def is_marker(p: int) -> bool:
    return p >= MARKER_BASE


def marker(serial: int, j: int) -> int:
    return MARKER_BASE + serial * STRIDE + j


def stateful(rule: Rule) -> bool:
    if rule.updates:
        return True
    f = rule.filter
    # The common stateless rule, an `and` of field predicates (or one), without the walk.
    if type(f) is Atom or (type(f) is And and set(map(type, f.items)) == _ATOMS):
        return False
    return bool(state_atoms(f))


_ATOMS = {Atom}
_FLAT = {Atom, StateAtom}


def _where(rule: Rule) -> str:
    return f"line {rule.line}: {rule.text or '?'}"


def _named(rules: list[Rule]) -> str:
    text = "; ".join(_where(r) for r in rules[:NAMED_RULES])
    return text + (f"; and {len(rules) - NAMED_RULES} more" if len(rules) > NAMED_RULES else "")


# ---- boundaries, regions and combinations of one rule ------------------------------------


def _threshold_atoms(a: StateAtom) -> list[Boundary]:
    """The boundaries at which predicate `a`'s truth may change, before pruning."""
    var, op, x = a.state, a.op, a.value
    if var.kind == "average":  # the value s/n (0 when n = 0) against x
        at = {">=": [(x, 0)], "<": [(x, 0)], ">": [(x, 1)], "<=": [(x, 1)]}
        return at.get(op, [(x, 0), (x, 1)])
    if var.kind == "counter":
        lo, gt = x, x + 1  # n >= x, n > x
    else:  # meter: n * 10^6 OP x * W, a threshold on n
        q = x * var.window_us
        lo, gt = -(-q // 1_000_000), q // 1_000_000 + 1
    at = {">=": [lo], "<": [lo], ">": [gt], "<=": [gt]}
    return [(t, 0) for t in at.get(op, [lo, gt])]


def _keeps(var: StateVar, b: Boundary) -> bool:
    """Whether a boundary can be both satisfied and not: others are dropped (their
    predicates' truth is the same in every region)."""
    t, strict = b
    if var.kind == "average":  # values 0 .. the field's maximum
        top = (1 << var.field_width) - 1
        return (0 < t <= top) if not strict else t < top
    return 0 < t <= N_MAX  # n in 0 .. 2^32 - 1, non-strict only


def _value(var: StateVar, bounds: list[Boundary], r: int) -> tuple[int, int]:
    """A value in region r as a fraction (numerator, denominator): n for counters and
    meters (denominator 1), the average s/n else (denominator 1 or 2: halfway between two
    thresholds' integers is enough, thresholds being integers)."""
    if var.kind != "average":
        return (bounds[r - 1][0] if r else 0), 1
    if r == 0:
        if not bounds:
            return 0, 1  # one region: every value (the predicates are constant)
        t, strict = bounds[0]
        return (t, 1) if strict else (2 * t - 1, 2)
    t, strict = bounds[r - 1]
    return (2 * t + 1, 2) if strict else (t, 1)


_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


def _truth(a: StateAtom, v: tuple[int, int]) -> bool:
    """Predicate `a` on the value `v` (a fraction num/den, den > 0), exactly in integers."""
    num, den = v
    if a.state.kind == "meter":  # n * 10^6 OP x * W
        lhs, rhs = num * 1_000_000, a.value * a.state.window_us * den
    else:
        lhs, rhs = num, a.value * den
    return _COMPARE[a.op](lhs, rhs)


def _substitute(f: Filter, truth) -> Filter:
    """`f` with each state predicate replaced by `truth(atom)` (a bool), folded; with
    `truth` None, only folded (constants absorbed, state predicates kept)."""
    if isinstance(f, StateAtom):
        return f if truth is None else Const(truth(f))
    if isinstance(f, (And, Or)):
        items = [_substitute(i, truth) for i in f.items]
        absorbing = isinstance(f, Or)
        if any(type(i) is Const and i.value is absorbing for i in items):
            return Const(absorbing)
        items = [i for i in items if type(i) is not Const]
        if not items:
            return Const(not absorbing)
        return items[0] if len(items) == 1 else type(f)(tuple(items))
    if isinstance(f, Not):
        inner = _substitute(f.item, truth)
        return Const(not inner.value) if type(inner) is Const else Not(inner)
    return f


def _scope(f: Filter, positive: bool = True) -> Filter:
    """The scope filter: state predicates true under an even number of `not`s, false under
    an odd number (docs/stateful.md, "Scope")."""
    if isinstance(f, StateAtom):
        return Const(positive)
    if isinstance(f, (And, Or)):
        return _substitute(type(f)(tuple(_scope(i, positive) for i in f.items)), None)
    if isinstance(f, Not):
        return _substitute(Not(_scope(f.item, not positive)), None)
    return f


@dataclass
class RuleState:
    """A stateful rule compiled: its states (rule_state order) with their boundaries, its
    combinations, and where its instances live once allocated."""

    rule: Rule
    serial: int
    vars: list[StateVar]
    bounds: list[list[Boundary]]
    scoped: frozenset[StateVar]
    updates: frozenset[StateVar]
    combinations: int
    pseudo: list[Rule]  # R_c per combination that can hold, and the scope: marker ports
    banks: dict[StateVar, int] = field(default_factory=dict)
    units: dict[StateVar, int] = field(default_factory=dict)

    def regions(self, c: int) -> list[int]:
        """Combination c as each state's region (mixed radix, first state lowest)."""
        out = []
        for b in self.bounds:
            c, r = divmod(c, len(b) + 1)
            out.append(r)
        return out

    def combination(self, regions: list[int]) -> int:
        c, scale = 0, 1
        for r, b in zip(regions, self.bounds):
            c += r * scale
            scale *= len(b) + 1
        return c


def compile_rule(rule: Rule, serial: int, shapes: dict | None = None) -> RuleState:
    """The boundaries, combinations and pseudo-rules of one stateful rule; StateError (at
    the rule's line) when it has too many boundaries on a state or too many combinations.
    `shapes`: a memo for one spec's rules (`State` keeps it), see `_flat_shape`."""
    if flat(rule.filter):
        return _compile_flat(rule, serial, {} if shapes is None else shapes)
    return _compile_any(rule, serial)


def flat(f: Filter) -> bool:
    """Whether `f` is an `and` of field and state predicates, or one predicate."""
    return type(f) in _FLAT or (type(f) is And and set(map(type, f.items)) <= _FLAT)


def _compile_any(rule: Rule, serial: int) -> RuleState:
    """`compile_rule` for any filter: each combination's filter by substitution."""
    f = rule.filter
    vars_ = rule_state(rule)  # every state the rule names keeps its instance, read or not
    # Predicates that a constant decides (`true or c > 5`) cut no region.
    bounds, combos = _regions(rule, vars_, state_atoms(_substitute(f, None)))
    scoped = frozenset(v for v in vars_ if v not in rule.updates)
    rs = RuleState(rule, serial, vars_, bounds, scoped, frozenset(rule.updates), combos, [])
    index = {v: i for i, v in enumerate(vars_)}
    markers: dict[Filter, list[int]] = {}  # filter -> its markers, in first-seen order
    for c in range(combos):
        regions = rs.regions(c)
        values = [_value(v, b, r) for v, b, r in zip(vars_, bounds, regions)]
        g = _substitute(f, lambda a: _truth(a, values[index[a.state]]))
        _pseudo(markers, g, marker(serial, c))
    if scoped:  # the scope matters only for state updated by every packet in scope
        _pseudo(markers, _scope(f), marker(serial, SCOPE))
    # Combinations (and the scope) with equal filters are one pseudo-rule holding all their
    # markers: `stock == S and avg(price) > N` fires in its upper region and is in scope on
    # the same filter, `stock == S`; one item for the diagram instead of two, same leaves.
    rs.pseudo = [Rule(g, frozenset(ms), rule.line, rule.text) for g, ms in markers.items()]
    return rs


def _regions(rule: Rule, vars_: list[StateVar], atoms: list[StateAtom]
             ) -> tuple[list[list[Boundary]], int]:
    """Each state's boundaries (from the rule's state predicates `atoms`) and the number of
    combinations of their regions; StateError past the limits."""
    bounds = []
    for var in vars_:
        found = {b for a in atoms if a.state is var for b in _threshold_atoms(a)}
        kept = sorted(b for b in found if _keeps(var, b))
        if len(kept) > MAX_BOUNDARIES:
            raise StateError(f"the rule's predicates on {var.read_as} cut it at {len(kept)} "
                             f"thresholds; a state stage compares with at most "
                             f"{MAX_BOUNDARIES} per rule and state: split the rule "
                             f"({_where(rule)})", rule.line or None, 1)
        bounds.append(kept)
    combos = 1
    for b in bounds:
        combos *= len(b) + 1
    if combos > MAX_COMBINATIONS:
        raise StateError(f"the rule's state predicates make {combos} combinations of regions "
                         f"of its states; at most {MAX_COMBINATIONS} compile: split the rule "
                         f"({_where(rule)})", rule.line or None, 1)
    return bounds, combos


def _compile_flat(rule: Rule, serial: int, shapes: dict) -> RuleState:
    """`compile_rule` for the common shape, an `and` of predicates (or one predicate): R_c is its field predicates where every state predicate holds in c and
    false elsewhere, and its scope is its field predicates too (what `_substitute` and
    `_scope` give). Everything but the field predicates and the serial depends only on the
    state predicates and the update actions (`orders < 100` with `count(orders)`, say),
    which many rules share: that is worked out once per spec (`shapes`)."""
    f = rule.filter
    items = f.items if type(f) is And else (f,)
    tests = tuple(i for i in items if type(i) is StateAtom)
    key = (tests, rule.updates)
    shape = shapes.get(key)
    if shape is None:
        vars_ = rule_state(rule)  # a function of `key`: the field predicates name no state
        bounds, combos = _regions(rule, vars_, list(tests))
        index = {v: i for i, v in enumerate(vars_)}
        at = [(a, index[a.state]) for a in tests]
        values = [[_value(v, b, r) for r in range(len(b) + 1)] for v, b in zip(vars_, bounds)]
        probe = RuleState(rule, 0, vars_, bounds, frozenset(), frozenset(), combos, [])
        fires = [c for c in range(combos)
                 if all(_truth(a, values[i][probe.regions(c)[i]]) for a, i in at)]
        scoped = frozenset(v for v in vars_ if v not in rule.updates)
        if len(shapes) >= MEMO_LIMIT:
            shapes.clear()
        shape = shapes[key] = (vars_, bounds, combos, fires, scoped, frozenset(rule.updates))
    vars_, bounds, combos, fires, scoped, updates = shape
    markers = [marker(serial, c) for c in fires]
    if scoped:  # the scope matters only for state updated by every packet in scope
        markers.append(marker(serial, SCOPE))
    pseudo = []
    if markers:  # the combinations that fire and the scope share one filter: one pseudo-rule
        plain = [i for i in items if type(i) is Atom]
        g = Const(True) if not plain else plain[0] if len(plain) == 1 else And(tuple(plain))
        pseudo.append(Rule(g, frozenset(markers), rule.line, rule.text))
    return RuleState(rule, serial, vars_, bounds, scoped, updates, combos, pseudo)


def _pseudo(out: dict, f: Filter, m: int) -> None:
    if type(f) is Const and not f.value:
        return  # never holds: nothing for the diagram to decide
    out.setdefault(f, []).append(m)


def items(rs: RuleState) -> list:
    """The diagram's items (conjunction or wide filter, ports) of a rule's pseudo-rules."""
    return [(conj, p.ports) for p in rs.pseudo for conj in conjunctions(p.filter, p.line)]


# ---- contexts ----------------------------------------------------------------------------


class Context:
    """What a context holds: the stateless ports, and per bound rule (by serial) the
    combinations for which it fires. Immutable; equal by both. Its hash is kept: a context
    is a dict key at every step of its leaves' emission, and hashing `bound` (a tuple of
    tuples) each time was a tenth of it."""

    __slots__ = ("ports", "bound", "_hash")

    def __init__(self, ports: frozenset[int], bound: tuple[tuple[int, frozenset[int]], ...]):
        self.ports, self.bound = ports, bound
        self._hash = hash((ports, bound))

    def __eq__(self, other) -> bool:
        return (type(other) is Context and self._hash == other._hash
                and self.ports == other.ports and self.bound == other.bound)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Context(ports={set(self.ports) or '{}'}, bound={self.bound})"

    def text(self, ports_text: str | None = None) -> str:
        """The canonical text its id is hashed from; `ports_text`, if known, is
        `port_list(self.ports)`."""
        if ports_text is None:
            ports_text = port_list(self.ports)
        return f"{ports_text}|{_bound_text(self.bound)}"


@functools.lru_cache(maxsize=1 << 16)  # contexts mostly share their bound rules
def _bound_text(bound: tuple) -> str:
    return ";".join(f"{s}:{','.join(map(str, sorted(c)))}" for s, c in bound)


class State:
    """An application's stateful rules: their pseudo-rules, allocation and contexts; the
    state tables' entries. One per compile (from scratch) or per incremental compiler."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self.vars = list(spec.state_vars.values())
        self.banks = spec.banks
        self.rules: dict[int, RuleState] = {}
        self.next_serial = 0
        self.free_units: dict[StateVar, list[int]] = {}  # units freed, reused lowest first
        self.top_unit: dict[StateVar, int] = {v: 0 for v in self.vars}
        self._binds: dict = {}  # (serial, var) -> bind parameters (`_bind_params`)
        self._shapes: dict = {}  # `compile_rule`'s memo
        # Context.bound -> its entries' shared part (`_plan`), for the tables they were
        # planned with; dropped with any rule they name (`remove`), serials never coming back.
        self._plans: dict[tuple, tuple[list, list]] = {}
        self._parts: dict[tuple, tuple] = {}  # (serial, fired) -> its share (`_part`)
        self._plans_of: dict[int, list[tuple]] = {}  # serial -> the plans and parts naming it
        self._plan_tables: dict | None = None
        self._bitmaps: dict[frozenset[int], int] = {}  # port set -> `bitmap`
        self._bound: dict[tuple, tuple] = {}  # a leaf's markers -> Context.bound (`context`)

    # -- rules --

    def add(self, rule: Rule) -> RuleState:
        rs = compile_rule(rule, self.next_serial, self._shapes)
        self.next_serial += 1
        self.rules[rs.serial] = rs
        return rs

    def snapshot(self) -> tuple:
        """What `restore` needs to undo adds, removes and allocations made after it."""
        return (dict(self.rules), {v: list(f) for v, f in self.free_units.items()},
                dict(self.top_unit), self.next_serial,
                {s: (dict(rs.banks), dict(rs.units)) for s, rs in self.rules.items()})

    def restore(self, snap: tuple) -> None:
        rules, free, top, serial, places = snap
        self.rules, self.free_units, self.top_unit = dict(rules), free, top
        self.next_serial = serial  # serials given since are never seen again
        for s, (banks, units) in places.items():
            self.rules[s].banks, self.rules[s].units = banks, units

    def remove(self, serial: int) -> RuleState:
        rs = self.rules.pop(serial)
        for var in rs.vars:
            self._binds.pop((serial, var), None)
        for key in self._plans_of.pop(serial, ()):  # plans (bound) and parts (serial, fired)
            self._plans.pop(key, None)
            self._parts.pop(key, None)
        for var, unit in rs.units.items():
            self.free_units.setdefault(var, []).append(unit)
        return rs

    def live_rules(self) -> list[Rule]:
        return [rs.rule for rs in self.rules.values()]

    # -- leaves --

    def context(self, ports: frozenset[int], markers: list[int] | None = None
                ) -> Context | None:
        """A leaf's context, or None when its decision needs no state (its markers, if
        any, name no rule that must be bound). `markers`: the ports' markers, if known."""
        if markers is None:
            if not ports or max(ports) < MARKER_BASE:
                return None
            markers = [p for p in ports if p >= MARKER_BASE]
        elif not markers:
            return None
        key = tuple(markers)
        bound = self._bound.get(key)
        if bound is None:  # the leaves of a symbol's price intervals mostly share markers
            fires: dict[int, set[int]] = {}
            scoped: set[int] = set()
            for p in markers:
                serial, j = divmod(p - MARKER_BASE, STRIDE)
                if j == SCOPE:
                    scoped.add(serial)
                else:
                    fires.setdefault(serial, set()).add(j)
            bound = tuple(sorted((s, frozenset(fires.get(s, ()))) for s in scoped | set(fires)))
            if len(self._bound) >= MEMO_LIMIT:
                self._bound.clear()
            self._bound[key] = bound
        # a leaf's ~100 ports less its markers, copied in C
        return Context(ports.difference(markers), bound) if bound else None

    def real_ports(self, ports: frozenset[int]) -> frozenset[int]:
        """The ports a leaf may send to: its stateless ports and those of every rule that
        fires there for some combination (what the multicast group must reach)."""
        if not ports or max(ports) < MARKER_BASE:
            return ports
        plain = frozenset(filter(MARKER_BASE.__gt__, ports))
        out = set(plain)
        for p in ports - plain:
            serial, j = divmod(p - MARKER_BASE, STRIDE)
            if j != SCOPE:
                out |= self.rules[serial].rule.ports
        return frozenset(out)

    # -- allocation --

    def allocate(self, contexts) -> list[tuple[StateVar, int, int, int]]:
        """Banks and units for every rule not yet placed, in serial (rule) order, given the
        contexts now in use; the cells they take that need zeroing as (var, bank, first,
        count) (those of units freed before: a fresh unit was never written). StateError,
        with nothing placed, when a rule finds no free bank. The callers have checked the
        slots (`compiler.state.check_slots`), so units never run out."""
        todo = sorted(s for s, rs in self.rules.items() if not rs.banks and rs.vars)
        if not todo:
            return []
        together: dict[int, set[int]] = {s: set() for s in todo}
        # Contexts that differ in their ports or in where the rules fire bind the same
        # rules together: each group of rules once.
        for serials in {tuple(s for s, _ in b) for b in {ctx.bound for ctx in contexts}}:
            for s in serials:
                others = together.get(s)
                if others is not None:
                    others.update(serials)
        for s, others in together.items():
            others.discard(s)
        placed: list[RuleState] = []
        try:
            for s in todo:
                rs = self.rules[s]
                for var in rs.vars:
                    used = {self.rules[t].banks.get(var) for t in together[s]}
                    bank = next((b for b in range(self.banks) if b not in used), None)
                    if bank is None:
                        raise self._no_bank(rs, var, together[s])
                    rs.banks[var] = bank
                placed.append(rs)
        except StateError:
            for rs in placed + [self.rules[s]]:
                rs.banks.clear()
            raise
        resets = []
        for rs in placed:
            for var in rs.vars:
                free = self.free_units.get(var)
                if free:
                    free.sort()
                    unit = free.pop(0)
                    resets.append((var, rs.banks[var], unit * var.buckets, var.buckets))
                else:
                    unit = self.top_unit[var]
                    self.top_unit[var] += 1
                rs.units[var] = unit
        return resets

    def _no_bank(self, rs: RuleState, var: StateVar, others: set[int]) -> StateError:
        rivals = sorted((t for t in others if var in self.rules[t].banks),
                        key=lambda t: self.rules[t].banks[var])
        rules = [self.rules[t].rule for t in rivals]
        return StateError(
            f"state {var.read_as} has {self.banks} banks (query_banks), and a packet may be "
            f"in the scope of this rule and of {len(rules)} others that use it, each in its "
            f"own bank: a packet accesses each bank once. Declare more banks or make the "
            f"rules' scopes disjoint. This rule: {_where(rs.rule)}; the others: "
            f"{_named(rules)}", rs.rule.line or None, 1)

    # -- entries --

    def check(self, ctx: Context) -> None:
        """StateError for a context whose decide entries would be over the budget."""
        n = 1
        for s, _ in ctx.bound:
            n *= self.rules[s].combinations  # the product of its states' regions
        if n > MAX_DECIDE_ENTRIES:
            rules = [self.rules[s].rule for s, _ in ctx.bound]
            raise StateError(f"a packet may be in the scope of {len(rules)} stateful rules "
                             f"whose regions together make {n} combinations, more than the "
                             f"{MAX_DECIDE_ENTRIES} decide entries a context may have: "
                             f"{_named(rules)}", rules[0].line or None, 1)

    def entries(self, ctx: Context, ctx_id: int, tables: dict) -> list[dict]:
        """A context's bind entries (per state in order, per bound rule) and decide entries.
        `tables`: var -> (bind table names, index of its bank 0 among all banks).

        Everything but the context id and its stateless ports depends only on the bound
        rules (`ctx.bound`), which many contexts share (the price intervals of one symbol
        differ in their ports, not in their stateful rules): that part is planned once per
        `bound` (`_plan`) and each context only ORs its ports' bitmap into the decide
        entries. The entries of one context share their match's `ctx` dict, and bind
        entries their parameters with every context binding the same rule (the document
        is read-only output, as the multicast replicas shared per port are)."""
        if (tables is not self._plan_tables and tables != self._plan_tables) or \
                len(self._plans) >= MEMO_LIMIT:
            self._plans.clear()
            self._parts.clear()
            self._plans_of.clear()
            self._plan_tables = tables
        plan = self._plans.get(ctx.bound)
        if plan is None:
            plan = self._plans[ctx.bound] = self._plan(ctx.bound, tables)
            for s, _ in ctx.bound:
                self._plans_of.setdefault(s, []).append(ctx.bound)
        binds, decides = plan
        exact = {"exact": ctx_id}
        match = {"ctx": exact}
        out = [{"table": t, "match": match, "action": "bind", "params": p} for t, p in binds]
        decide = tables["decide"]
        base = self._bitmap(ctx.ports)
        if base:  # every combination sends somewhere
            out += [{"table": decide, "match": {"ctx": exact, "regions": regions},
                     "action": "decide", "params": {"ports": ports | base, "update": update}}
                    for regions, ports, update in decides]
        else:  # a combination with no ports and no update needs no entry: a miss does that
            out += [{"table": decide, "match": {"ctx": exact, "regions": regions},
                     "action": "decide", "params": {"ports": ports, "update": update}}
                    for regions, ports, update in decides if ports or update]
        return out

    def _bitmap(self, ports: frozenset[int]) -> int:
        bits = self._bitmaps.get(ports)
        if bits is None:
            if len(self._bitmaps) >= MEMO_LIMIT:  # a long-lived incremental compiler's
                self._bitmaps.clear()  # port sets come and go: keep the memo bounded
            bits = self._bitmaps[ports] = bitmap(ports)
        return bits

    def _plan(self, bound: tuple, tables: dict) -> tuple[list, list]:
        """What the entries of every context binding `bound` share: its bind entries as
        (table, params), and per combination of the bound banks' regions (in
        `itertools.product` order over the banks, as the decide entries go) the regions
        key, the bitmap of the ports of the rules that fire there, and the update bits."""
        if all(len(self.rules[s].vars) == 1 for s, _ in bound):
            return self._plan_by_rule(bound, tables)
        return self._plan_any(bound, tables)

    def _plan_any(self, bound: tuple, tables: dict) -> tuple[list, list]:
        """`_plan` for rules of any number of states."""
        binds = []
        axes = []  # (region shift, serial, state index in rule, regions)
        for var in self.vars:
            names, first = tables[var]
            for s, _ in bound:
                rs = self.rules[s]
                bank = rs.banks.get(var)
                if bank is None:
                    continue
                i = rs.vars.index(var)
                binds.append((names[bank], self._bind_params(rs, var, i)))
                axes.append((REGION_WIDTH * (first + bank), s, i, len(rs.bounds[i]) + 1))
        decides = self._decides(axes, dict(bound), tables)
        # Each key as the match's `regions` value, one dict shared by every context.
        return binds, [({"exact": key}, ports, update) for key, ports, update in decides]

    def _plan_by_rule(self, bound: tuple, tables: dict) -> tuple[list, list]:
        """`_plan` when each bound rule has one state (as most rules have), from each rule's
        part (`_part`): a rule's region is then its combination, so a decide entry is the
        OR of one region's contribution per rule. Banks go in state order, then in `bound`
        order, and so do the entries (`itertools.product` over the banks)."""
        parts = sorted((self._part(s, fired, tables) for s, fired in bound),
                       key=operator.itemgetter(0))  # stable: `bound` order within a state
        binds = [(table, params) for _, table, params, _ in parts]
        if len(parts) == 1:
            return binds, [({"exact": k}, p, u) for k, p, u in parts[0][3]]
        decides = []
        for row in itertools.product(*(part[3] for part in parts)):
            key = ports = update = 0
            for k, p, u in row:
                key |= k
                ports |= p
                update |= u
            decides.append(({"exact": key}, ports, update))
        return binds, decides

    def _part(self, s: int, fired: frozenset[int], tables: dict) -> tuple:
        """A one-state rule's share of every plan binding it where it fires in `fired`: its
        state's index, bind table and parameters, and per region (its key part, ports
        bitmap, update bits) or, where it does not fire, (key part, 0, 0)."""
        key = (s, fired)
        part = self._parts.get(key)
        if part is None:
            rs = self.rules[s]
            var = rs.vars[0]
            names, first = tables[var]
            bank = rs.banks[var]
            shift = REGION_WIDTH * (first + bank)
            ports = self._bitmap(rs.rule.ports)
            update = 1 << (first + bank) if var in rs.updates else 0
            regions = [(r << shift, ports, update) if r in fired else (r << shift, 0, 0)
                       for r in range(len(rs.bounds[0]) + 1)]
            part = self._parts[key] = (self.vars.index(var), names[bank],
                                       self._bind_params(rs, var, 0), regions)
            self._plans_of.setdefault(s, []).append(key)
        return part

    def _decides(self, axes: list, fires: dict, tables: dict) -> list:
        """`_plan`'s decide part: (regions key, ports bitmap, update bits) per combination
        of the banks' regions."""
        # Per bound rule: its ports' bitmap and update bits when it fires, and its
        # combinations that fire; then every combination of the banks' regions.
        effect = {}
        for s in fires:
            rs = self.rules[s]
            update = 0
            for var in rs.updates:
                update |= 1 << (tables[var][1] + rs.banks[var])
            effect[s] = (rs, self._bitmap(rs.rule.ports), update)
        decides = []
        for regions in itertools.product(*(range(n) for *_, n in axes)):
            key, per_rule = 0, {}
            for (shift, s, i, _), r in zip(axes, regions):
                key |= r << shift
                rr = per_rule.get(s)
                if rr is None:
                    rr = per_rule[s] = [0] * len(effect[s][0].vars)
                rr[i] = r
            ports, update = 0, 0
            for s, rr in per_rule.items():
                rs, rule_ports, rule_update = effect[s]
                if rs.combination(rr) in fires[s]:
                    ports |= rule_ports
                    update |= rule_update
            decides.append((key, ports, update))
        return decides

    def _bind_params(self, rs: RuleState, var: StateVar, i: int) -> dict:
        """A bind entry's parameters for rule `rs`'s state `var` (its i-th): the same in
        every context, made once and shared by its entries."""
        key = (rs.serial, var)
        params = self._binds.get(key)
        if params is None:
            bounds = rs.bounds[i]
            params = {"base": rs.units[var] * var.buckets, "scoped": int(var in rs.scoped),
                      "bounds": len(bounds),
                      "strict": sum(st << j for j, (_, st) in enumerate(bounds))}
            params.update({f"t{j}": bounds[j][0] if j < len(bounds) else 0
                           for j in range(MAX_BOUNDARIES)})
            self._binds[key] = params
        return params

    def instances(self, app: str) -> list[dict]:
        """entries.json's `state_instances`: every live rule's ranges, by state and base."""
        out = []
        for var in self.vars:
            for rs in sorted(self.rules.values(), key=lambda r: r.units.get(var, -1)):
                if var in rs.units:
                    out.append({"application": app, "state": var.name, "bank": rs.banks[var],
                                "base": rs.units[var] * var.buckets, "buckets": var.buckets,
                                "rule": rs.rule.text, "line": rs.rule.line})
        return out


def tables_for(spec: Spec, pipeline_state) -> dict:
    """var (the spec's StateVar) -> (bind table names, its bank 0's global index), and
    "decide" -> the decide table, from the application's `pipeline.model.State`."""
    out: dict = {"decide": pipeline_state.decide_table}
    for i, (var, pv) in enumerate(zip(spec.state_vars.values(), pipeline_state.vars)):
        out[var] = (pv.bind_tables, pipeline_state.bank_index(i, 0))
    return out
