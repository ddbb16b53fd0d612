"""Monitored regions: rectangles on the map, each with its monitor and its rule.

A region is a stretch of one highway, 1 to 4 km long: most cover just the highway's two
carriageways (a speed-camera zone), some a wider area around it (a district, which may take
in part of a crossing highway). Regions are placed at random, so some overlap, and a report
inside two of them goes to both monitors. Region n's monitor is on switch port n, and its
rule is the paper's (seed 000, section V-6), with strict bounds on every side:

    x > X0 and x < X1 and y > Y0 and y < Y1 and spd > 55 : fwd(n)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from apps.highway.traffic import MAX_COORD, SPEED_LIMIT, Highway, TrafficConfig

MAX_REGIONS = 500  # switch ports 1..500: the software switch and the P4 program have 511


@dataclass(frozen=True)
class Region:
    port: int
    highway: int
    x0: int
    x1: int
    y0: int
    y1: int
    limit: int = SPEED_LIMIT

    @property
    def filter(self) -> str:
        return (f"x > {self.x0} and x < {self.x1} and y > {self.y0} and y < {self.y1} "
                f"and spd > {self.limit}")

    @property
    def rule(self) -> str:
        return f"{self.filter} : fwd({self.port})"


def place(count: int, roads: list[Highway], config: TrafficConfig, seed: int) -> list[Region]:
    """`count` regions on `roads`, drawn from their own generator (`seed`), so that changing
    the number of regions does not move the cars."""
    if not 1 <= count <= MAX_REGIONS:
        raise ValueError(f"--regions must be 1 .. {MAX_REGIONS} (one switch port each)")
    rng = random.Random(seed * 104729 + 17)
    side = config.side
    out = []
    for port in range(1, count + 1):
        road = rng.choice(roads)
        length = rng.randint(100, 400)  # units of 10 m
        centre = rng.randint(0, side - 1)
        lo, hi = max(0, centre - length // 2), min(side, centre + length // 2)
        half = 3 if rng.random() < 0.75 else rng.randint(20, 250)  # carriageways only, or an area
        across_lo, across_hi = max(0, road.at - half), min(MAX_COORD, road.at + half)
        if road.axis == "x":
            out.append(Region(port, road.number, lo, hi, across_lo, across_hi))
        else:
            out.append(Region(port, road.number, across_lo, across_hi, lo, hi))
    return out


def rules_text(regions: list[Region]) -> str:
    return "".join(r.rule + "\n" for r in regions)
