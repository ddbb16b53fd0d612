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

State (IR 4, docs/pipeline-ir.md "State"): bind tables are keyed by `ctx` alone, the decide
table by `ctx` and `regions` (both exact); `bind` and `decide` take several parameters,
which `Entry.params` holds in the action's order. A document for a pipeline with state is
`camus_entries` 3 and lists `state_instances`, where each rule's instances live
(`parse_instance`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from pipeline.match_kinds import MATCH_KINDS, check_int, reduce_match
from pipeline.model import (GROUP_WIDTH, IPV4, MAX_BOUNDARIES, MAX_GROUP_ID, PORT_WIDTH,
                            RID_WIDTH, EntryError, Pipeline)

ENTRIES_VERSION = 2  # 2: mcast carries a port bitmap; groups are the applications'
STATE_ENTRIES_VERSION = 3  # 3: a pipeline with state (state tables, `state_instances`)
ENTRIES_VERSIONS = (ENTRIES_VERSION, STATE_ENTRIES_VERSION)
PRIORITY_WIDTH = 31  # P4Runtime priorities are positive int32


@dataclass(frozen=True)
class Entry:
    """One table entry reduced to integers.

    `state` is the first exact key (the state; the egress port for the egress table; 0 for
    the IPv4 table; the ctx for state tables). `kind` says how `a`/`b` match the second key
    (see `pipeline.match_kinds`; the decide table's regions are exact); None for tables keyed
    by state alone. `param` is the action's first parameter (0 for drop); `params` every
    parameter in the action's order, for the actions that take several (`bind`, `decide`),
    else ().
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
    params: tuple[int, ...] = ()

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
    values: tuple[int, ...] = ()
    if not wanted:
        if params:
            raise EntryError(f"table {table!r}: {action} takes no parameters, got {params}")
        param = 0
    elif len(wanted) > 1:
        if set(params) != {p.name for p in wanted}:
            raise EntryError(f"table {table!r}: action {action} takes exactly "
                             f"{sorted(p.name for p in wanted)}, got {sorted(params)}")
        values = tuple(check_int(params[p.name], p.width, f"{table}.{action}.{p.name}")
                       for p in wanted)
        param = values[0]
        if action == "bind":
            _check_bind(pipeline, table, dict(zip((p.name for p in wanted), values)))
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
        if action == "stateful" and param == 0:
            raise EntryError(f"table {table!r}: stateful(ctx): ctx 0 is never a context")
    return Entry(table, info.role, state, kind, a, b, priority, action, param, doc, values)


def _check_bind(pipeline: Pipeline, table: str, p: dict[str, int]) -> None:
    """A bind entry's cells lie in its register and its boundaries are in order."""
    _, i, _ = pipeline.state_var_of(table)
    var = pipeline.application_of(table).state.vars[i]
    if p["base"] + var.buckets > var.slots:
        raise EntryError(f"table {table!r}: base {p['base']} + {var.buckets} buckets is past "
                         f"the state's {var.slots} slots")
    if p["bounds"] > MAX_BOUNDARIES:
        raise EntryError(f"table {table!r}: {p['bounds']} boundaries, at most {MAX_BOUNDARIES}")
    used = [(p[f"t{j}"], p["strict"] >> j & 1) for j in range(p["bounds"])]
    if used != sorted(set(used)):
        raise EntryError(f"table {table!r}: boundaries (t, strict) must ascend: {used}")
    if any(p[f"t{j}"] or p["strict"] >> j & 1 for j in range(p["bounds"], MAX_BOUNDARIES)):
        raise EntryError(f"table {table!r}: thresholds and strict bits past `bounds` are 0")


@dataclass(frozen=True)
class Instance:
    """Where one rule's instances of one state live: cells base..base+buckets-1 of the
    state's bank `bank` register (entries.json `state_instances`)."""

    application: str
    state: str
    bank: int
    base: int
    buckets: int
    rule: str  # the rule's text
    line: int  # its line in its rules file (0: none)


def parse_instance(pipeline: Pipeline, doc: Any) -> Instance:
    """Check one `state_instances` item against the pipeline."""
    if not isinstance(doc, dict):
        raise EntryError(f"a state instance must be an object, got {doc!r}")
    app = next((a for a in pipeline.applications if a.name == doc.get("application")), None)
    if app is None or app.state is None:
        raise EntryError(f"state instance: no application with state named "
                         f"{doc.get('application')!r}")
    var = next((v for v in app.state.vars if v.name == doc.get("state")), None)
    if var is None:
        raise EntryError(f"state instance: application {app.name!r} declares no state "
                         f"{doc.get('state')!r}")
    bank, base = doc.get("bank"), doc.get("base")
    if type(bank) is not int or not 0 <= bank < var.banks:
        raise EntryError(f"state instance of {var.name}: bank {bank!r} not in 0..{var.banks - 1}")
    if type(base) is not int or not 0 <= base or base + var.buckets > var.slots:
        raise EntryError(f"state instance of {var.name}: base {base!r} + {var.buckets} buckets "
                         f"is not within its {var.slots} slots")
    if doc.get("buckets", var.buckets) != var.buckets:
        raise EntryError(f"state instance of {var.name}: {var.name} has {var.buckets} buckets")
    rule, line = doc.get("rule", ""), doc.get("line", 0)
    if not isinstance(rule, str) or type(line) is not int:
        raise EntryError(f"state instance of {var.name}: rule is a text and line a number")
    return Instance(app.name, var.name, bank, base, var.buckets, rule, line)


def check_version(doc: Any, pipeline: Pipeline | None = None) -> None:
    """An entries.json document's version: 2, or 3 for a pipeline with state (when the
    pipeline is given, the one it needs)."""
    want = ENTRIES_VERSIONS if pipeline is None else (entries_version(pipeline),)
    if not isinstance(doc, dict) or doc.get("camus_entries") not in want:
        raise EntryError(f"entries.json must be an object with camus_entries: "
                         f"{' or '.join(map(str, want))}")


def entries_version(pipeline: Pipeline) -> int:
    """The camus_entries of documents for `pipeline`: 3 when it has state, else 2."""
    return STATE_ENTRIES_VERSION if any(a.state for a in pipeline.applications) \
        else ENTRIES_VERSION


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
                doc["multicast_groups"], fh, doc.get("state_instances"))


def write_parts(version: int, count: int, entry_text: Callable[[int, int], str],
                groups: list[dict], fh: TextIO, instances: list[dict] | None = None) -> None:
    """`write` of a document whose `count` table entries are not at hand as objects:
    `entry_text(start, stop)` gives the text of entries start..stop-1 as `write` has it
    (each `"  " + json.dumps(entry)`, joined by ",\n"). `instances`: the
    `state_instances` of a document for a pipeline with state (None: not written)."""
    fh.write('{"camus_entries": %d,\n "table_entries": [\n' % version)
    for start in range(0, count, _CHUNK):
        fh.write((",\n" if start else "") + entry_text(start, min(start + _CHUNK, count)))
    fh.write('\n ],\n "multicast_groups": [\n')
    for start in range(0, len(groups), _CHUNK):
        fh.write((",\n" if start else "") + _lines(groups[start:start + _CHUNK]))
    if instances is not None:
        fh.write('\n ],\n "state_instances": [\n')
        for start in range(0, len(instances), _CHUNK):
            fh.write((",\n" if start else "") + _lines(instances[start:start + _CHUNK]))
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
