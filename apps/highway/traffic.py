"""The seeded traffic model: cars on a grid of highways, each sending 10 position reports a second.

The map is a square `side_km` wide, in the spec's units of 10 m (p4/highway/highway.p4).
Half the highways run east-west (along x, at a fixed y), half north-south; each has two
carriageways 20 m apart (direction 0 towards growing coordinates, 1 back) of three lanes. A
car that leaves the map at one end comes back at the other, so the traffic stays as dense as
it started.

Drivers differ: most want a speed near the 55 mph limit, faster in the left lanes, and some
of those drift over it now and then; `speeders` of them want well over it. Each highway has a
few slow stretches (roadworks, a jam) where everyone slows down to that stretch's speed,
speeders included. A car's speed moves a third of the way towards what it wants once a
second, plus noise, and its mote reports whole miles per hour, so the reported speed changes
once a second while the position changes with every report.

Every car has its own phase in the 100 ms between two reports, so reports arrive spread over
time rather than in bursts. Everything comes from one `random.Random(seed)`: the same seed,
the same cars, regions and reports, on any machine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

UNIT_M = 10  # metres per coordinate unit
MAX_COORD = 0xFFFF  # 16-bit coordinates
MPH = 0.44704  # metres per second in one mile per hour
REPORT_MS = 100  # 10 reports a second
LANES = 3
SPEED_LIMIT = 55


@dataclass(frozen=True)
class TrafficConfig:
    cars: int = 2000
    duration: float = 5.0  # seconds of reports
    highways: int = 10
    side_km: float = 100.0
    speeders: float = 0.15  # share of drivers who want well over the limit
    slow_stretches: int = 3  # per highway and direction
    seed: int = 1

    def check(self) -> None:
        """ValueError naming the first parameter out of its range."""
        if self.cars < 1:
            raise ValueError("--cars must be at least 1")
        if not self.duration > 0:
            raise ValueError("--duration must be positive")
        if self.highways < 2:
            raise ValueError("--highways must be at least 2 (one each way)")
        if not 5 <= self.side_km <= MAX_COORD * UNIT_M / 1000:
            raise ValueError(f"--side-km must be 5 .. {MAX_COORD * UNIT_M // 1000}")
        if not 0 <= self.speeders <= 1:
            raise ValueError("--speeders is a share, 0 .. 1")
        if self.slow_stretches < 0:
            raise ValueError("--slow-stretches must not be negative")

    @property
    def side(self) -> int:
        """The map's width in coordinate units."""
        return int(self.side_km * 1000 / UNIT_M)

    @property
    def reports(self) -> int:
        return self.cars * self.ticks

    @property
    def ticks(self) -> int:
        return round(self.duration * 1000 / REPORT_MS)


@dataclass(frozen=True)
class Stretch:
    start: int  # metres along the highway
    end: int
    mph: float


@dataclass(frozen=True)
class Highway:
    number: int
    axis: str  # "x": runs east-west, at y == at; "y": north-south, at x == at
    at: int  # its centre line, in units
    length_m: int
    slow: tuple[tuple[Stretch, ...], tuple[Stretch, ...]]  # per direction

    def carriageway(self, direction: int) -> int:
        """The coordinate across the highway of a carriageway (units): 10 m each side."""
        return self.at - 1 if direction == 0 else self.at + 1

    def point(self, direction: int, along_m: float) -> tuple[int, int]:
        """(x, y) in units of a car `along_m` metres from the highway's start."""
        along = min(int(along_m // UNIT_M), self.length_m // UNIT_M - 1)
        across = self.carriageway(direction)
        return (along, across) if self.axis == "x" else (across, along)

    def zone_mph(self, direction: int, along_m: float) -> float | None:
        for s in self.slow[direction]:
            if s.start <= along_m < s.end:
                return s.mph
        return None


class Report(NamedTuple):
    car: int
    seq: int
    time_ms: int
    highway: int
    direction: int
    lane: int
    x: int
    y: int
    spd: int


def highways(config: TrafficConfig, rng: random.Random) -> list[Highway]:
    side = config.side
    out = []
    per_axis = {"x": (config.highways + 1) // 2, "y": config.highways // 2}
    for axis, count in per_axis.items():
        gap = side / (count + 1)
        for i in range(count):
            at = int(gap * (i + 1) + rng.uniform(-gap / 4, gap / 4))
            length_m = side * UNIT_M
            slow = tuple(tuple(sorted((_stretch(rng, length_m) for _ in range(config.slow_stretches)),
                                      key=lambda s: s.start)) for _ in range(2))
            out.append(Highway(len(out), axis, max(2, min(side - 3, at)), length_m, slow))
    return out


def _stretch(rng: random.Random, length_m: int) -> Stretch:
    size = rng.uniform(1000, 4000)
    start = rng.uniform(0, length_m - size)
    return Stretch(int(start), int(start + size), rng.uniform(20, 40))


class Car:
    __slots__ = ("number", "highway", "direction", "lane", "along_m", "speeder", "want", "mph", "phase")

    def __init__(self, number: int, highway: Highway, rng: random.Random, speeders: float):
        self.number = number
        self.highway = highway
        self.direction = rng.randrange(2)
        self.lane = rng.randrange(LANES)
        self.along_m = rng.uniform(0, highway.length_m)
        self.speeder = rng.random() < speeders
        if self.speeder:
            self.want = min(95.0, max(SPEED_LIMIT + 3, rng.gauss(68, 7)))
        else:  # near the limit, a little faster towards the left; a few drift over it
            self.want = min(62.0, max(35.0, rng.gauss(49 + 2 * self.lane, 3.5)))
        self.mph = self.want
        self.phase = rng.randrange(REPORT_MS)  # ms into every 100 ms at which it reports

    def step(self, rng: random.Random, seq: int) -> None:
        """Before report `seq`: once a second, move the speed towards what the driver wants
        (or the slow stretch allows); then drive 100 ms."""
        if seq % 10 == 0:
            target = self.want
            zone = self.highway.zone_mph(self.direction, self.along_m)
            if zone is not None:
                target = min(target, zone)
            self.mph = max(0.0, self.mph + (target - self.mph) / 3 + rng.gauss(0, 1.5))
        metres = self.mph * MPH * REPORT_MS / 1000
        step = metres if self.direction == 0 else -metres
        self.along_m = (self.along_m + step) % self.highway.length_m

    def report(self, seq: int) -> Report:
        x, y = self.highway.point(self.direction, self.along_m)
        return Report(self.number, seq, seq * REPORT_MS + self.phase, self.highway.number,
                      self.direction, self.lane, x, y, round(self.mph))


@dataclass
class Traffic:
    config: TrafficConfig
    highways: list[Highway]
    reports: list[Report]  # in the order the motes send them (by time)
    speeders: int  # cars whose drivers want well over the limit


def drive(config: TrafficConfig) -> Traffic:
    """The highways, the cars and every report of the run, drawn from `config.seed`."""
    rng = random.Random(config.seed)
    roads = highways(config, rng)
    cars = [Car(n + 1, rng.choice(roads), rng, config.speeders) for n in range(config.cars)]
    order = sorted(cars, key=lambda c: (c.phase, c.number))
    reports: list[Report] = []
    for seq in range(config.ticks):
        for car in order:
            car.step(rng, seq)
            reports.append(car.report(seq))
    return Traffic(config, roads, reports, sum(c.speeder for c in cars))
