"""Which field the decision diagram tests first.

Size, never correctness, depends on the order. The heuristic puts the fields with the fewest
distinct constants first (they fan out least near the root), exact-match fields before range
fields on a tie (cheap SRAM lookups early), then declaration order. `--field-order` overrides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from compiler.errors import CamusError
from compiler.normalize import Conjunction
from compiler.spec import QueryField, Spec


def choose(spec: Spec, conjunctions: Iterable[Conjunction],
           override: Sequence[str] | None = None, static: bool = False) -> list[QueryField]:
    """The fields to test, in order.

    `static`: every query field, in `override` order or else declaration order, whether or not
    any rule tests it, so that the pipeline stays the same for every rule set (what a target
    whose program is compiled once, like a Kafka broker's switch, needs).
    """
    if static:
        return ranked(spec, {}, override, static)
    distinct: dict[QueryField, set] = {}  # each field's distinct interval sets
    for conj in conjunctions:
        for q, ivs in conj.items():
            s = distinct.get(q)
            if s is None:
                s = distinct[q] = set()
            s.add(ivs)
    cuts = {q: {x for ivs in s for pair in ivs for x in pair} for q, s in distinct.items()}
    return ranked(spec, {q: len(c) for q, c in cuts.items()}, override, static)


def ranked(spec: Spec, cuts: dict[QueryField, int], override: Sequence[str] | None = None,
           static: bool = False) -> list[QueryField]:
    """`choose` from each tested field's number of distinct cut values (what an incremental
    compile keeps count of)."""
    declared = list(spec.query_fields.values())
    if static:
        named = _named(spec, override or ())
        return named + [q for q in declared if q not in named]
    used = set(cuts)
    if override:
        order = _named(spec, override)
        missing = [q.qname for q in spec.query_fields.values() if q in used and q not in order]
        if missing:
            raise CamusError(f"--field-order leaves out field(s) the rules test: "
                             f"{', '.join(missing)}")
        return [q for q in order if q in used]
    return sorted(used, key=lambda q: (cuts[q], q.kind != "exact", declared.index(q)))


def _named(spec: Spec, names: Sequence[str]) -> list[QueryField]:
    order: list[QueryField] = []
    for name in names:
        try:
            q = spec.resolve(name)
        except CamusError as exc:
            raise CamusError(f"--field-order: {exc.message}") from None
        if q in order:
            raise CamusError(f"--field-order names '{q.qname}' twice")
        order.append(q)
    return order
