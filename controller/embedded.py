"""The in-process software switch (`switch.dataplane`) as a `controller.target.Target`.

The first target, and the fast one: frames go to the switch's packed call
(`DataPlane.process_packed`: one call per send with the compiled implementation) and the
copies are reported inline, before `send` returns, with each copy's input frame index, so
the data path can match copies to the records it sent instead of reassembling them.
"""

from __future__ import annotations

from typing import Any

from controller.diff import Changes
from controller.target import Emitted, Target, TargetError
from switch import dataplane
from pipeline.model import EntryError


class EmbeddedTarget(Target):
    """`switch.dataplane.load(..., impl=impl)`, reloaded whole by `load`."""

    def __init__(self, impl: str = "native") -> None:
        super().__init__()
        self.impl = impl
        self.switch: dataplane.DataPlane | None = None

    def load(self, pipeline: dict, entries: dict) -> None:
        self.switch = dataplane.load(pipeline, entries, impl=self.impl)

    def apply(self, changes: Changes) -> None:
        sw = self.switch
        try:
            for op, item in changes.steps():
                if op == "set_group":
                    sw.set_group(*item)
                elif op == "delete_group":
                    sw.delete_group(item)
                else:
                    getattr(sw, op)(item)
        except EntryError as exc:
            raise TargetError(str(exc)) from exc

    def entries(self) -> list[dict]:
        return self.switch.entries()

    def send(self, ingress_port: int, buf: bytes, lengths: bytes, token: Any) -> None:
        self.receiver(token, Emitted(*self.switch.process_packed(buf, lengths, ingress_port)))
