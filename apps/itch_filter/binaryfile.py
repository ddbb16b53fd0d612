"""NASDAQ's historical ITCH 5.0 files ("BinaryFILE"): a 2-byte big-endian length, then the message.

Nasdaq publishes a day of TotalView-ITCH 5.0 as such a file (usually gzipped, e.g.
`01302019.NASDAQ_ITCH50.gz`). `read` takes plain or gzip files; `write` makes one (the tests
write a synthetic day and read it back with the independent `itchfeed` parser). Replay at a
chosen rate is the publisher's pacing (`camus demo itch --replay FILE --rate R`).
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"


def _open(path: str | Path) -> BinaryIO:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")


def read(path: str | Path, limit: int | None = None) -> Iterator[bytes]:
    """The messages of a BinaryFILE, in order (at most `limit`); ValueError on a cut message."""
    with _open(path) as fh:
        count = 0
        while limit is None or count < limit:
            head = fh.read(2)
            if not head:
                return
            if len(head) < 2:
                raise ValueError(f"{path}: file ends inside a length prefix")
            n, = struct.unpack("!H", head)
            body = fh.read(n)
            if len(body) < n:
                raise ValueError(f"{path}: file ends inside a {n}-byte message")
            yield body
            count += 1


def write(path: str | Path, messages: Iterable[bytes]) -> int:
    """Write messages as a BinaryFILE (gzip if the name ends in .gz); returns the count."""
    opener = gzip.open if str(path).endswith(".gz") else open
    count = 0
    with opener(path, "wb") as fh:
        for m in messages:
            fh.write(struct.pack("!H", len(m)) + m)
            count += 1
    return count

