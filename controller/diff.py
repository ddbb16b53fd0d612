"""The difference between two entries.json documents, as the writes that turn one into the other.

`diff(old, new)` is pure: it compares table entries by their key (table, match, priority)
and multicast groups by id, and returns `Changes` whose `steps()` lists the writes in an
order that never leaves a dangling reference or a transient overlap on a target that
refuses overlapping ranges: delete stale entries, set new and changed groups, insert new
entries, modify changed ones, delete stale groups. The compiler derives state and group
ids from what they stand for, so a subscription change yields a diff proportional to
what changed, not to the rule set.

The broker (`shim.datapath`) hands them to its target (`controller.target`); the
P4Runtime push (`controller.push`) computes the same difference against what a remote
target reports.
"""

from __future__ import annotations

import json

from p4rt.entry_key import entry_key
from pipeline.changes import Changes

__all__ = ["Changes", "apply_steps", "diff", "patch"]


def _action(entry: dict) -> tuple:
    return entry.get("action"), json.dumps(entry.get("params", {}), sort_keys=True)


def _groups(doc: dict) -> dict[int, tuple]:
    return {g["id"]: tuple(sorted((r["port"], r.get("rid", 0)) for r in g.get("replicas", ())))
            for g in doc.get("multicast_groups", ())}


def diff(old: dict, new: dict) -> Changes:
    """The writes that turn a target holding `old` into one holding `new` (entries.json)."""
    have = {entry_key(e): e for e in old.get("table_entries", ())}
    want = {entry_key(e): e for e in new.get("table_entries", ())}
    changes = Changes()
    changes.delete = [e for k, e in have.items() if k not in want]
    changes.insert = [e for k, e in want.items() if k not in have]
    changes.modify = [e for k, e in want.items() if k in have and _action(e) != _action(have[k])]
    have_g, want_g = _groups(old), _groups(new)
    changes.set_groups = {g: r for g, r in want_g.items() if have_g.get(g) != r}
    changes.delete_groups = sorted(g for g in have_g if g not in want_g)
    return changes


def patch(doc: dict, changes: Changes) -> dict:
    """The entries.json document a target holding `doc` holds once `changes` are written
    (what `diff(doc, new)` was computed to reach: `patch(old, diff(old, new))` equals `new`
    up to order)."""
    entries = {entry_key(e): e for e in doc.get("table_entries", ())}
    for e in changes.delete:
        entries.pop(entry_key(e), None)
    for e in (*changes.insert, *changes.modify):
        entries[entry_key(e)] = e
    groups = {g["id"]: g for g in doc.get("multicast_groups", ())}
    for gid, replicas in changes.set_groups.items():
        groups[gid] = {"id": gid, "replicas": [{"port": p, "rid": r} for p, r in replicas]}
    for gid in changes.delete_groups:
        groups.pop(gid, None)
    out = dict(doc)
    out["table_entries"] = list(entries.values())
    out["multicast_groups"] = [groups[g] for g in sorted(groups)]
    return out


def apply_steps(switch, changes: Changes) -> None:
    """Write `changes` to an in-process switch (`switch.dataplane.DataPlane`'s insert, modify,
    delete, set_group, delete_group and reset_cells, the last taking the step's (register,
    first cell, count) whole), in `steps()` order; its EntryError propagates."""
    for op, item in changes.steps():
        if op == "set_group":
            switch.set_group(*item)
        elif op == "delete_group":
            switch.delete_group(item)
        else:
            getattr(switch, op)(item)
