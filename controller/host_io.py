"""Frames in and out of one emulated host's interface (run inside the host's namespace).

`python -m controller.host_io send IFACE IN.pcap [--gap S]` sends every frame of a pcap
out of IFACE as it is (an AF_PACKET socket: byte for byte, no IP stack in the way);
`python -m controller.host_io capture IFACE OUT.pcap [--udp-port N]` writes every frame
IFACE receives (not the ones this host sends) that is IPv4/UDP to port N, until SIGTERM.
`camus net up` runs them in Mininet hosts; anything else a host's kernel says on the wire
(IPv6 neighbour discovery, say) is not what the test compares and is left out.
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args(argv)
    if args.what == "send":
        return send(args.iface, args.pcap, args.gap)
    return capture(args.iface, args.pcap, args.udp_port)


if __name__ == "__main__":
    sys.exit(main())
