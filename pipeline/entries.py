"""Table entries and multicast groups in entries.json form, checked and reduced.

An entries.json entry names its table, match fields and action by name. `parse_entry` checks
one against the pipeline (table exists, keys match the table's keys, values fit their widths,
the action is allowed there and its parameter fits) and returns an `Entry`: the same entry as
a handful of integers that every table implementation installs without further
interpretation. `Entry.key` is the entry's identity (what insert/modify/delete address), as
in P4Runtime: the match plus, for kinds with priorities (range, ternary), the priority.

Key names: a table's keys are `pipeline.model.Table.keys` (stage tables: `state` and their
field; default and leaf tables: `state`; the egress table: `egress_port` and `egress_rid`);
`x.name` and `name` spell the same key (a `standard_metadata.` prefix is accepted). The IPv4
table takes its one LPM key under any name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from pipeline.match_kinds import MATCH_KINDS, check_int, reduce_match
from pipeline.model import GROUP_WIDTH, IPV4, MAX_GROUP_ID, PORT_WIDTH, RID_WIDTH, EntryError, Pipeline

ENTRIES_VERSION = 2  # 2: mcast carries a port bitmap; groups are the applications'
PRIORITY_WIDTH = 31  # P4Runtime priorities are positive int32


@dataclass(frozen=True)
class Entry:
    """One table entry reduced to integers.

    `state` is the first exact key (the state; the egress port for the egress table; 0 for
    the IPv4 table). `kind` says how `a`/`b` match the second key (see
    `pipeline.match_kinds`); None for tables keyed by state alone. `param` is the action's
    one parameter (0 for drop).
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
        prio = self.priority if self.kind is not None and MATCH_KINDS[self.kind].prioritised else 0
        return (self.table, self.state, self.kind, self.a, self.b, prio)


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
    priority = check_int(doc.get("priority", 0), PRIORITY_WIDTH, f"table {table!r} priority")

    state, kind, a, b = 0, None, 0, 0
    if info.role == IPV4:
        if len(match) != 1:
            raise EntryError(f"table {table!r}: expected one LPM key on the IPv4 destination, got {list(match)}")
        (name, m), = match.items()
        key = info.keys[0]
        kind = key.match_kind
        a, b = reduce_match(m, kind, key.width, f"{table}.{name}")
    else:
        first, *second = info.keys
        keys = _split_keys(match, table, tuple(k.name for k in info.keys))
        what = f"{table}.{first.name}"
        state, _ = reduce_match(keys[first.name], first.match_kind, first.width, what)
        if second:
            key, = second
            kind = key.match_kind
            a, b = reduce_match(keys[key.name], kind, key.width, f"{table}.{key.name}")

    action = doc.get("action")
    if action not in info.actions:
        raise EntryError(f"table {table!r}: action {action!r} is not one of {info.actions}")
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise EntryError(f"table {table!r}: params must be an object")
    wanted = pipeline.actions[action].params
    if not wanted:
        if params:
            raise EntryError(f"table {table!r}: {action} takes no parameters, got {params}")
        param = 0
    else:
        p, = wanted
        if set(params) != {p.name}:
            raise EntryError(f"table {table!r}: action {action} takes exactly {{{p.name!r}}}, got {sorted(params)}")
        param = check_int(params[p.name], p.width, f"{table}.{action}.{p.name}")
        if action == "fwd" and info.role != IPV4 and param >= pipeline.ports_width:
            # A decision's port must have a bit in the port bitmaps: a MoldUDP64 packet
            # whose messages are decided differently is multicast and pruned by bitmap.
            raise EntryError(f"table {table!r}: fwd port {param} has no bit in this pipeline's "
                             f"{pipeline.ports_width}-bit port bitmaps")
    return Entry(table, info.role, state, kind, a, b, priority, action, param, doc)


def check_version(doc: Any) -> None:
    if not isinstance(doc, dict) or doc.get("camus_entries") != ENTRIES_VERSION:
        raise EntryError(f"entries.json must be an object with camus_entries: {ENTRIES_VERSION}")


def parse_group(doc: Any) -> tuple[int, tuple[tuple[int, int], ...]]:
    """Check one entries.json multicast group; return (id, replicas as (port, rid) pairs)."""
    if not isinstance(doc, dict):
        raise EntryError(f"a multicast group must be an object, got {doc!r}")
    gid = check_group_id(doc.get("id"))
    replicas = doc.get("replicas", [])
    if not isinstance(replicas, list):
        raise EntryError(f"multicast group {gid}: replicas must be a list")
    return gid, normalise_replicas(gid, [(r.get("port"), r.get("rid", 0)) if isinstance(r, dict) else (r, None)
                                         for r in replicas])


def check_group_id(gid: Any) -> int:
    """A multicast group id: 1..32767, the ids bmv2's P4Runtime server accepts."""
    gid = check_int(gid, GROUP_WIDTH, "multicast group id")
    if not 1 <= gid <= MAX_GROUP_ID:
        raise EntryError(f"multicast group id {gid} is not in 1..{MAX_GROUP_ID} (0 means no group; "
                         f"bmv2 reserves the ids from {MAX_GROUP_ID + 1} on)")
    return gid


def normalise_replicas(gid: int, replicas) -> tuple[tuple[int, int], ...]:
    """(port, rid) replicas checked, without duplicates, in ascending order."""
    out = []
    port_limit, rid_limit = 1 << PORT_WIDTH, 1 << RID_WIDTH
    for port, rid in replicas:
        # The common case checked inline (groups of hundreds of replicas load by the
        # ten thousand); anything else goes through check_int for its error message.
        if type(port) is int and type(rid) is int and 0 <= port < port_limit and 0 <= rid < rid_limit:
            out.append((port, rid))
        else:
            out.append((check_int(port, PORT_WIDTH, f"group {gid} replica port"),
                        check_int(rid, RID_WIDTH, f"group {gid} rid")))
    if len(set(out)) != len(out):
        raise EntryError(f"multicast group {gid}: a (port, rid) replica appears twice")
    return tuple(sorted(out))


def write(doc: dict, fh: TextIO) -> None:
    """entries.json as the compiler writes it: one entry or group per line, so that large files
    stay greppable and diffable."""
    objs = doc["table_entries"]
    write_parts(doc["camus_entries"], len(objs), lambda a, b: _lines(objs[a:b]),
                doc["multicast_groups"], fh)


def write_parts(version: int, count: int, entry_text: Callable[[int, int], str],
                groups: list[dict], fh: TextIO) -> None:
    """`write` of a document whose `count` table entries are not at hand as objects:
    `entry_text(start, stop)` gives the text of entries start..stop-1 as `write` has it
    (each `"  " + json.dumps(entry)`, joined by ",\n")."""
    fh.write('{"camus_entries": %d,\n "table_entries": [\n' % version)
    for start in range(0, count, _CHUNK):
        fh.write((",\n" if start else "") + entry_text(start, min(start + _CHUNK, count)))
    fh.write('\n ],\n "multicast_groups": [\n')
    for start in range(0, len(groups), _CHUNK):
        fh.write((",\n" if start else "") + _lines(groups[start:start + _CHUNK]))
    fh.write("\n ]}\n")


_CHUNK = 4096  # objects encoded per json.dumps call: a few MB of text at a time


def _lines(chunk: list) -> str:
    """`"  " + json.dumps(o)` per object, joined by ",\n", but the chunk goes through the C
    encoder in one call (a million entries: about three seconds instead of eight). The encoder
    separates a list's items by ", ", so each boundary between two dicts reads `}, {`; where
    that text occurs only at the boundaries (as often as there are boundaries), those become
    the line breaks. Otherwise (a string holding `}, {`, a list of dicts inside a dict) the
    chunk is written object by object."""
    text = json.dumps(chunk, check_circular=False)  # the compiler's documents are trees
    if text.count("}, {") == len(chunk) - 1 and all(type(o) is dict for o in chunk):
        return "  " + text[1:-1].replace("}, {", "},\n  {")
    return ",\n".join("  " + json.dumps(o) for o in chunk)
