"""What identifies a table entry on a target: the one key every diff and lookup of entries uses.

P4Runtime identifies an entry by its table, its match and its priority (the action is what a
MODIFY changes). The key is taken on the entries.json form, with the match normalised: key
order does not matter and a `[lo, hi]` list equals a `(lo, hi)` tuple. Don't-care keys are not
normalised here: compare entries that went through one encoding (compiler output on both
sides, as the broker does, or both round-tripped through `p4rt.entries`, as
`controller.push` does). No protobuf in here, so the broker's diff path stays light.
"""

from __future__ import annotations


def entry_key(entry: dict) -> tuple:
    """(table, ((match field, kind, value), ...) sorted, priority) of an entries.json entry."""
    match = tuple(sorted((name, kind, tuple(value) if isinstance(value, list) else value)
                         for name, m in entry.get("match", {}).items() for kind, value in m.items()))
    return entry["table"], match, entry.get("priority", 0)
