"""Slicing the decision diagram into per-field tables, a leaf table and multicast groups.

Each stage (field) becomes a pair of tables: `table`, keyed `(state, field value)`, and
`default_table`, keyed `state` alone, consulted on a miss. Per state, the successor that
covers the most of the field's intervals becomes the default entry, so only the exceptions
take match entries: for an exact stage those are the constants themselves, for a range stage
the intervals, for an lpm stage the aligned prefixes that tile them. An entry whose
successor has nothing left to test carries the final action (fwd or mcast) itself, so the
leaf table only ever holds the start state, when every rule is unconditionally true.

A decision for several ports is `mcast(ports)`: a bitmap with bit p set for port p. It needs
no multicast group of its own: the application has one group reaching every port its rules
name, and egress keeps the copies whose bit is set (port-bitmap egress pruning; ARCHITECTURE,
"Beyond the paper"). However many port sets the rules make, the application needs one group.

Ids are derived from meaning, not from discovery order: a state's id hashes the canonical
text of its residual rule set, the group's id the application's name. Recompiling after a
small rule change therefore changes few entries (see ARCHITECTURE, "Compiling" step 5).
State ids are as wide as the number of states needs (`state_bits`), never a fixed ceiling.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from compiler.diagram import Diagram
from pipeline.match_kinds import MATCH_KINDS
from pipeline.model import MAX_GROUP_ID, MAX_STATE_WIDTH, Stage

# What a static pipeline (one fixed for a spec, whatever the rules: the broker's) uses; a
# compile sized to its rules takes `state_bits(n)` instead.
STATIC_STATE_BITS = 32


def state_bits(states: int, static: bool = False) -> int:
    """Bits for `states` hashed state ids: a whole number of bytes leaving at least 256 ids
    per state (so that hashes rarely collide and the ids of a small change stay put); a static
    pipeline keeps STATIC_STATE_BITS unless even that is too few."""
    bits = -(-(max(states, 1).bit_length() + 8) // 8) * 8
    if static:
        bits = max(bits, STATIC_STATE_BITS)
    if bits > MAX_STATE_WIDTH:
        raise OverflowError(f"{states} states need {bits}-bit ids, more than the "
                            f"{MAX_STATE_WIDTH} bits any target here holds")
    return bits


def group_id(application: str) -> int:
    """An application's multicast group id, in 1..32767 (bmv2 refuses the upper half),
    derived from its name so that it never changes with the rules."""
    h = int.from_bytes(hashlib.blake2b(application.encode(), digest_size=8).digest(), "big")
    return 1 + h % MAX_GROUP_ID


def text_hash(text: str, mask: int) -> int:
    """Where an id search starts for a key of this canonical text."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") & mask


def stable_ids(keys: dict[object, str], bits: int, reserved: dict[object, int]) -> dict:
    """Nonzero ids of `bits` bits from a hash of each key's text; collisions probe upward.

    Keys are placed in (hash, text) order so that the result depends only on the set of
    texts, never on the order they were found in.
    """
    mask = (1 << bits) - 1
    taken = set(reserved.values()) | {0}
    out = dict(reserved)
    hashed = sorted((text_hash(t, mask), t, k) for k, t in keys.items() if k not in reserved)
    if len(hashed) + len(taken) > mask:
        raise OverflowError(f"more than {mask} ids needed in a {bits}-bit space")
    for h, _, k in hashed:
        while h in taken:
            h = (h + 1) & mask
        taken.add(h)
        out[k] = h
    return out


def state_ids(d: Diagram, reachable: list[int], port_texts: dict | None = None,
              bits: int | None = None) -> dict[int, int]:
    """Every reachable state's id; the start state is 0 (and, being fixed, is never hashed)."""
    texts = {} if port_texts is None else port_texts
    bits = state_bits(len(reachable)) if bits is None else bits
    return stable_ids({s: d.describe(s, texts) for s in reachable if s != d.root}, bits,
                      {d.root: 0})


def bitmap(ports: frozenset[int]) -> int:
    """The `mcast` parameter for a port set: bit p set for port p."""
    out = 0
    for p in ports:
        out |= 1 << p
    return out


def emit(d: Diagram, stages: list[Stage], leaf_table: str,
         reachable: list[int] | None = None, group: int = 1,
         state_width: int | None = None, ctx_of: dict[int, int] | None = None,
         real_ports=None) -> tuple[list[dict], list[dict]]:
    """(table entries, multicast groups) in the entries.json form.

    The one group (id `group`) reaches every port a decision names, each as the replica
    `{"port": p, "rid": 0}`; there is none when no rule names a port. `state_width` is the
    state ids' width (default: `state_bits` of the reachable states). With state
    (`compiler.stateful`): `ctx_of` maps each leaf that decides `stateful(ctx)` to its
    context id, and `real_ports(leaf ports)` gives the ports a leaf may send to.
    """
    reachable = d.reachable() if reachable is None else reachable
    port_texts: dict[frozenset, tuple[list[int], str]] = {}
    ids = state_ids(d, reachable, port_texts, state_width)
    entries: list[dict] = []
    contents = d.contents
    dead = {s for s in reachable if contents[s] == (frozenset(), frozenset())}
    leaves = {s: contents[s][0] for s in reachable if not contents[s][1] and contents[s][0]}
    bitmaps: dict[frozenset, int] = {}

    def action(t: int) -> tuple[str, dict]:
        return decision(t, ids, leaves, bitmaps, ctx_of)

    # States in id order (the start state, 0, first): the document depends on the rule set,
    # never on the order rules were given or states found (an incremental compile, which
    # finds them in another order, writes the same file).
    for s in sorted(reachable, key=ids.__getitem__):
        split = d.splits.get(s)
        if split is not None:
            entries += state_entries(stages[split.stage], ids[s], split.intervals, dead, action,
                                     ids)
    if d.root in leaves:  # only reachable as the start state (every rule is always true)
        name, params = action(d.root)
        entries.append({"table": leaf_table, "match": {"state": {"exact": 0}},
                        "action": name, "params": params})
    # Every port any reachable decision names (fwd ones too: the P4 program multicasts a
    # MoldUDP64 packet whose messages were decided differently through this group).
    sets = leaves.values() if real_ports is None else map(real_ports, leaves.values())
    used = sorted(frozenset().union(*sets)) if leaves else []
    groups = [{"id": group, "replicas": [{"port": p, "rid": 0} for p in used]}] if used else []
    return entries, groups


def decision(t, ids: dict, leaves: dict, bitmaps: dict,
             ctx_of: dict | None = None) -> tuple[str, dict]:
    """The action of an entry that leads to state `t`. An entry that leads to a leaf decides
    the message right there: the leaf's action is folded into it, so leaves need no entries
    of their own (about half of all entries). `bitmaps` caches `bitmap(ports)` per port set.
    A leaf in `ctx_of` (one that needs state) decides `stateful(ctx)`."""
    ports = leaves.get(t)
    if ports is None:
        return "set_state", {"state": ids[t]}
    if ctx_of and t in ctx_of:
        return "stateful", {"ctx": ctx_of[t]}
    if len(ports) == 1:
        return "fwd", {"port": next(iter(ports))}
    bits = bitmaps.get(ports)
    if bits is None:
        bits = bitmaps[ports] = bitmap(ports)
    return "mcast", {"ports": bits}


def state_entries(stage: Stage, sid: int, intervals: list[tuple[int, int, object]], dead,
                  action, ids) -> list[dict]:
    """The entries of one state (id `sid`) whose split is `intervals` (lo, hi, successor):
    its default entry and one entry per interval (or per prefix) not going the default way.
    `action(t)` is the action leading to successor `t`, `ids[t]` its id."""
    default = default_successor(stage, intervals, dead, ids)
    entries = []
    # A state left unchanged by a miss passes every later stage and misses the leaf
    # table: exactly what the dead state does, so a default to it needs no entry.
    if default not in dead:
        entries.append(default_entry(stage, sid, action(default)))
    for lo, hi, t in intervals:
        if t != default:
            entries += interval_entries(stage, sid, lo, hi, action(t))
    return entries


def default_successor(stage: Stage, intervals: list[tuple[int, int, object]], dead, ids):
    return _default_successor(intervals, MATCH_KINDS[stage.match_kind].per_value, dead, ids)


def default_entry(stage: Stage, sid: int, action: tuple[str, dict]) -> dict:
    name, params = action
    return {"table": stage.default_table, "match": {"state": {"exact": sid}},
            "action": name, "params": params}


def interval_entries(stage: Stage, sid: int, lo: int, hi: int,
                     action: tuple[str, dict]) -> list[dict]:
    """The entries sending values lo..hi of state `sid` the way of `action`."""
    name, params = action
    field, out = stage.field.name, []
    for match, priority in MATCH_KINDS[stage.match_kind].cover(lo, hi, stage.field.width):
        e = {"table": stage.table, "match": {"state": {"exact": sid}, field: match},
             "action": name, "params": params}
        if priority:
            e["priority"] = priority
        out.append(e)
    return out


def _default_successor(intervals: list[tuple[int, int, object]], per_value: bool, dead,
                       ids) -> object:
    """The successor a state's default entry leads to; ties go to the smallest id, so the
    choice depends on meaning only."""
    count = Counter(t for _, _, t in intervals)
    span: Counter = Counter()
    for lo, hi, t in intervals:
        span[t] += hi - lo + 1
    if per_value:
        # Every value that is not a constant leads to one place, which therefore spans all
        # but (number of constants) values: the most. Everything else is a constant, so the
        # exact entries are exactly the constants.
        return max(span, key=lambda t: (span[t], -ids[t]))
    # Range and lpm entries cost one per interval (or per prefix): save the most common one.
    # The dead state as default also saves the default entry itself.
    return max(count, key=lambda t: (count[t] + (t in dead), span[t], -ids[t]))
