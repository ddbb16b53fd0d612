"""The match-kind registry: everything camus knows about one kind of key, in one entry.

A `MatchKind` says how the kind appears in the IR (a stage's `match_kind`) and in
entries.json (`{"<name>": value}`), its P4Info `MatchField.MatchType` name and its P4Runtime
`FieldMatch` oneof with that message's fields, whether entries of it carry a priority that
is part of their identity, how the compiler covers an interval of field values with entries
of it, how an entries.json value is checked and reduced to two integers `(a, b)`, how a
table of it is looked up (the one Python lookup: `pipeline.interpreter` and the reference
switch run it), and which installed entries a new one conflicts with.

Adding a match kind is one entry in `MATCH_KINDS` plus its table in the native switch
(switch/native/src/tables.rs, which reads the kind's name from the plan) and its protobuf
codec in p4rt/match_kinds.py.

Reduced keys: exact `a` = value; range `a`..`b` inclusive; lpm `a` = masked value, `b` =
prefix length; ternary `a` = masked value, `b` = mask. A table structure maps
`(state, a, b, priority)` to an opaque result and finds the result for `(state, value)`; for
kinds that `may_conflict`, `conflict` names an installed key that a new one is ambiguous with.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pipeline.model import EntryError


def check_int(value: Any, width: int, what: str) -> int:
    """`value` as an unsigned integer of `width` bits, or EntryError saying why not."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise EntryError(f"{what}: expected an integer, got {value!r}")
    if not 0 <= value < (1 << width):
        raise EntryError(f"{what}: {value} does not fit in {width} bits")
    return value


def _pair(value: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise EntryError(f"{what}: expected a pair [a, b], got {value!r}")
    return value[0], value[1]


# ---- exact -------------------------------------------------------------------------------


def _reduce_exact(raw: Any, width: int, what: str) -> tuple[int, int]:
    return check_int(raw, width, what), 0


def _cover_exact(lo: int, hi: int, width: int) -> Iterator[tuple[dict, int | None]]:
    # The compiler gives an exact stage only runs of adjacent constants: small.
    assert hi - lo < 1 << 20, f"{hi - lo + 1} values in one run of exact entries"
    for v in range(lo, hi + 1):
        yield {"exact": v}, None


class ExactTable:
    def __init__(self, width: int) -> None:
        self.map: dict[tuple[int, int], Any] = {}

    def install(self, state: int, a: int, b: int, priority: int, result: Any) -> None:
        self.map[(state, a)] = result

    def uninstall(self, state: int, a: int, b: int, priority: int) -> None:
        del self.map[(state, a)]

    def lookup(self, state: int, value: int) -> Any:
        return self.map.get((state, value))


# ---- range -------------------------------------------------------------------------------


def _reduce_range(raw: Any, width: int, what: str) -> tuple[int, int]:
    lo, hi = (check_int(x, width, what) for x in _pair(raw, what))
    if lo > hi:
        raise EntryError(f"{what}: empty range [{lo}, {hi}]")
    return lo, hi


def _cover_range(lo: int, hi: int, width: int) -> Iterator[tuple[dict, int | None]]:
    yield {"range": [lo, hi]}, 1


class RangeTable:
    """Per state, disjoint inclusive intervals sorted by low end (`conflict` refuses overlaps)."""

    def __init__(self, width: int) -> None:
        self.by_state: dict[int, list[tuple[int, int, Any]]] = defaultdict(list)

    def install(self, state: int, a: int, b: int, priority: int, result: Any) -> None:
        spans = self.by_state[state]
        i = bisect.bisect_left(spans, (a, b))
        if i < len(spans) and spans[i][:2] == (a, b):
            spans[i] = (a, b, result)
        else:
            spans.insert(i, (a, b, result))

    def uninstall(self, state: int, a: int, b: int, priority: int) -> None:
        spans = self.by_state[state]
        del spans[bisect.bisect_left(spans, (a, b))]

    def lookup(self, state: int, value: int) -> Any:
        spans = self.by_state.get(state)
        if not spans:
            return None
        # The last interval starting at or below value is the only candidate.
        i = bisect.bisect_right(spans, (value, float("inf"))) - 1
        if i >= 0 and spans[i][0] <= value <= spans[i][1]:
            return spans[i][2]
        return None

    def conflict(self, state: int, a: int, b: int, priority: int) -> str | None:
        spans = self.by_state.get(state, [])
        i = bisect.bisect_left(spans, (a, b))
        for lo, hi, _ in spans[max(i - 1, 0): i + 1]:
            if lo <= b and a <= hi:
                return f"range [{a}, {b}] overlaps [{lo}, {hi}] in state {state}"
        return None


# ---- lpm ---------------------------------------------------------------------------------


def _reduce_lpm(raw: Any, width: int, what: str) -> tuple[int, int]:
    value, plen = _pair(raw, what)
    value, plen = check_int(value, width, what), check_int(plen, 8, what)
    if plen > width:
        raise EntryError(f"{what}: prefix length {plen} exceeds the {width}-bit field")
    return value & (((1 << plen) - 1) << (width - plen)), plen


def prefixes(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """The fewest aligned prefixes `(value, prefix_len)` that exactly cover [lo, hi]."""
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << width
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, width - size.bit_length() + 1))
        lo += size
    return out


def _cover_lpm(lo: int, hi: int, width: int) -> Iterator[tuple[dict, int | None]]:
    for value, plen in prefixes(lo, hi, width):
        yield {"lpm": [value, plen]}, None


class LpmTable:
    def __init__(self, width: int) -> None:
        self.width = width
        self.by_state: dict[int, dict[int, dict[int, Any]]] = defaultdict(dict)

    def install(self, state: int, a: int, b: int, priority: int, result: Any) -> None:
        self.by_state[state].setdefault(b, {})[a] = result

    def uninstall(self, state: int, a: int, b: int, priority: int) -> None:
        by_len = self.by_state[state]
        del by_len[b][a]
        if not by_len[b]:
            del by_len[b]

    def lookup(self, state: int, value: int) -> Any:
        by_len = self.by_state.get(state, {})
        for plen in sorted(by_len, reverse=True):
            hit = by_len[plen].get(value & (((1 << plen) - 1) << (self.width - plen)))
            if hit is not None:
                return hit
        return None


# ---- ternary -----------------------------------------------------------------------------


def _reduce_ternary(raw: Any, width: int, what: str) -> tuple[int, int]:
    value, mask = (check_int(x, width, what) for x in _pair(raw, what))
    return value & mask, mask


def _cover_ternary(lo: int, hi: int, width: int) -> Iterator[tuple[dict, int | None]]:
    raise ValueError("the compiler does not emit ternary stages")


class TernaryTable:
    """Highest priority wins; `conflict` refuses overlapping entries of equal priority."""

    def __init__(self, width: int) -> None:
        self.by_state: dict[int, dict[tuple[int, int, int], Any]] = defaultdict(dict)

    def install(self, state: int, a: int, b: int, priority: int, result: Any) -> None:
        self.by_state[state][(priority, a, b)] = result

    def uninstall(self, state: int, a: int, b: int, priority: int) -> None:
        del self.by_state[state][(priority, a, b)]

    def lookup(self, state: int, value: int) -> Any:
        best = None
        for (prio, v, mask), result in self.by_state.get(state, {}).items():
            if value & mask == v and (best is None or prio > best[0]):
                best = (prio, result)
        return None if best is None else best[1]

    def conflict(self, state: int, a: int, b: int, priority: int) -> str | None:
        for prio, v, mask in self.by_state.get(state, {}):
            if prio == priority and (v ^ a) & mask & b == 0:
                return f"ternary entries with equal priority {priority} overlap in state {state}"
        return None


# ---- the registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class MatchKind:
    name: str  # the IR's match_kind, the entries.json key and the P4_16 match_kind
    p4info_match_type: str  # p4.config.v1.MatchField.MatchType value name
    p4runtime_field: str  # the p4.v1.FieldMatch oneof member
    p4runtime_components: tuple[str, ...]  # that member's fields, in the order of (a, b)
    prioritised: bool  # entries carry a priority, part of their identity (P4Runtime)
    per_value: bool  # the compiler needs one entry per value (no entry spans several)
    may_conflict: bool  # two entries with different keys can be ambiguous: `table.conflict` refuses them
    reduce: Callable[[Any, int, str], tuple[int, int]]  # entries.json value -> (a, b)
    cover: Callable[[int, int, int], Iterator[tuple[dict, int | None]]]  # [lo, hi] -> (match, priority)
    table: Callable[[int], Any]  # a new table structure for keys of the given width


MATCH_KINDS: dict[str, MatchKind] = {k.name: k for k in (
    MatchKind("exact", "EXACT", "exact", ("value",), False, True, False, _reduce_exact, _cover_exact, ExactTable),
    MatchKind("range", "RANGE", "range", ("low", "high"), True, False, True, _reduce_range, _cover_range,
              RangeTable),
    MatchKind("lpm", "LPM", "lpm", ("value", "prefix_len"), False, False, False, _reduce_lpm, _cover_lpm, LpmTable),
    MatchKind("ternary", "TERNARY", "ternary", ("value", "mask"), True, False, True, _reduce_ternary,
              _cover_ternary, TernaryTable),
)}


def reduce_match(m: Any, kind: str, width: int, what: str) -> tuple[int, int]:
    """The (a, b) of an entries.json match `{kind: value}` on a `width`-bit key."""
    if not isinstance(m, dict) or list(m) != [kind]:
        raise EntryError(f"{what}: expected {{{kind!r}: ...}}, got {m!r}")
    return MATCH_KINDS[kind].reduce(m[kind], width, what)
