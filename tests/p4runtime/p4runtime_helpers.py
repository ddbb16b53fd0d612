"""Shared pieces of the P4Runtime tests: a compiled ITCH config, frames, and the expected split.

`compiled(rules)` compiles rules against p4/itch/itch.p4 with the real compiler; `messages`
draws Add Orders that hit and miss those rules; `expected_split` is what
`compiler.semantics.evaluate` says each port must receive, and `received_split` reads the
same thing back from the switch's output frames, so tests compare the two directly.
`camus(...)` and `read_until_ready` start `camus switch serve` as a subprocess.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
import threading
from pathlib import Path

from compiler.compile import Compiled, compile_text
from compiler.semantics import evaluate
from pipeline import document
from switch.packet import mold_payload, read_mold, read_udp, udp_frame

ROOT = Path(__file__).resolve().parents[2]
ITCH_SPEC = (ROOT / "p4" / "itch" / "itch.p4").read_text()
ITCH_UDP_PORT = 1234
SESSION = b"CAMUSTEST1"

RULES = """\
stock == "GOOGL" : fwd(1)
stock == "MSFT" and price > 3000000 : fwd(2)
stock == "AAPL" and (price > 1500000 or shares >= 1000) : fwd(2, 3)
buy_sell_indicator == "S" and shares >= 10000 : fwd(4)
price < 100 : fwd(5)
"""
STOCKS = ("GOOGL", "MSFT", "AAPL", "IBM", "ORCL")
ITCH_FIELDS = (("buy_sell_indicator", 19, 1), ("shares", 20, 4), ("stock", 24, 8), ("price", 32, 4))


def compiled(rules: str = RULES) -> Compiled:
    return compile_text(ITCH_SPEC, rules, name="itch")


def write_dir(c: Compiled, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pipeline.json").write_text(document.dumps(c.pipeline))
    (directory / "entries.json").write_text(json.dumps(c.entries))
    return directory


def add_order(stock: str, price: int, shares: int, side: bytes = b"B", ref: int = 1) -> bytes:
    """An ITCH 5.0 Add Order (36 bytes)."""
    return (b"A" + struct.pack("!HH", 1, 0) + (1).to_bytes(6, "big") + struct.pack("!Q", ref) + side
            + struct.pack("!I", shares) + stock.encode().ljust(8) + struct.pack("!I", price))


def values(message: bytes) -> dict[str, int]:
    return {f"itch_order.{name}": int.from_bytes(message[off: off + n], "big") for name, off, n in ITCH_FIELDS}


def messages(seed: int, n: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [add_order(rnd.choice(STOCKS), rnd.choice((50, 1_000_000, 2_500_000, 4_000_000)),
                      rnd.choice((10, 1000, 20000)), rnd.choice((b"B", b"S")), ref=i)
            for i in range(n)]


def frame(batch: list[bytes], seq: int = 1, **udp) -> bytes:
    return udp_frame(mold_payload(SESSION, seq, batch), dst_port=ITCH_UDP_PORT, **udp)


def expected_split(c: Compiled, batch: list[bytes]) -> dict[int, list[bytes]]:
    """Port -> the messages of `batch` that port must receive, by the reference evaluator."""
    out: dict[int, list[bytes]] = {}
    for m in batch:
        for port in evaluate(c.rules, values(m)):
            out.setdefault(port, []).append(m)
    return out


def received_split(copies: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    """Port -> the messages its copies carry (zero-length placeholder blocks skipped)."""
    out: dict[int, list[bytes]] = {}
    for port, data in copies:
        _, _, blocks = read_mold(read_udp(data).payload)
        out.setdefault(port, []).extend(b for b in blocks if b)
    return out


def camus(*args: str) -> list[str]:
    return [sys.executable, "-m", "camus", *args]


def read_until_ready(proc: subprocess.Popen, timeout: float = 30.0) -> list[str]:
    """The serve process's stdout lines up to `ready`; it is killed if that takes too long."""
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if lines[-1] == "ready":
                return lines
    finally:
        watchdog.cancel()
    raise AssertionError(f"switch did not become ready: {lines} {proc.stderr.read()}")
