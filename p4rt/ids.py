"""p4c's P4Runtime ids and aliases, so that every P4Info camus writes numbers names as p4c does.

p4c's `P4RuntimeSymbolTable` gives each entity the id `kind << 24 | hash & 0xFFFFFF`, where
`kind` is the entity's `P4Ids.Prefix` and `hash` the Jenkins one-at-a-time hash of its fully
qualified name; names are visited in sorted order and a taken id moves the hash on by one.
An entity's id therefore depends on its own name and, only through such a collision, on the
other names of its kind: one program has one set of ids, wherever it runs, as long as every
P4Info of it is numbered over the program's whole name set (`p4rt.p4info` does that).
Aliases are p4c's shortest unique suffixes. tests/p4/test_p4c_ids.py checks both against
P4Info files p4c wrote.
"""

from __future__ import annotations


def jenkins_one_at_a_time(name: str) -> int:
    """p4c's `P4RuntimeSymbolTable::jenkinsOneAtATimeHash` over the name's bytes."""
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    return (h + (h << 15)) & 0xFFFFFFFF


def p4c_id_map(kind: int, names, taken: set[int]) -> dict[str, int]:
    """p4c's `computeIdsForSymbols`: names in sorted order, id = kind << 24 | hash & 0xFFFFFF,
    the hash incremented past ids already taken (`taken` is updated)."""
    out = {}
    for name in sorted(set(names)):
        start = value = jenkins_one_at_a_time(name)
        while (kind << 24 | value & 0xFFFFFF) in taken:
            value = (value + 1) & 0xFFFFFFFF
            if value == start:
                raise ValueError(f"no P4Runtime id left for {name}")
        out[name] = kind << 24 | value & 0xFFFFFF
        taken.add(out[name])
    return out


def shortest_unique_suffixes(names) -> dict[str, str]:
    """p4c's aliases (`P4SymbolSuffixSet`): the fewest trailing dot-separated components of a
    name that no other name of the program ends with."""
    names = sorted(set(names))
    counts: dict[tuple[str, ...], int] = {}
    for n in names:
        parts = tuple(n.split("."))
        for k in range(1, len(parts) + 1):
            counts[parts[-k:]] = counts.get(parts[-k:], 0) + 1
    out = {}
    for n in names:
        parts = tuple(n.split("."))
        k = 1
        while k < len(parts) and counts[parts[-k:]] > 1:
            k += 1
        out[n] = ".".join(parts[-k:])
    return out
