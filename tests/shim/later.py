"""Targets that report later, as a remote target does: the embedded switch underneath, its
reports held back (`HeldBack`, handed back by `flush()`) or made on a worker thread and
handed to the event loop (`OnAThread`), with or without each copy's input frame index."""

from __future__ import annotations

import asyncio
import struct
from concurrent.futures import ThreadPoolExecutor

from controller.diff import Changes
from controller.embedded import EmbeddedTarget
from controller.target import NO_INDEX, Emitted, Target


def without_index(emitted: Emitted) -> Emitted:
    """The copies as a target that reads its ports reports them: input frame unknown."""
    copies = bytearray(emitted.copies)
    for at in range(0, len(copies), 16):
        struct.pack_into("<I", copies, at, NO_INDEX)
    return Emitted(emitted.buf, bytes(copies))


class HeldBack(Target):
    """The embedded switch; what it emits is reported only by `flush()`."""

    def __init__(self, impl: str = "native", indexed: bool = True) -> None:
        super().__init__()
        self.indexed = indexed
        self.inner = EmbeddedTarget(impl)
        self.inner.set_receiver(self._emitted)
        self.held: list = []

    def load(self, pipeline: dict, entries: dict) -> None:
        self.inner.load(pipeline, entries)

    def apply(self, changes: Changes) -> None:
        self.inner.apply(changes)

    def entries(self) -> list[dict]:
        return self.inner.entries()

    def send(self, ingress_port: int, buf: bytes, lengths: bytes, token) -> None:
        self.inner.send(ingress_port, buf, lengths, token)

    def _emitted(self, token, emitted: Emitted) -> None:
        self.held.append((token, emitted if self.indexed else without_index(emitted)))

    def flush(self) -> None:
        held, self.held = self.held, []
        for token, emitted in held:
            self.receiver(token, emitted)


class OnAThread(HeldBack):
    """The switch runs on a worker thread; each report is handed to the event loop that sent
    (`call_soon_threadsafe`), as a remote target's I/O thread would hand it over."""

    def __init__(self, impl: str = "native", indexed: bool = True) -> None:
        super().__init__(impl, indexed)
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="on-a-thread")
        self.loop: asyncio.AbstractEventLoop | None = None

    def load(self, pipeline: dict, entries: dict) -> None:
        self.worker.submit(self.inner.load, pipeline, entries).result()

    def apply(self, changes: Changes) -> None:
        self.worker.submit(self.inner.apply, changes).result()

    def entries(self) -> list[dict]:
        return self.worker.submit(self.inner.entries).result()

    def send(self, ingress_port: int, buf: bytes, lengths: bytes, token) -> None:
        self.loop = asyncio.get_running_loop()
        self.worker.submit(self.inner.send, ingress_port, buf, lengths, token)

    def _emitted(self, token, emitted: Emitted) -> None:
        self.loop.call_soon_threadsafe(self.receiver, token,
                                       emitted if self.indexed else without_index(emitted))

    def close(self) -> None:
        self.worker.shutdown()
