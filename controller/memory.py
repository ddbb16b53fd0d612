"""Whether a network fits: what compiling one holds, against what this process may still take.

A network too large for the machine is refused before it is built, with one line saying how
much it needs and what limits the process, rather than ending in a MemoryError (or the
kernel's OOM killer) minutes in. The need is a measured lower bound: per switch compiled
(its incremental compiler, entries and documents) and per host (topology, routing,
network.json), from `camus net compile` with one subscription on fat trees k = 16..64
(BENCHMARKS.md); subscriptions add to it, so a network that passes may still run out, and
the commands catch that too.

What the process may take is the least of: the machine's available memory
(/proc/meminfo), the headroom under the address-space and data limits (`ulimit -v`, `-d`),
and a cgroup v2 memory limit. Where none of them can be read, nothing is refused.
"""

from __future__ import annotations

import resource
from pathlib import Path

SWITCH_BYTES = 34 << 10
HOST_BYTES = 5 << 10


def network_bytes(switches: int, hosts: int) -> int:
    """The memory a network of `switches` compiled switches and `hosts` hosts adds."""
    return switches * SWITCH_BYTES + hosts * HOST_BYTES


def _kib(text: str, key: str) -> int | None:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def available() -> tuple[int, str] | None:
    """(bytes this process may still allocate, what limits it), or None where unknown."""
    found: list[tuple[int, str]] = []
    meminfo = _read("/proc/meminfo")
    if meminfo and (free := _kib(meminfo, "MemAvailable")) is not None:
        found.append((free, "the machine's available memory"))
    status = _read("/proc/self/status") or ""
    for limit, used, what in ((resource.RLIMIT_AS, "VmSize", "address-space limit, ulimit -v"),
                              (resource.RLIMIT_DATA, "VmData", "data limit, ulimit -d")):
        soft, _ = resource.getrlimit(limit)
        now = _kib(status, used)
        if soft != resource.RLIM_INFINITY and now is not None:
            found.append((max(soft - now, 0), f"its {what}"))
    cap, current = _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
    if cap and current and cap.strip().isdigit() and current.strip().isdigit():
        found.append((max(int(cap) - int(current), 0), "its cgroup's memory.max"))
    return min(found) if found else None


def too_large(what: str, switches: int, hosts: int) -> str | None:
    """Why a network of that size cannot be compiled here, or None if it may be."""
    need = network_bytes(switches, hosts)
    room = available()
    if room is None or need <= room[0]:
        return None
    return (f"{what} ({switches} switches, {hosts} hosts) needs at least {size_text(need)} to compile, "
            f"more than the {size_text(room[0])} this process may still take ({room[1]})")


def size_text(n: int) -> str:
    return f"{n / (1 << 30):.2f} GB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MB"
