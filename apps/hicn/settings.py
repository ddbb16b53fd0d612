"""The demo's parameters (`camus demo hicn --help` shows them with these defaults).

Light on purpose: `camus` builds its command line from these without loading the demo.
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.hicn import workload

FRONTS = ("embedded", "serve", "bmv2")  # where the switch runs: apps.hicn.switches


@dataclass(frozen=True)
class Settings:
    workload: workload.WorkloadConfig = workload.WorkloadConfig()
    threshold: int = 3  # requests per second of one content that make it hot
    service_us: float = 1000.0  # the forwarder's time per packet
    capacity: int = 200  # the forwarder's cache, in contents
    producer_ms: float = 20.0  # the producer's extra delay
    jitter_ms: float = 2.0  # mean of the producer's exponential jitter
    data_bytes: int = 1024
    grace: float = 5.0  # seconds the clients wait for missing answers
    switch: str = "embedded"
    impl: str = "python"
    rounds: int = 1

    def check(self) -> None:
        self.workload.check()
        if self.threshold < 1:
            raise ValueError("--threshold must be at least 1 request per second")
        if self.service_us <= 0 or self.capacity < 0 or self.producer_ms < 0 or self.jitter_ms < 0:
            raise ValueError("--service-us must be positive; --capacity, --producer-ms and "
                             "--jitter-ms must not be negative")
        if self.rounds < 1:
            raise ValueError("--rounds must be at least 1")
