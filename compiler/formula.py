"""Filters too wide for disjunctive normal form, kept as formulas and expanded field by field.

An `and` of n two-atom `or`s has 2^n alternatives in disjunctive normal form, yet its
decision diagram is small: once the first fields are read, what is left to decide is the
`and` of the clauses not yet satisfied, and few distinct such residuals arise. So such a
filter is not normalised (`conjunctions` hands it on whole, as a `Wide` item) and the
diagram builder splits it by Shannon expansion instead (`Formulas.expand`): at the first
field the formula tests, the field's domain is cut at the endpoints of that field's atoms;
on each elementary interval every atom on the field is true or false, and the formula
simplified under those values is the residual to decide at the later fields.

Formulas are hash-consed (`Formulas`): negation is pushed onto atoms (interval complement),
nested `and`s and `or`s are flattened, atoms on one field within one junction are merged into
one interval set, and a junction is keyed by the set of its children, so equal residuals
written alike are one node and lead to one state (a node's text, which names the states it
is in, orders children by their texts: it does not depend on the order nodes were made in).
In a state, an `or` residual is one residual per disjunct, and a residual that has become a
plain conjunction (one interval set per field) is the builder's conjunction residual, so the
usual per-port merging of one-field residuals applies to them as to a normal form's.

Which path a filter takes depends on its shape alone (`normalize.size_bound`, no expansion):
past FORMULA_AT alternatives, the formula path. The diagram reduces to the same function
either way, with the same tests and as many entries, but for the start state, which is never
bypassed and may test a field that decides nothing in one path only (a random rule set in a
few hundred); the texts that name states, and so the state ids, may differ
(`tests/compiler/test_formula.py`). A wide filter's size is known before
the compile pays it: its own diagram is expanded when it is parsed (`check`) and when the size
is estimated (`own_size`), and the build stops past MAX_FORMULA_STATES residuals per filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_

from compiler import intervals as iv
from compiler.ast import And, Atom, Const, Filter, Not, Or, atoms
from compiler.errors import RuleError
from compiler.normalize import MAX_DISJUNCTS, Conjunction, dnf, plain_conjunction, size_bound
from compiler.spec import QueryField

# A filter whose normal form may have more alternatives than this is compiled as a formula.
# Equal to the normal form's own limit: every filter normalised before still is, with the
# same entries (the incremental compiler, which works on conjunctions, takes exactly those).
FORMULA_AT = MAX_DISJUNCTS
# A wide filter whose own diagram (the filter alone, fields in the order its constants
# suggest) has more residual formulas than this is refused when it is parsed; a compile
# whose field order makes more than this many per wide filter is refused when it does.
MAX_FORMULA_STATES = 5_000

TRUE, FALSE = -1, -2


@dataclass(frozen=True, eq=False)
class Wide:
    """A rule's whole filter, in place of its conjunctions, for the formula path."""

    filter: Filter
    line: int | None = None

    def sizing(self) -> list[Conjunction]:
        """One single-field conjunction per atom: what the field order heuristic sees of
        the filter (its cut points)."""
        out = []
        for a in atoms(self.filter):
            s = iv.of_atom(a)
            if s and s != iv.full(a.field.max_value):
                out.append({a.field: s})
        return out


def wide(f: Filter) -> bool:
    """Whether `f` takes the formula path (its shape only; cheap)."""
    return not isinstance(f, Atom) and size_bound(f) > FORMULA_AT


def conjunctions(f: Filter, line: int | None = None) -> list:
    """`normalize.dnf(f)`, or [Wide(f)] for a filter too wide for it."""
    conj = plain_conjunction(f)  # the most common filter, first and fast
    if conj is not None:
        return conj
    if wide(f):
        return [Wide(f, line)]
    return dnf(f, line)


def sizing(items: Iterable) -> Iterable[Conjunction]:
    """Conjunctions as order.choose and estimate take them, Wide items as their atoms."""
    for c in items:
        if type(c) is Wide:
            yield from c.sizing()
        else:
            yield c


class Formulas:
    """Hash-consed formulas over the fields of `order`, by stage index. A node is TRUE,
    FALSE or an id: a literal `field k in S`, or an `and`/`or` of two or more nodes."""

    def __init__(self, order: Sequence[QueryField]):
        self.order = list(order)
        self.index = {q: k for k, q in enumerate(self.order)}
        self.key: dict[tuple, int] = {}
        self.kind: list[str] = []  # "L", "A" (and) or "O" (or)
        self.arg: list = []  # literal: (k, S); junction: children, by id
        self._text: dict[int, str] = {}  # made on demand (see text)
        self.fields: list[int] = []  # bit k: the node tests stage k
        self.expansions: dict[int, list[tuple[int, int, int]]] = {}
        self._parts: dict[tuple[int, int], tuple] = {}
        self._rest: dict[tuple[int, int], int] = {}

    # --- building --------------------------------------------------------------------

    def of_filter(self, f: Filter, negated: bool = False) -> int:
        if isinstance(f, Atom):
            s = iv.of_atom(f)
            if negated:
                s = iv.complement(s, f.field.max_value)
            if not s or s == iv.full(f.field.max_value):  # its field may be in no stage
                return TRUE if s else FALSE
            return self.literal(self.index[f.field], s)
        if isinstance(f, Not):
            return self.of_filter(f.item, not negated)
        if isinstance(f, Const):
            return TRUE if f.value != negated else FALSE
        if isinstance(f, (And, Or)):
            return self.junction(isinstance(f, And) != negated,
                                 [self.of_filter(i, negated) for i in f.items])
        raise TypeError(f"not a filter: {f!r}")

    def literal(self, k: int, s: iv.IntervalSet) -> int:
        if not s:
            return FALSE
        if s == ((0, self.order[k].max_value),):
            return TRUE
        return self._node("L", (k, s), 1 << k)

    def junction(self, is_and: bool, children: Iterable[int], base: tuple | None = None) -> int:
        """The simplified `and` (or `or`) of `children`. `base`, if given, is (kids,
        {stage: (S, literal)}) of children already simplified together (the part of a
        junction a substitution leaves alone, see `parts`): taken as they are, not re-added
        one by one."""
        absorbing, neutral = (FALSE, TRUE) if is_and else (TRUE, FALSE)
        kind = "A" if is_and else "O"
        merge = iv.intersect if is_and else iv.union
        rest: set[int] = set(base[0]) if base else set()
        base_lits: dict = base[1] if base else {}
        lits: dict[int, iv.IntervalSet] = {}

        def add(c: int) -> bool:  # False: the junction is `absorbing`
            if c == absorbing:
                return False
            if c == neutral:
                return True
            ck = self.kind[c]
            if ck == "L":
                k, s = self.arg[c]
                if k in lits:
                    lits[k] = merge(lits[k], s)
                elif k in base_lits:  # replaces the base's literal on that field
                    s0, lit = base_lits[k]
                    rest.discard(lit)
                    lits[k] = merge(s0, s)
                else:
                    lits[k] = s
            elif ck == kind:  # flatten: its children are simplified already
                for g in self.arg[c]:
                    add(g)
            else:
                rest.add(c)
            return True

        for c in children:
            if not add(c):
                return absorbing
        for k, s in lits.items():
            c = self.literal(k, s)
            if c == absorbing:
                return absorbing
            if c != neutral:
                rest.add(c)
        if not rest:
            return neutral
        if len(rest) == 1:
            return rest.pop()
        kids = tuple(sorted(rest))
        return self._node(kind, kids, reduce(or_, map(self.fields.__getitem__, kids)))

    def _node(self, kind: str, arg, fields: int) -> int:
        key = (kind, arg)
        n = self.key.get(key)
        if n is None:
            n = self.key[key] = len(self.kind)
            self.kind.append(kind)
            self.arg.append(arg)
            self.fields.append(fields)
        return n

    def text(self, n: int) -> str:
        """The node's canonical text (children in the order of their texts): it names the
        states the node is in, so it must not depend on the order nodes were made in."""
        t = self._text.get(n)
        if t is None:
            if self.kind[n] == "L":
                k, s = self.arg[n]
                t = f"{self.order[k].qname}{list(s)}"
            else:
                sep = "&" if self.kind[n] == "A" else "|"
                t = "(" + sep.join(sorted([self.text(c) for c in self.arg[n]])) + ")"
            self._text[n] = t
        return t

    # --- expanding -------------------------------------------------------------------

    def head(self, n: int) -> int:
        """The first stage `n` tests."""
        m = self.fields[n]
        return (m & -m).bit_length() - 1

    def conjunction(self, n: int) -> list[tuple[int, iv.IntervalSet]] | None:
        """`n` as (stage, interval set) pairs, one per field, if it is a conjunction."""
        if self.kind[n] == "L":
            return [self.arg[n]]
        if self.kind[n] == "A" and all(self.kind[c] == "L" for c in self.arg[n]):
            return [self.arg[c] for c in self.arg[n]]
        return None

    def expand(self, n: int) -> list[tuple[int, int, int]]:
        """Shannon expansion at `n`'s first field: (lo, hi, residual node) covering the
        field's domain, neighbours with one residual merged (FALSE included)."""
        out = self.expansions.get(n)
        if out is not None:
            return out
        k = self.head(n)
        top = self.order[k].max_value
        cuts = {0}
        seen: set[int] = set()
        todo = [n]
        while todo:  # every endpoint of every atom on field k
            c = todo.pop()
            if c in seen or not self.fields[c] >> k & 1:
                continue
            seen.add(c)
            if self.kind[c] == "L":
                for lo, hi in self.arg[c][1]:
                    cuts.add(lo)
                    if hi < top:
                        cuts.add(hi + 1)
            else:
                todo.extend(self.arg[c])
        bounds = sorted(cuts)
        out = []
        for j, lo in enumerate(bounds):
            hi = bounds[j + 1] - 1 if j + 1 < len(bounds) else top
            r = self.restrict(n, k, lo, {})
            if out and out[-1][2] == r:
                out[-1] = (out[-1][0], hi, r)
            else:
                out.append((lo, hi, r))
        self.expansions[n] = out
        return out

    def restrict(self, n: int, k: int, x: int, memo: dict[int, int]) -> int:
        """`n` with field k's value x substituted, simplified."""
        if not self.fields[n] >> k & 1:
            return n
        r = memo.get(n)
        if r is None:
            kind = self.kind[n]
            if kind == "L":
                r = FALSE
                for lo, hi in self.arg[n][1]:
                    if lo <= x <= hi:
                        r = TRUE
                        break
            else:
                absorbing, neutral = (FALSE, TRUE) if kind == "A" else (TRUE, FALSE)
                untouched, touched = self.parts(n, k)
                subs = []
                for c in touched:
                    t = self.restrict(c, k, x, memo)
                    if t == absorbing:
                        r = absorbing
                        break
                    if t != neutral:
                        subs.append(t)
                else:  # (the untouched part alone, the usual case of a clause, is remembered)
                    r = self.junction(kind == "A", subs, untouched) if subs else \
                        self.rest_of(n, k)
            memo[n] = r
        return r

    def rest_of(self, n: int, k: int) -> int:
        """Junction `n` with its children that test field k left out."""
        r = self._rest.get((n, k))
        if r is None:
            r = self._rest[n, k] = self.junction(self.kind[n] == "A", (), self.parts(n, k)[0])
        return r

    def parts(self, n: int, k: int) -> tuple[tuple, tuple[int, ...]]:
        """Junction `n`'s children that do not test field k, as `junction`'s `base`, and
        those that do: substituting a value for k re-simplifies only the latter (an `and`
        of hundreds of clauses has a few on each field)."""
        got = self._parts.get((n, k))
        if got is None:
            masks, kind, arg = self.fields, self.kind, self.arg
            kids = [c for c in arg[n] if not masks[c] >> k & 1]
            lits = {arg[c][0]: (arg[c][1], c) for c in kids if kind[c] == "L"}
            got = self._parts[n, k] = ((kids, lits),
                                       tuple(c for c in arg[n] if masks[c] >> k & 1))
        return got


def diagram_size(f: Filter, order: Sequence[QueryField], limit: int) -> int:
    """How many distinct residual formulas (states) expanding `f` alone in `order` makes,
    counting no further than just past `limit`."""
    return _expand_alone(f, order, limit)[0]


def own_size(f: Filter, order: Sequence[QueryField]) -> tuple[int, int]:
    """(states, entries) of `f`'s own diagram in `order`, about: every residual formula a
    state, every interval of its split an entry (up to MAX_FORMULA_STATES states)."""
    return _expand_alone(f, order, MAX_FORMULA_STATES)


def _expand_alone(f: Filter, order: Sequence[QueryField], limit: int) -> tuple[int, int]:
    forms = Formulas(order)
    root = forms.of_filter(f)
    if root < 0:
        return 0, 0
    seen, todo, entries = {root}, [root], 0
    while todo and len(seen) <= limit:
        n = todo.pop()
        split = forms.expand(n)
        entries += len(split)
        for _, _, r in split:
            if r >= 0 and r not in seen:
                seen.add(r)
                todo.append(r)
    return len(seen), entries


def own_order(f: Filter) -> list[QueryField]:
    """The fields `f` tests, fewest distinct cut values first (`order.choose`'s heuristic
    for the filter alone; declaration order cannot be known without the spec, so ties go by
    name)."""
    cuts: dict[QueryField, set[int]] = {}
    for conj in Wide(f).sizing():
        for q, s in conj.items():
            cuts.setdefault(q, set()).update(x for pair in s for x in pair)
    return sorted(cuts, key=lambda q: (len(cuts[q]), q.kind != "exact", q.qname))


def check(f: Filter, line: int | None, column: int | None, source: str | None = None,
          what: str = "this filter") -> None:
    """RuleError if `f` is wide and its own decision diagram passes MAX_FORMULA_STATES
    states: refused where it is parsed, with its position and the size reached."""
    if not wide(f):
        return
    states = diagram_size(f, own_order(f), MAX_FORMULA_STATES)
    if states > MAX_FORMULA_STATES:
        raise RuleError(f"{what} is too wide to compile: its normal form may have more than "
                        f"{MAX_DISJUNCTS} alternatives, and its decision diagram more than "
                        f"{MAX_FORMULA_STATES} states (expanded field by field, "
                        f"{MAX_FORMULA_STATES} reached); split it into several rules",
                        line, column, source)


def too_many(lines: Sequence[int | None], reached: int) -> RuleError:
    """The compile's refusal when, in its field order, the wide filters at `lines` make
    `reached` residual formulas, past MAX_FORMULA_STATES for each."""
    where = ", ".join(str(n) for n in lines[:10] if n) or "?"
    return RuleError(f"the wide filter(s) at line(s) {where} expand to more than {reached} "
                     f"residual formulas in this field order ({MAX_FORMULA_STATES} per wide "
                     "filter allowed; each filter alone was within it in the order its "
                     "constants suggest): split them, or give another --field-order",
                     lines[0] if lines else None, 1)
