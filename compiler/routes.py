"""Plain IPv4 forwarding beside the applications: a routes file, its `ipv4_lpm` entries, and
the longest-prefix-match reference the switch's IPv4 routing is tested against.

A routes file holds one route a line, `PREFIX/LEN PORT` or `PREFIX/LEN drop`
(`10.1.0.0/16 3`, `0.0.0.0/0 drop`); `#` starts a comment. A prefix with bits set past its
length, a length over 32, a port outside 0..511 or the same prefix twice is refused with the
line and column. `lookup` is the definition: of the routes whose prefix covers the address,
the longest one's port (None: dropped, or no route). It is written without masks' tricks,
bit by bit, so that it shares nothing with the tables it checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiler.errors import CamusError
from pipeline.model import IPV4_TABLE, PORT_WIDTH

_LINE = re.compile(r"(\S+)/(\S+)\s+(\S+)\s*$")


@dataclass(frozen=True)
class Route:
    prefix: int  # the network address, host bits zero
    length: int  # prefix length, 0..32
    port: int | None  # None: drop
    line: int = 0


def _address(text: str) -> int | None:
    parts = text.split(".")
    if len(parts) != 4 or not all(p.isdigit() and int(p) <= 255 for p in parts):
        return None
    return int.from_bytes(bytes(int(p) for p in parts), "big")


def parse_routes(text: str, source: str | None = None) -> list[Route]:
    """The routes of a routes file; CamusError at the line and column of the first bad one."""
    out: list[Route] = []
    seen: dict[tuple[int, int], int] = {}
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw.split("#", 1)[0].rstrip()
        body = line.lstrip()
        if not body:
            continue
        col = len(line) - len(body) + 1
        m = _LINE.match(body)
        if m is None:
            raise CamusError("a route is 'PREFIX/LEN PORT' or 'PREFIX/LEN drop'", n, col, source)
        addr = _address(m.group(1))
        if addr is None:
            raise CamusError(f"{m.group(1)!r} is not a dotted IPv4 address", n, col, source)
        length_col = col + m.start(2)
        if not m.group(2).isdigit() or int(m.group(2)) > 32:
            raise CamusError(f"prefix length {m.group(2)!r} is not 0..32", n, length_col, source)
        length = int(m.group(2))
        if addr & ((1 << (32 - length)) - 1):
            raise CamusError(f"{m.group(1)}/{length} has bits set past its length "
                             f"(the network is {_dotted(addr >> (32 - length) << (32 - length))}"
                             f"/{length})", n, col, source)
        port_col = col + m.start(3)
        action = m.group(3)
        if action == "drop":
            port = None
        elif action.isdigit() and int(action) < 1 << PORT_WIDTH:
            port = int(action)
        else:
            raise CamusError(f"{action!r} is neither a port (0..{(1 << PORT_WIDTH) - 1}) nor "
                             f"'drop'", n, port_col, source)
        if (addr, length) in seen:
            raise CamusError(f"{m.group(1)}/{length} is already routed on line "
                             f"{seen[addr, length]}", n, col, source)
        seen[addr, length] = n
        out.append(Route(addr, length, port, n))
    return out


def _dotted(addr: int) -> str:
    return ".".join(str(b) for b in addr.to_bytes(4, "big"))


def route_entries(routes: Iterable[Route], table: str = IPV4_TABLE) -> list[dict]:
    """The routes as entries of the pipeline's IPv4 table (entries.json form)."""
    out = []
    for r in routes:
        e = {"table": table, "match": {"ipv4.dst_addr": {"lpm": [r.prefix, r.length]}}}
        if r.port is None:
            e.update(action="drop", params={})
        else:
            e.update(action="fwd", params={"port": r.port})
        out.append(e)
    return out


def lookup(routes: Sequence[Route], address: int) -> int | None:
    """The port the longest prefix covering `address` names; None if it drops or none does."""
    best: Route | None = None
    bits = format(address, "032b")
    for r in routes:
        if bits[:r.length] == format(r.prefix, "032b")[:r.length] and (
                best is None or r.length > best.length):
            best = r
    return None if best is None else best.port
