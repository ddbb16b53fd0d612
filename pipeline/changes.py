"""The writes that turn a target holding one entries.json into one holding another.

Two producers make them: `controller.diff.diff` compares two documents, and the incremental
compiler (`compiler.incremental`) knows them from the change it applied. Both hand them to a
target, which applies `steps()` in order; the class sits down here because compiler may not
import controller.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Changes:
    delete: list[dict] = field(default_factory=list)
    insert: list[dict] = field(default_factory=list)
    modify: list[dict] = field(default_factory=list)
    set_groups: dict[int, tuple] = field(default_factory=dict)  # id -> ((port, rid), ...)
    delete_groups: list[int] = field(default_factory=list)
    # State (IR 4): register cells to set to zero, as (register, first cell, count): the
    # cells of instances a new rule takes over (docs/pipeline-ir.md, "State").
    reset_cells: list[tuple[str, int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return (len(self.delete) + len(self.insert) + len(self.modify) + len(self.set_groups)
                + len(self.delete_groups) + len(self.reset_cells))

    def steps(self) -> list[tuple[str, object]]:
        """("delete"|"insert"|"modify", entry), ("set_group", (id, replicas)), ("delete_group", id),
        ("reset_cells", (register, first, count)), in an order that never leaves a dangling
        reference or a transient overlap: delete stale entries, set new and changed groups,
        zero the cells new instances take, insert new entries, modify changed ones, delete
        stale groups."""
        out: list[tuple[str, object]] = [("delete", e) for e in self.delete]
        out += [("set_group", (gid, reps)) for gid, reps in sorted(self.set_groups.items())]
        out += [("reset_cells", r) for r in self.reset_cells]
        out += [("insert", e) for e in self.insert]
        out += [("modify", e) for e in self.modify]
        out += [("delete_group", gid) for gid in self.delete_groups]
        return out
