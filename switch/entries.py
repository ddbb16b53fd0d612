"""Table entries and multicast groups in entries.json form, checked and normalised.

An entries.json entry names its table, match fields and action by name. `parse_entry` checks
one against the pipeline (table exists, keys match the table's role, values fit their widths,
the action is allowed there) and returns an `Entry`: the same entry as a handful of integers
that both data-plane implementations install without further interpretation. `Entry.key` is
the entry's identity (what insert/modify/delete address), as in P4Runtime: the match plus,
for range and ternary keys, the priority.

Key names: stage tables take `state` and their field; default and leaf tables `state`; the
IPv4 table one LPM key (any name, conventionally `ipv4.dst_addr`); the egress table
`egress_port` and `egress_rid` (a `standard_metadata.` style prefix is accepted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from switch.ir import (
    DEFAULT,
    EGRESS,
    IPV4,
    LEAF,
    PORT_WIDTH,
    RID_WIDTH,
    ROLE_ACTIONS,
    STAGE,
    Pipeline,
)

GROUP_WIDTH = 32
UDP_PORT_WIDTH = 16
PRIORITY_WIDTH = 31  # P4Runtime priorities are positive int32


class EntryError(ValueError):
    """An entry or multicast group that the pipeline cannot hold (bad name, key, value, action)."""


@dataclass(frozen=True)
class Entry:
    """One table entry reduced to integers.

    `state` is the first exact key (the state; the egress port for the egress table; 0 for
    the IPv4 table). `kind` says how `a`/`b` match the second key: exact (`a` = value),
    range (`a`..`b` inclusive), lpm (`a` = masked value, `b` = prefix length), ternary
    (`a` = masked value, `b` = mask); None for tables keyed by state alone. `param` is the
    action's one parameter (0 for drop).
    """

    table: str
    role: str
    state: int
    kind: str | None
    a: int
    b: int
    priority: int
    action: str
    param: int
    source: dict = field(compare=False, hash=False, repr=False)

    @property
    def key(self) -> tuple:
        prio = self.priority if self.kind in ("range", "ternary") else 0
        return (self.table, self.state, self.kind, self.a, self.b, prio)


def _int(value: Any, width: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise EntryError(f"{what}: expected an integer, got {value!r}")
    if not 0 <= value < (1 << width):
        raise EntryError(f"{what}: {value} does not fit in {width} bits")
    return value


def _pair(value: Any, what: str) -> tuple[Any, Any]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise EntryError(f"{what}: expected a pair [a, b], got {value!r}")
    return value[0], value[1]


def _single_match(m: Any, kind: str, what: str) -> Any:
    if not isinstance(m, dict) or list(m) != [kind]:
        raise EntryError(f"{what}: expected {{{kind!r}: ...}}, got {m!r}")
    return m[kind]


def _field_key(m: Any, kind: str, width: int, what: str) -> tuple[int, int]:
    """The (a, b) integers of a field key of the given match kind."""
    raw = _single_match(m, kind, what)
    if kind == "exact":
        return _int(raw, width, what), 0
    if kind == "range":
        lo, hi = (_int(x, width, what) for x in _pair(raw, what))
        if lo > hi:
            raise EntryError(f"{what}: empty range [{lo}, {hi}]")
        return lo, hi
    if kind == "lpm":
        value, plen = _pair(raw, what)
        value, plen = _int(value, width, what), _int(plen, 8, what)
        if plen > width:
            raise EntryError(f"{what}: prefix length {plen} exceeds the {width}-bit field")
        mask = ((1 << plen) - 1) << (width - plen)
        return value & mask, plen
    value, mask = (_int(x, width, what) for x in _pair(raw, what))
    return value & mask, mask


def _split_keys(match: dict, table: str, wanted: tuple[str, ...]) -> dict[str, Any]:
    """Map each wanted key name to its match; `x.name` and `name` spell the same key."""
    last = {w.rsplit(".", 1)[-1]: w for w in wanted}
    found: dict[str, Any] = {}
    for name, m in match.items():
        w = name if name in wanted else last.get(name.rsplit(".", 1)[-1])
        if w is None or w in found:
            raise EntryError(f"table {table!r}: unexpected match key {name!r} (keys: {', '.join(wanted)})")
        found[w] = m
    missing = [w for w in wanted if w not in found]
    if missing:
        raise EntryError(f"table {table!r}: missing match key(s) {missing}")
    return found


def parse_entry(pipeline: Pipeline, doc: Any) -> Entry:
    """Check one entries.json table entry against the pipeline and reduce it to an Entry."""
    if not isinstance(doc, dict):
        raise EntryError(f"a table entry must be an object, got {doc!r}")
    table = doc.get("table")
    info = pipeline.tables.get(table) if isinstance(table, str) else None
    if info is None:
        raise EntryError(f"no table named {table!r}")
    match = doc.get("match", {})
    if not isinstance(match, dict):
        raise EntryError(f"table {table!r}: match must be an object")
    priority = doc.get("priority", 0)
    priority = _int(priority, PRIORITY_WIDTH, f"table {table!r} priority")

    state, kind, a, b = 0, None, 0, 0
    if info.role == STAGE:
        fname = info.field.name
        keys = _split_keys(match, table, ("state", fname))
        state = _int(_single_match(keys["state"], "exact", f"{table}.state"), info.state_width, f"{table}.state")
        kind = info.match_kind
        a, b = _field_key(keys[fname], kind, info.field.width, f"{table}.{fname}")
    elif info.role in (DEFAULT, LEAF):
        keys = _split_keys(match, table, ("state",))
        state = _int(_single_match(keys["state"], "exact", f"{table}.state"), info.state_width, f"{table}.state")
    elif info.role == IPV4:
        if len(match) != 1:
            raise EntryError(f"table {table!r}: expected one LPM key on the IPv4 destination, got {list(match)}")
        (name, m), = match.items()
        kind = "lpm"
        a, b = _field_key(m, "lpm", 32, f"{table}.{name}")
    elif info.role == EGRESS:
        keys = _split_keys(match, table, ("egress_port", "egress_rid"))
        state = _int(_single_match(keys["egress_port"], "exact", f"{table}.egress_port"), PORT_WIDTH, table)
        kind = "exact"
        a = _int(_single_match(keys["egress_rid"], "exact", f"{table}.egress_rid"), RID_WIDTH, table)

    action = doc.get("action")
    if action not in ROLE_ACTIONS[info.role]:
        raise EntryError(f"table {table!r}: action {action!r} is not one of {ROLE_ACTIONS[info.role]}")
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise EntryError(f"table {table!r}: params must be an object")
    expected = {"set_state": ("state", pipeline.state_width),
                "fwd": ("port", PORT_WIDTH), "mcast": ("group", GROUP_WIDTH),
                "set_udp_port": ("port", UDP_PORT_WIDTH), "drop": None}[action]
    if expected is None:
        if params:
            raise EntryError(f"table {table!r}: drop takes no parameters, got {params}")
        param = 0
    else:
        pname, width = expected
        if set(params) != {pname}:
            raise EntryError(f"table {table!r}: action {action} takes exactly {{{pname!r}}}, got {sorted(params)}")
        param = _int(params[pname], width, f"{table}.{action}.{pname}")
    return Entry(table, info.role, state, kind, a, b, priority, action, param, doc)


def parse_group(doc: Any) -> tuple[int, tuple[tuple[int, int], ...]]:
    """Check one entries.json multicast group; return (id, replicas as (port, rid) pairs)."""
    if not isinstance(doc, dict):
        raise EntryError(f"a multicast group must be an object, got {doc!r}")
    gid = _int(doc.get("id"), GROUP_WIDTH, "multicast group id")
    replicas = doc.get("replicas", [])
    if not isinstance(replicas, list):
        raise EntryError(f"multicast group {gid}: replicas must be a list")
    return gid, normalise_replicas(gid, [(r.get("port"), r.get("rid", 0)) if isinstance(r, dict) else (r, None)
                                         for r in replicas])


def normalise_replicas(gid: int, replicas) -> tuple[tuple[int, int], ...]:
    out = []
    port_limit, rid_limit = 1 << PORT_WIDTH, 1 << RID_WIDTH
    for port, rid in replicas:
        # The common case checked inline (groups of hundreds of replicas load by the
        # ten thousand); anything else goes through _int for its error message.
        if type(port) is int and type(rid) is int and 0 <= port < port_limit and 0 <= rid < rid_limit:
            out.append((port, rid))
        else:
            out.append((_int(port, PORT_WIDTH, f"group {gid} replica port"),
                        _int(rid, RID_WIDTH, f"group {gid} rid")))
    if len(set(out)) != len(out):
        raise EntryError(f"multicast group {gid}: a (port, rid) replica appears twice")
    return tuple(sorted(out))
