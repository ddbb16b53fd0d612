"""The running switch: one replaceable data plane behind one lock.

The P4Runtime server (control) and the port threads (data) share a `Device`. A new forwarding
pipeline config replaces the data plane as a whole, so both sides reach it through the
device and hold `lock` for every call: the data-plane implementations are not thread-safe,
and a packet must never be processed half-way through a batch of writes. `process` is the
one entry for packets; `PipelineConfig` keeps what SetForwardingPipelineConfig gave (the
P4Info, the device config bytes, the cookie) so GetForwardingPipelineConfig returns it as
given.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from p4rt.index import P4InfoIndex
from p4rt.p4info import build_p4info, config_cookie
from p4rt.protos import p4info_pb2
from pipeline import document
from pipeline.model import Pipeline
from switch.dataplane import DataPlane, Output, load


@dataclass
class PipelineConfig:
    pipeline: Pipeline  # the device config (pipeline.json), validated
    p4info: p4info_pb2.P4Info
    device_config: bytes
    cookie: int = 0


class Device:
    """A data plane that may be absent (no pipeline yet) or replaced at any time."""

    def __init__(self, impl: str = "native", device_id: int = 1):
        self.impl = impl
        self.device_id = device_id
        self.lock = threading.RLock()
        self.dataplane: DataPlane | None = None
        self.config: PipelineConfig | None = None
        self.index: P4InfoIndex | None = None  # names <-> ids of config.p4info

    def install(self, config: PipelineConfig, entries: dict | None = None) -> None:
        """Replace the pipeline (every entry and group is dropped, as on a P4 target)."""
        dp = load(config.pipeline, entries, impl=self.impl)
        index = P4InfoIndex(config.p4info)
        with self.lock:
            self.dataplane, self.config, self.index = dp, config, index

    def process(self, frame: bytes, in_port: int, ts_us: int | None = None) -> Output:
        """One frame through the current pipeline, at time `ts_us` (µs; None: the data
        plane's clock, as for live input)."""
        with self.lock:
            if self.dataplane is None:
                return []  # no pipeline: a switch without a program forwards nothing
            return self.dataplane.process(frame, in_port, ts_us)


def config_from_dir(directory: str | Path) -> tuple[PipelineConfig, dict | None]:
    """The software switch's config for a `camus compile --out DIR` directory, and its entries."""
    d = Path(directory)
    raw = (d / "pipeline.json").read_bytes()
    pipeline = document.from_json(json.loads(raw))
    entries_path = d / "entries.json"
    entries = json.loads(entries_path.read_text()) if entries_path.exists() else None
    p4info = build_p4info(pipeline, counters=True)
    # The cookie a controller derives for the same directory: pushing it again diffs entries
    # instead of resetting the pipeline.
    return PipelineConfig(pipeline, p4info, raw, config_cookie(p4info, raw)), entries
