"""Remote target specs (`camus serve --target ...`) parsed and opened.

See `controller.targets.open_target` for the forms. Parsing is separate from opening so
that `camus serve` refuses a bad spec before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from controller.remote import InterfaceIO, LaunchedTarget, RemoteTarget, UdpIO


@dataclass(frozen=True)
class P4RuntimeSpec:
    address: str
    io: tuple  # ("udp", (ihost, iport), ehost, base) or ("iface", prefix, ports)
    device_id: int = 1
    election_id: int = 10


def _host_port(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 0xFFFF:
        raise ValueError(f"{what}: expected HOST:PORT, got {text!r}")
    return host, int(port)


def parse_p4runtime(spec: str) -> P4RuntimeSpec:
    """`p4runtime://HOST:PORT?io=...[&device=N][&election=N]`; ValueError saying what is wrong."""
    url = urlsplit(spec)
    if url.scheme != "p4runtime" or not url.netloc:
        raise ValueError(f"{spec!r}: expected p4runtime://HOST:PORT?io=...")
    _host_port(url.netloc, "p4runtime://HOST:PORT")
    query = {k: v[-1] for k, v in parse_qs(url.query, strict_parsing=bool(url.query)).items()}
    unknown = set(query) - {"io", "device", "election"}
    if unknown:
        raise ValueError(f"{spec!r}: unknown parameter(s) {', '.join(sorted(unknown))} "
                         "(known: io, device, election)")
    io = query.get("io")
    if io is None:
        raise ValueError(f"{spec!r}: io= names the packet I/O: udp:IHOST:IPORT,EHOST:BASE or "
                         "iface:PREFIX,PORTS")
    kind, _, rest = io.partition(":")
    first, comma, second = rest.partition(",")
    if kind == "udp" and comma:
        host, base = _host_port(second, "io=udp:...,EHOST:BASE")
        parsed = ("udp", _host_port(first, "io=udp:IHOST:IPORT,..."), host, base)
    elif kind == "iface" and comma and first and second.isdigit() and int(second) > 1:
        parsed = ("iface", first, int(second))
    else:
        raise ValueError(f"io={io!r}: expected udp:IHOST:IPORT,EHOST:BASE or iface:PREFIX,PORTS")
    ids = {}
    for key in ("device", "election"):
        if key in query:
            if not query[key].isdigit() or int(query[key]) < 1:
                raise ValueError(f"{key}={query[key]!r}: expected a positive integer")
            ids[f"{key}_id"] = int(query[key])
    return P4RuntimeSpec(url.netloc, parsed, **ids)


def _io(parsed: tuple):
    if parsed[0] == "udp":
        return UdpIO(*parsed[1:])
    _, prefix, ports = parsed
    return InterfaceIO(lambda n: f"{prefix}{n}", ports)


def open_remote(kind: str, arg: str) -> RemoteTarget:
    from controller import launch

    if kind == "p4runtime":
        spec = parse_p4runtime(arg)
        return RemoteTarget(spec.address, _io(spec.io), device_id=spec.device_id,
                            election_id=spec.election_id)
    if kind == "switch":
        device = launch.SwitchProcess(arg)
        try:
            return LaunchedTarget(device, UdpIO(device.ingress, device.egress_host, device.egress_base))
        except BaseException:
            device.stop()
            raise
    device = launch.VethSwitchProcess(arg) if kind == "switch-veth" else launch.Bmv2Process()
    try:
        io = InterfaceIO(device.ns.outer, device.ports)
        if kind == "bmv2":
            return LaunchedTarget(device, io, config=device.config)
        return LaunchedTarget(device, io)
    except BaseException:
        device.stop()
        raise
