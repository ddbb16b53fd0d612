"""Classic libpcap files: read and write Ethernet captures.

The format is small and stable (a 24-byte global header, then a 16-byte header per record),
so it is written out here rather than pulled in as a dependency. Both byte orders and both
timestamp resolutions (microsecond magic a1b2c3d4, nanosecond a1b23c4d) are read; files are
written little-endian with the resolution of the capture they were read from. pcapng is not
supported: `PcapError` says so.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

LINKTYPE_ETHERNET = 1
MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
PCAPNG_MAGIC = 0x0A0D0D0A
SNAPLEN = 262144


class PcapError(ValueError):
    """Not a classic Ethernet pcap file, or a damaged one."""


@dataclass(frozen=True)
class Record:
    seconds: int
    fraction: int  # microseconds or nanoseconds, per the file's resolution
    data: bytes

    def ts_us(self, nanoseconds: bool) -> int:
        """The record's time in whole microseconds since the epoch (what a data plane's
        state stages take as a packet's time): nanoseconds are truncated."""
        return self.seconds * 1_000_000 + (self.fraction // 1000 if nanoseconds else self.fraction)


class PcapReader:
    """Iterate the records of a classic pcap file opened in binary mode.

    A file cut off inside its last record (a capture stopped mid-write, a partial copy)
    yields every whole record and then stops; `truncated` then says what was left over, so
    the caller can report it rather than lose the records before it.
    """

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self.truncated: str | None = None
        head = stream.read(24)
        if len(head) < 24:
            raise PcapError("file too short for a pcap header")
        magic_le, = struct.unpack("<I", head[:4])
        magic_be, = struct.unpack(">I", head[:4])
        if magic_le in (MAGIC_US, MAGIC_NS):
            self._order = "<"
        elif magic_be in (MAGIC_US, MAGIC_NS):
            self._order = ">"
        elif magic_le == PCAPNG_MAGIC:
            raise PcapError("pcapng files are not supported; convert with `editcap -F pcap`")
        else:
            raise PcapError(f"not a pcap file (magic {head[:4].hex()})")
        magic, _, _, _, _, _, self.linktype = struct.unpack(self._order + "IHHiIII", head)
        self.nanoseconds = magic == MAGIC_NS
        if self.linktype != LINKTYPE_ETHERNET:
            raise PcapError(f"link type {self.linktype} is not Ethernet (1)")

    def __iter__(self) -> Iterator[Record]:
        header = struct.Struct(self._order + "IIII")
        while True:
            head = self._stream.read(16)
            if not head:
                return
            if len(head) < 16:
                self.truncated = f"the file ends inside a record header ({len(head)} of 16 bytes)"
                return
            sec, frac, caplen, _ = header.unpack(head)
            data = self._stream.read(caplen)
            if len(data) < caplen:
                self.truncated = f"the file ends inside a record ({len(data)} of {caplen} bytes)"
                return
            yield Record(sec, frac, data)


class PcapWriter:
    """Write records to a classic little-endian Ethernet pcap file opened in binary mode."""

    def __init__(self, stream: BinaryIO, nanoseconds: bool = False):
        self._stream = stream
        magic = MAGIC_NS if nanoseconds else MAGIC_US
        stream.write(struct.pack("<IHHiIII", magic, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))

    def write(self, data: bytes, seconds: int = 0, fraction: int = 0) -> None:
        self._stream.write(struct.pack("<IIII", seconds, fraction, len(data), len(data)) + data)


def read_pcap(path: str) -> list[Record]:
    with open(path, "rb") as f:
        return list(PcapReader(f))


def write_pcap(path: str, frames: Iterable[bytes | Record], nanoseconds: bool = False) -> None:
    with open(path, "wb") as f:
        w = PcapWriter(f, nanoseconds)
        for item in frames:
            if isinstance(item, Record):
                w.write(item.data, item.seconds, item.fraction)
            else:
                w.write(item)
