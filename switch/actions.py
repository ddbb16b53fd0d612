"""The software switch's code for the actions a spec may declare besides fwd
(docs/actions.md): one function per action of `compiler.actions.LIBRARY` but drop, which is
no code at all (the packet gets nothing).

An action function takes the whole frame as received, where its IPv4 and UDP headers start,
the ingress port and the action's arguments (the parameters of its table entry after
`ports`), and returns the frame to send back out of the ingress port, or None.

Also here: framing "dns", the reading of a DNS query into the fixed-width message its
application's stages match (`dns_message`).
"""

from __future__ import annotations

import struct

from pipeline.model import Application, PipelineError, dns_name_field
from switch.packet import ETH_HEADER, UDP_HEADER, ipv4_checksum

DNS_HEADER = 12
DNS_TTL = 60  # seconds: the answers' TTL (a cache entry the control plane may withdraw)
TYPE_A, TYPE_ANY, CLASS_IN = 1, 255, 1
MAX_LABEL = 63


def dns_message(payload: bytes, app: Application) -> bytes | None:
    """The message the stages of a framing "dns" application match: the DNS header, the
    query name's wire form (length-prefixed labels and the root's zero byte) zero-padded to
    the name field's width, the question's type and class. None for what is not a standard
    query with one question (QR set, opcode not 0, QDCOUNT not 1), a name with a
    compression pointer or a label over 63 bytes, a truncated question, or a name whose
    wire form is longer than the name field: such a message no rule matches."""
    if len(payload) < DNS_HEADER:
        return None
    flags, qdcount = struct.unpack_from("!HH", payload, 2)
    if flags & 0x8000 or (flags >> 11) & 0xF or qdcount != 1:
        return None
    width = dns_name_field(app).width // 8
    pos = DNS_HEADER
    while True:
        if pos >= len(payload):
            return None
        n = payload[pos]
        if n > MAX_LABEL:  # 0xC0 pointers (never in a query's question) and the reserved kinds
            return None
        pos += 1 + n
        if n == 0:
            break
    name = payload[DNS_HEADER:pos]
    if len(name) > width or pos + 4 > len(payload):
        return None
    return payload[:DNS_HEADER] + name.ljust(width, b"\0") + payload[pos:pos + 4]


def answer_dns(frame: bytes, l4: int, in_port: int, ip: int) -> bytes | None:
    """The response to the DNS query in `frame` (UDP at `l4`; framing "dns" has checked it
    is a standard query with one question): addresses and ports swapped; QR and AA set, RD
    kept, everything else 0; the question kept; for a question of type A or ANY, class IN,
    one A record `ip` (TTL DNS_TTL) named by a pointer to the question's name, else no
    record (the name exists, with no record of that type). Additional records of the query
    (an EDNS OPT) are not echoed. IPv4 total length and checksum, UDP length and checksum
    are set for the new frame."""
    _, _, ulen = struct.unpack_from("!HHH", frame, l4)
    payload = frame[l4 + UDP_HEADER:l4 + ulen]
    pos = DNS_HEADER
    while payload[pos]:
        pos += 1 + payload[pos]
    question = payload[DNS_HEADER:pos + 5]
    qtype, qclass = struct.unpack_from("!HH", payload, pos + 1)
    flags, = struct.unpack_from("!H", payload, 2)
    answer = b""
    if qtype in (TYPE_A, TYPE_ANY) and qclass == CLASS_IN:
        answer = struct.pack("!HHHIHI", 0xC000 | DNS_HEADER, TYPE_A, CLASS_IN, DNS_TTL, 4, ip)
    dns = payload[:2] + struct.pack("!HHHHH", 0x8400 | (flags & 0x0100), 1, 1 if answer else 0,
                                    0, 0) + question + answer
    ip_header = bytearray(frame[ETH_HEADER:l4])
    src, dst = ip_header[12:16], ip_header[16:20]
    ip_header[12:16], ip_header[16:20] = dst, src
    struct.pack_into("!H", ip_header, 2, len(ip_header) + UDP_HEADER + len(dns))
    struct.pack_into("!H", ip_header, 10, 0)
    struct.pack_into("!H", ip_header, 10, ipv4_checksum(bytes(ip_header)))
    sport, dport = struct.unpack_from("!HH", frame, l4)
    udp_len = UDP_HEADER + len(dns)
    udp = struct.pack("!HHHH", dport, sport, udp_len, 0)
    checksum = udp_checksum(bytes(ip_header[12:16]), bytes(ip_header[16:20]), udp + dns)
    udp = udp[:6] + struct.pack("!H", checksum)
    eth = frame[6:12] + frame[0:6] + frame[12:ETH_HEADER]
    return eth + bytes(ip_header) + udp + dns


def udp_checksum(src: bytes, dst: bytes, segment: bytes) -> int:
    """RFC 768: the ones' complement sum over the pseudo-header and the segment (whose
    checksum field is 0); 0 is sent as 0xFFFF."""
    data = src + dst + struct.pack("!BBH", 0, 17, len(segment)) + segment
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total & 0xFFFF) or 0xFFFF


# name -> (the framing it needs, its code)
ACTIONS = {
    "answerDNS": ("dns", answer_dns),
}


def check(app: Application) -> None:
    """PipelineError for an application declaring an action this switch has no code for,
    or one whose framing the action cannot read."""
    for a in app.actions:
        if a.name == "drop":
            continue
        known = ACTIONS.get(a.name)
        if known is None:
            raise PipelineError(f"application {app.name!r} declares action {a.name!r}, which "
                                f"this switch has no code for (it has: drop, "
                                f"{', '.join(sorted(ACTIONS))})")
        if known[0] != app.framing:
            raise PipelineError(f"application {app.name!r}: action {a.name!r} needs framing "
                                f"{known[0]!r}, not {app.framing!r}")
