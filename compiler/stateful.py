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
combination, and one for its scope): the diagram decides them with the stateless rules, and
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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction

from compiler.ast import And, Const, Filter, Not, Or, Rule, StateAtom, rule_state, state_atoms
from compiler.errors import StateError
from compiler.formula import conjunctions
from compiler.id_space import IdSpace
from compiler.spec import COUNT_BITS, Spec, StateVar
from compiler.state import NAMED_RULES, check_slots
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
Boundary = tuple[int, int]  # (threshold, strict)


def is_marker(p: int) -> bool:
    return p >= MARKER_BASE


def marker(serial: int, j: int) -> int:
    return MARKER_BASE + serial * STRIDE + j


def stateful(rule: Rule) -> bool:
    return bool(rule.updates) or bool(state_atoms(rule.filter))


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


def _value(var: StateVar, bounds: list[Boundary], r: int):
    """A value in region r: n for counters and meters, the average (a Fraction) else."""
    if var.kind != "average":
        return bounds[r - 1][0] if r else 0
    if r == 0:
        if not bounds:
            return Fraction(0)  # one region: every value (the predicates are constant)
        t, strict = bounds[0]
        return Fraction(t) if strict else Fraction(2 * t - 1, 2)
    t, strict = bounds[r - 1]
    return Fraction(2 * t + 1, 2) if strict else Fraction(t)


def _truth(a: StateAtom, v) -> bool:
    if a.state.kind == "meter":
        lhs, rhs = v * 1_000_000, a.value * a.state.window_us
    else:
        lhs, rhs = v, a.value
    return {"==": lhs == rhs, "!=": lhs != rhs, "<": lhs < rhs, "<=": lhs <= rhs,
            ">": lhs > rhs, ">=": lhs >= rhs}[a.op]


def _substitute(f: Filter, truth) -> Filter:
    """`f` with each state predicate replaced by `truth(atom)` (a bool), folded."""
    if isinstance(f, StateAtom):
        return Const(truth(f))
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


def compile_rule(rule: Rule, serial: int) -> RuleState:
    """The boundaries, combinations and pseudo-rules of one stateful rule; StateError (at
    the rule's line) when it has too many boundaries on a state or too many combinations."""
    vars_ = rule_state(rule)
    atoms = state_atoms(rule.filter)
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
    scoped = frozenset(v for v in vars_ if v not in rule.updates)
    rs = RuleState(rule, serial, vars_, bounds, scoped, frozenset(rule.updates), combos, [])
    index = {v: i for i, v in enumerate(vars_)}
    for c in range(combos):
        regions = rs.regions(c)
        values = [_value(v, b, r) for v, b, r in zip(vars_, bounds, regions)]
        f = _substitute(rule.filter, lambda a: _truth(a, values[index[a.state]]))
        _pseudo(rs.pseudo, f, marker(serial, c), rule)
    if scoped:  # the scope matters only for state updated by every packet in scope
        _pseudo(rs.pseudo, _scope(rule.filter), marker(serial, SCOPE), rule)
    return rs


def _pseudo(out: list, f: Filter, m: int, rule: Rule) -> None:
    if type(f) is Const and not f.value:
        return  # never holds: nothing for the diagram to decide
    out.append(Rule(f, frozenset((m,)), rule.line, rule.text))


def items(rs: RuleState) -> list:
    """The diagram's items (conjunction or wide filter, ports) of a rule's pseudo-rules."""
    return [(conj, p.ports) for p in rs.pseudo for conj in conjunctions(p.filter, p.line)]


# ---- contexts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What a context holds: the stateless ports, and per bound rule (by serial) the
    combinations for which it fires."""

    ports: frozenset[int]
    bound: tuple[tuple[int, frozenset[int]], ...]

    def text(self) -> str:
        rules = ";".join(f"{s}:{','.join(map(str, sorted(c)))}" for s, c in self.bound)
        return f"{','.join(map(str, sorted(self.ports)))}|{rules}"


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
        self.ctx_ids = IdSpace(CTX_WIDTH)
        self.ctx_refs: dict[Context, int] = {}

    # -- rules --

    def add(self, rule: Rule) -> RuleState:
        rs = compile_rule(rule, self.next_serial)
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
        for var, unit in rs.units.items():
            self.free_units.setdefault(var, []).append(unit)
        return rs

    def live_rules(self) -> list[Rule]:
        return [rs.rule for rs in self.rules.values()]

    # -- leaves --

    def context(self, ports: frozenset[int]) -> Context | None:
        """A leaf's context, or None when its decision needs no state (its markers, if
        any, name no rule that must be bound)."""
        plain = frozenset(p for p in ports if p < MARKER_BASE)
        if len(plain) == len(ports):
            return None
        fires: dict[int, set[int]] = {}
        scoped: set[int] = set()
        for p in ports:
            if p >= MARKER_BASE:
                serial, j = divmod(p - MARKER_BASE, STRIDE)
                if j == SCOPE:
                    scoped.add(serial)
                else:
                    fires.setdefault(serial, set()).add(j)
        bound = tuple(sorted((s, frozenset(fires.get(s, ()))) for s in scoped | set(fires)))
        return Context(plain, bound) if bound else None

    def real_ports(self, ports: frozenset[int]) -> frozenset[int]:
        """The ports a leaf may send to: its stateless ports and those of every rule that
        fires there for some combination (what the multicast group must reach)."""
        if not any(p >= MARKER_BASE for p in ports):
            return ports
        out = {p for p in ports if p < MARKER_BASE}
        for p in ports:
            if p >= MARKER_BASE:
                serial, j = divmod(p - MARKER_BASE, STRIDE)
                if j != SCOPE:
                    out |= self.rules[serial].rule.ports
        return frozenset(out)

    # -- allocation --

    def allocate(self, contexts) -> list[tuple[StateVar, int, int, int]]:
        """Banks and units for every rule not yet placed, in serial (rule) order, given the
        contexts now in use; the cells they take that need zeroing as (var, bank, first,
        count) (those of units freed before: a fresh unit was never written). StateError,
        with nothing placed, when a rule finds no free bank."""
        todo = sorted(s for s, rs in self.rules.items() if not rs.banks and rs.vars)
        if not todo:
            return []
        check_slots(self.live_rules())
        together: dict[int, set[int]] = {s: set() for s in todo}
        for ctx in contexts:
            serials = [s for s, _ in ctx.bound]
            for s in serials:
                if s in together:
                    together[s].update(t for t in serials if t != s)
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
            for b in self.rules[s].bounds:
                n *= len(b) + 1
        if n > MAX_DECIDE_ENTRIES:
            rules = [self.rules[s].rule for s, _ in ctx.bound]
            raise StateError(f"a packet may be in the scope of {len(rules)} stateful rules "
                             f"whose regions together make {n} combinations, more than the "
                             f"{MAX_DECIDE_ENTRIES} decide entries a context may have: "
                             f"{_named(rules)}", rules[0].line or None, 1)

    def entries(self, ctx: Context, ctx_id: int, tables: dict) -> list[dict]:
        """A context's bind entries (per state in order, per bound rule) and decide entries.
        `tables`: var -> (bind table names, index of its bank 0 among all banks)."""
        out = []
        axes = []  # (global bank index, RuleState, state index in rule, regions)
        for var in self.vars:
            names, first = tables[var]
            for s, _ in ctx.bound:
                rs = self.rules[s]
                if var not in rs.banks:
                    continue
                i = rs.vars.index(var)
                bank = rs.banks[var]
                bounds = rs.bounds[i]
                params = {"base": rs.units[var] * var.buckets, "scoped": int(var in rs.scoped),
                          "bounds": len(bounds),
                          "strict": sum(st << j for j, (_, st) in enumerate(bounds))}
                params.update({f"t{j}": bounds[j][0] if j < len(bounds) else 0
                               for j in range(MAX_BOUNDARIES)})
                out.append({"table": names[bank], "match": {"ctx": {"exact": ctx_id}},
                            "action": "bind", "params": params})
                axes.append((first + bank, rs, i, len(bounds) + 1))
        fires = dict(ctx.bound)
        decide = tables["decide"]
        for regions in itertools.product(*(range(n) for *_, n in axes)):
            key, per_rule = 0, {}
            for (g, rs, i, _), r in zip(axes, regions):
                key |= r << (REGION_WIDTH * g)
                per_rule.setdefault(rs.serial, [0] * len(rs.vars))[i] = r
            ports, update = set(ctx.ports), 0
            for s, rr in per_rule.items():
                rs = self.rules[s]
                if rs.combination(rr) in fires[s]:
                    ports |= rs.rule.ports
                    for var in rs.updates:
                        update |= 1 << (tables[var][1] + rs.banks[var])
            if ports or update:
                out.append({"table": decide, "match": {"ctx": {"exact": ctx_id},
                                                       "regions": {"exact": key}},
                            "action": "decide", "params": {"ports": bitmap(ports),
                                                           "update": update}})
        return out

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
