"""What a stateful rule set needs of the switch's registers, and what the compiler refuses.

Every rule has its own instances of the state it reads or updates (docs/stateful.md): one
slot of a declared state per rule, or `buckets` slots for keyed state. A rule set that needs
more slots of a state than the spec declares is refused as a whole, naming the rules; the
reference evaluator and the compiler (`compiler.compile`, `compiler.incremental`) all call
`check_slots`, so none ever shares an instance to make room.
"""

from __future__ import annotations

from collections.abc import Iterable

from compiler.ast import Rule, rule_state
from compiler.errors import StateError
from compiler.spec import StateVar

# A refusal lists this many of the rules it is about, then how many more there are.
NAMED_RULES = 8


def users(rules: Iterable[Rule], states=rule_state) -> dict[StateVar, list[Rule]]:
    """The rules that have instances of each state, in rule order. `states(rule)` is
    `rule_state(rule)`, or what a caller knows it to be."""
    out: dict[StateVar, list[Rule]] = {}
    for rule in rules:
        for var in states(rule):
            out.setdefault(var, []).append(rule)
    return out


def check_slots(rules: Iterable[Rule], source: str | None = None, states=rule_state) -> None:
    """Refuse `rules` if, of some state, they need more slots than it has. `states` as
    `users` takes it."""
    for var, rs in users(rules, states).items():
        need = len(rs) * var.buckets
        if need <= var.slots:
            continue
        per_rule = f" ({var.buckets} buckets each)" if var.key else ""
        first_over = rs[var.slots // var.buckets]
        named = "; ".join(f"line {r.line}: {r.text or '?'}" for r in rs[:NAMED_RULES])
        if len(rs) > NAMED_RULES:
            named += f"; and {len(rs) - NAMED_RULES} more"
        raise StateError(f"state {var.read_as} is declared with {var.slots} slots (spec line "
                         f"{var.line}) but {len(rs)} rules use it{per_rule}, needing {need}; "
                         f"instances are never shared: declare more slots or drop rules. The "
                         f"rules: {named}", first_over.line or None, 1, source)
