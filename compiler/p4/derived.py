"""Entries the P4 program needs beyond entries.json, derived from it: membership and all-ports.

When the subscription messages of one MoldUDP64 packet are decided differently (GOOGL to
port 1, MSFT to the group of ports 2 and 3), v1model has no multicast group for the union
of their port sets, and a replica cannot ask in egress which groups it belongs to. So the
program multicasts such a packet to one reserved group, `ALL_PORTS_GROUP` (compiler/tables.py
never assigns it), whose replicas are every `(port, rid)` that any decision of the
application can select; and egress, per slot, asks that slot's membership table whether the
copy's `(egress_port, egress_rid)` is a replica of the slot's group (docs/p4.md, "Several
messages per packet"). One table per slot because p4c allows one apply per table per
control; the slot tables hold identical entries.

`entries(pipeline, entries, slots)` computes both from entries.json alone, so entries.json
and the pipeline IR stay what the software switch and the controller already consume. A
controller writing to a P4 target writes `combined(...)`: entries.json plus these; or
`for_target(pipeline, entries, p4info)`, which reads the slot count from the membership
tables of the P4Info the target reports (p4c's for bmv2) and leaves entries.json as it is
for a target without them (the software switch). They change whenever the groups or fwd
ports of the rules change, so a controller diffs them with the rest (the all-ports group is
then modified in place).
"""

from __future__ import annotations

from compiler.p4.layout import AppLayout
from compiler.tables import ALL_PORTS_GROUP
from p4rt.names import DEFAULT_SLOTS, EGRESS, MEMBER_ACTION
from pipeline.entries import ENTRIES_VERSION
from pipeline.model import Application, Pipeline


def decision_tables(app: Application) -> set[str]:
    """The tables whose fwd/mcast entries decide an application's messages."""
    return {t for st in app.stages for t in (st.table, st.default_table)} | {app.leaf_table}


def entries(pipeline: Pipeline, entries_doc: dict, slots: int = DEFAULT_SLOTS) -> dict:
    """Membership entries and the all-ports group for every MoldUDP64 application, as entries.json."""
    groups = {g["id"]: g["replicas"] for g in entries_doc.get("multicast_groups", [])}
    if ALL_PORTS_GROUP in groups:
        raise ValueError(f"multicast group {ALL_PORTS_GROUP} is reserved for the P4 program's "
                         f"all-ports group; recompile the rules with this camus")
    table_entries: list[dict] = []
    all_ports: set[tuple[int, int]] = set()
    for app in pipeline.applications:
        if app.framing != "moldudp64":
            continue
        layout = AppLayout(app, slots)
        tables = decision_tables(app)
        used = set()
        for e in entries_doc.get("table_entries", []):
            if e["table"] not in tables:
                continue
            if e["action"] == "fwd":
                all_ports.add((e["params"]["port"], 0))  # a fwd decision is the replica (port, 0)
            elif e["action"] == "mcast":
                used.add(e["params"]["group"])
        # A group that does not exist selects no port (as in the software switch): no entries.
        members = sorted({(g, r["port"], r.get("rid", 0)) for g in used & groups.keys() for r in groups[g]})
        all_ports |= {(port, rid) for _, port, rid in members}
        for slot in range(layout.slots):
            table_entries += [{"table": layout.member_table(slot),
                               "match": {"group": {"exact": g}, "egress_port": {"exact": port},
                                         "egress_rid": {"exact": rid}},
                               "action": MEMBER_ACTION, "params": {}} for g, port, rid in members]
    multicast = []
    if all_ports:
        multicast.append({"id": ALL_PORTS_GROUP,
                          "replicas": [{"port": p, "rid": r} for p, r in sorted(all_ports)]})
    return {"camus_entries": ENTRIES_VERSION, "table_entries": table_entries,
            "multicast_groups": multicast}


def combined(pipeline: Pipeline, entries_doc: dict, slots: int = DEFAULT_SLOTS) -> dict:
    """entries.json plus the derived entries: what a P4 target running the program must hold."""
    extra = entries(pipeline, entries_doc, slots)
    return {"camus_entries": ENTRIES_VERSION,
            "table_entries": list(entries_doc.get("table_entries", [])) + extra["table_entries"],
            "multicast_groups": list(entries_doc.get("multicast_groups", [])) + extra["multicast_groups"]}


def slots_of(pipeline: Pipeline, p4info) -> int:
    """How many membership tables per MoldUDP64 application a P4Info has (0: none)."""
    names = {t.preamble.name for t in p4info.tables}
    counts = set()
    for app in pipeline.applications:
        if app.framing == "moldudp64":
            layout = AppLayout(app, 1)
            n = 0
            while f"{EGRESS}.{layout.member_table(n)}" in names:
                n += 1
            counts.add(n)
    if len(counts) > 1:
        raise ValueError(f"the P4Info has different numbers of membership tables per application: {counts}")
    return counts.pop() if counts else 0


def for_target(pipeline: Pipeline, entries_doc: dict, p4info) -> dict:
    """What a P4Runtime target reporting `p4info` must hold: `combined` for the P4 program,
    entries.json alone for a target without membership tables (the software switch)."""
    slots = slots_of(pipeline, p4info)
    return combined(pipeline, entries_doc, slots) if slots else entries_doc
