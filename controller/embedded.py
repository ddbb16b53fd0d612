"""The in-process software switch (`switch.dataplane`) as a `controller.target.Target`.

The first target, and the fast one: frames go to the switch's packed call
(`DataPlane.process_packed`: one call per send with the compiled implementation) and the
copies are reported inline, before `send` returns, with each copy's input frame index, so
the data path can match copies to the records it sent instead of reassembling them.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from controller.diff import Changes, apply_steps
from controller.target import Emitted, Target, TargetError
from switch import dataplane
from pipeline.interpreter import unpack_cell
from pipeline.model import EntryError


# Diffs of at least this many writes are staged as a new switch (see `EmbeddedTarget.stage`):
# below it, writing in place costs the event loop under about 10 ms.
REBUILD_AT = 1000


class EmbeddedTarget(Target):
    """`switch.dataplane.load(..., impl=impl)`, reloaded whole by `load`."""

    def __init__(self, impl: str = "native") -> None:
        super().__init__()
        self.impl = impl
        self.switch: dataplane.DataPlane | None = None

    def load(self, pipeline: dict, entries: dict) -> None:
        self.switch = dataplane.load(pipeline, entries, impl=self.impl)

    def apply(self, changes: Changes) -> None:
        try:
            apply_steps(self.switch, changes)
        except EntryError as exc:
            raise TargetError(str(exc)) from exc

    def stage(self, pipeline: dict, entries: dict, changes: Changes):
        """A large diff is staged as a whole new switch, built on the caller's (worker)
        thread and swapped in by the commit: writing 365,000 entries one by one takes the
        sending thread seconds, a swap nothing. The new switch's counters start at zero, as
        after `load`; its registers (IR 4) take the old switch's cells of every instance
        range the entries keep (`state_instances`), copied by the commit, so that no rule's
        state is lost to a large change of others. A small diff is applied in place."""
        if len(changes) < REBUILD_AT:
            return super().stage(pipeline, entries, changes)
        doc = entries() if callable(entries) else entries
        try:
            fresh = dataplane.load(pipeline, doc, impl=self.impl)
        except EntryError as exc:
            raise TargetError(str(exc)) from exc
        kept = doc.get("state_instances")
        if not kept:
            return partial(setattr, self, "switch", fresh)
        return partial(self._swap, fresh, kept, changes.reset_cells)

    def _swap(self, fresh: dataplane.DataPlane, instances: list[dict],
              resets: list[tuple[str, int, int]]) -> None:
        """Carry the old switch's instance cells over to `fresh` (but those the change
        resets: new rules' empty instances), then make it the switch."""
        registers = {(v.name, b): r for app in fresh.pipeline.applications if app.state
                     for v in app.state.vars for b, r in enumerate(v.registers)}
        reset = {(r, i) for r, first, count in resets for i in range(first, first + count)}
        for inst in instances:
            register = registers[(inst["state"], inst["bank"])]
            for i in range(inst["base"], inst["base"] + inst["buckets"]):
                # A cell is packed (tag, n, s) the same way in both switches: the pipeline's
                # registers are declared alike, so the integer moves as it is.
                cell = self.switch.read_cell(register, i)
                if cell and (register, i) not in reset:
                    fresh.write_cell(register, i, cell)
        self.switch = fresh

    def entries(self) -> list[dict]:
        return self.switch.entries()

    def read_cells(self, register: str, first: int, count: int) -> list[tuple[int, int, int]]:
        try:
            var = self.switch.register_var(register)
            return [unpack_cell(var, self.switch.read_cell(register, i))
                    for i in range(first, first + count)]
        except (AttributeError, EntryError) as exc:
            raise TargetError(f"register {register!r}: {exc}") from exc

    def send(self, ingress_port: int, buf: bytes, lengths: bytes, token: Any) -> None:
        self.receiver(token, Emitted(*self.switch.process_packed(buf, lengths, ingress_port)))
