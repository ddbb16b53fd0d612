"""Position reports on the wire: the spec's header (p4/highway/highway.p4) after Ethernet,
IPv4 and UDP, to the application's UDP port."""

from __future__ import annotations

import struct

from apps.highway.traffic import Report
from switch.packet import ipv4_address, read_udp, udp_frame

UDP_PORT = 4455  # the spec's udp_port
REPORT = struct.Struct("!IIIBBBBHHH")  # car_id, seq, time_ms, highway, direction, lane, flags, x, y, spd
MONITORS = ipv4_address("10.55.0.1")  # where the motes address their reports: the monitoring side


def payload(r: Report) -> bytes:
    return REPORT.pack(r.car, r.seq, r.time_ms, r.highway, r.direction, r.lane, 0, r.x, r.y, r.spd)


def frame(r: Report) -> bytes:
    """The frame a car's mote sends: from its own address in 10.0.0.0/8."""
    return udp_frame(payload(r), dst_port=UDP_PORT, src_port=UDP_PORT, src_ip=0x0A000000 | r.car & 0xFFFFFF,
                     dst_ip=MONITORS)


def decode(frame_bytes: bytes) -> Report:
    """The report in a frame (ValueError if it is not a whole position report to UDP_PORT)."""
    udp = read_udp(frame_bytes)
    if udp.dst_port != UDP_PORT or len(udp.payload) < REPORT.size:
        raise ValueError("not a position report")
    car, seq, time_ms, highway, direction, lane, _flags, x, y, spd = REPORT.unpack_from(udp.payload)
    return Report(car, seq, time_ms, highway, direction, lane, x, y, spd)
