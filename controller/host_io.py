"""Frames in and out of one emulated host's interface (run inside the host's namespace).

`python -m controller.host_io send IFACE IN.pcap [--gap S]` sends every frame of a pcap
out of IFACE as it is (an AF_PACKET socket: byte for byte, no IP stack in the way);
`python -m controller.host_io capture IFACE OUT.pcap [--udp-port N]` writes every frame
IFACE receives (not the ones this host sends) that is IPv4/UDP to port N, until SIGTERM.
`camus net up` runs them in Mininet hosts; anything else a host's kernel says on the wire
(IPv6 neighbour discovery, say) is not what the test compares and is left out.

`python -m controller.host_io no-offload IFACE...` turns off segmentation and receive
offloads (TSO, GSO, GRO, LRO) on interfaces, which `camus net up` does to a bmv2 switch's
interfaces before bmv2 opens them (`no_offloads`).
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import signal
import socket
import struct
import sys
import time

from switch.pcap import PcapReader, PcapWriter

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def send(iface: str, path: str, gap: float) -> int:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    n = 0
    with open(path, "rb") as fh:
        for record in PcapReader(fh):
            sock.send(record.data)
            n += 1
            time.sleep(gap)
    print(f"sent {n}", flush=True)
    return 0


def is_udp_to(frame: bytes, port: int) -> bool:
    if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return False
    ihl = (frame[14] & 0x0F) * 4
    return struct.unpack_from("!H", frame, 14 + ihl + 2)[0] == port


def capture(iface: str, path: str, port: int) -> int:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    sock.settimeout(0.1)
    with open(path, "wb") as fh:
        writer = PcapWriter(fh, False)
        print("ready", flush=True)
        while not stop:
            try:
                data, addr = sock.recvfrom(65535)
            except (socket.timeout, InterruptedError):
                continue
            if addr[2] != PACKET_OUTGOING and is_udp_to(data, port):
                now = time.time()
                writer.write(data, int(now), int((now % 1) * 1_000_000))
                fh.flush()
    return 0


SIOCETHTOOL = 0x8946
# linux/ethtool.h: (get, set) commands of the offloads libpcap looks at, and LRO's flag
ETHTOOL_OFFLOADS = {"tso": (0x1E, 0x1F), "gso": (0x23, 0x24), "gro": (0x2B, 0x2C)}
ETHTOOL_GFLAGS, ETHTOOL_SFLAGS, ETH_FLAG_LRO = 0x25, 0x26, 1 << 15


def _ethtool(sock: socket.socket, iface: str, cmd: int, value: int = 0) -> int:
    """One SIOCETHTOOL call on a struct ethtool_value {cmd, data}; returns data. The ifreq
    points at the struct, so it lives in a ctypes buffer the kernel writes back to."""
    data = ctypes.create_string_buffer(struct.pack("=II", cmd, value), 8)
    ifreq = struct.pack("16sP", iface.encode(), ctypes.addressof(data)).ljust(40, b"\0")
    fcntl.ioctl(sock, SIOCETHTOOL, ifreq)
    return struct.unpack_from("=I", data.raw, 4)[0]


def no_offloads(iface: str) -> None:
    """Segmentation and receive offloads off on `iface` (a veth has TSO, GSO and GRO on).

    Why: bmv2 reads its ports with libpcap in immediate mode, whose TPACKET_V2 ring has
    slots of the largest frame the interface may hand over: 64 KiB when any of these
    offloads is on (aggregated frames), MTU + 18 bytes when none is. In its 2 MB buffer
    that is about 32 frames, against about 1,300 at a 1,500-byte MTU (230 at 9,000), and a
    burst beyond the ring is lost before bmv2 sees it (libpcap 1.10, pcap-linux.c
    `create_ring`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for get, set_ in ETHTOOL_OFFLOADS.values():
            if _ethtool(sock, iface, get):
                _ethtool(sock, iface, set_, 0)
        flags = _ethtool(sock, iface, ETHTOOL_GFLAGS)
        if flags & ETH_FLAG_LRO:
            _ethtool(sock, iface, ETHTOOL_SFLAGS, flags & ~ETH_FLAG_LRO)
        left = [n for n, (get, _) in ETHTOOL_OFFLOADS.items() if _ethtool(sock, iface, get)]
        if left or _ethtool(sock, iface, ETHTOOL_GFLAGS) & ETH_FLAG_LRO:
            raise OSError(f"offloads still on: {left or ['lro']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller.host_io")
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("send")
    s.add_argument("iface")
    s.add_argument("pcap")
    s.add_argument("--gap", type=float, default=0.002)
    c = sub.add_parser("capture")
    c.add_argument("iface")
    c.add_argument("pcap")
    c.add_argument("--udp-port", type=int, default=1234)
    o = sub.add_parser("no-offload")
    o.add_argument("ifaces", nargs="+")
    args = ap.parse_args(argv)
    if args.what == "no-offload":
        for iface in args.ifaces:
            try:
                no_offloads(iface)
            except OSError as exc:
                print(f"host_io no-offload: {iface}: {exc.strerror or exc}", file=sys.stderr)
                return 1
        return 0
    if args.what == "send":
        return send(args.iface, args.pcap, args.gap)
    return capture(args.iface, args.pcap, args.udp_port)


if __name__ == "__main__":
    sys.exit(main())
