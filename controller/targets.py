"""Which targets exist, by spec: `open_target("embedded:native")` and the rest.

The factory lives apart from the interface (`controller.target`) because it imports every
implementation, and each implementation imports the interface: together they were one
import circle of six modules. The implementations are imported when a spec names them, so
that the broker (which imports this module) loads neither gRPC nor the fabric's client
unless its target needs them.
"""

from __future__ import annotations

from controller.target import Target

KNOWN = ("embedded:native, embedded:python, switch[:IMPL], switch-veth[:IMPL], bmv2, "
         "p4runtime://HOST:PORT?io=udp:INGRESS_HOST:INGRESS_PORT,EGRESS_HOST:BASE, "
         "fabric://HOST:PORT?host=H, fabric:///SOCKET?host=H&io=iface:NAME")


def check_spec(spec: str) -> tuple[str, str]:
    """(kind, argument) of a target spec; ValueError saying what is known if it names no
    target (so `camus serve --target` can refuse it in one line before anything starts)."""
    kind, _, arg = spec.partition(":")
    if kind in ("embedded", "switch", "switch-veth"):
        from switch.dataplane import IMPLEMENTATIONS

        if (arg or "native") not in IMPLEMENTATIONS:
            raise ValueError(f"{kind}:IMPL takes one of {', '.join(IMPLEMENTATIONS)}")
        return kind, arg or "native"
    if kind == "bmv2" and not arg:
        return kind, ""
    if kind == "p4runtime":
        from controller.remote_spec import parse_p4runtime

        parse_p4runtime(spec)
        return kind, spec
    if kind == "fabric":
        parse_fabric(spec)
        return kind, spec
    raise ValueError(f"unknown target {spec!r} (known: {KNOWN})")


def open_target(spec: str) -> Target:
    """The target `spec` names, not yet loaded:
    - "embedded:native" or "embedded:python": the in-process software switch
      (`controller.embedded`);
    - "switch[:IMPL]": `camus switch serve` started as a child process, reached over
      P4Runtime and loopback UDP (`controller.remote`, `controller.launch`);
    - "switch-veth[:IMPL]": the same inside a private network namespace behind veth pairs
      (root only): bmv2's plumbing with a switch that runs everywhere;
    - "bmv2": `simple_switch_grpc` so, with the Kafka program compiled by p4c-bm2-ss
      (both must be on PATH);
    - "p4runtime://HOST:PORT?io=udp:IHOST:IPORT,EHOST:BASE": a device already running:
      frames to IHOST:IPORT, port N's copies from EHOST:BASE+N (`camus switch serve
      --ingress udp:IHOST:IPORT --egress-range udp:EHOST:BASE`); `io=iface:PREFIX,PORTS`
      reads and writes interfaces PREFIX0..PREFIX{PORTS-1}; `device=` and `election=` set
      the P4Runtime device and election ids;
    - "fabric://HOST:PORT?host=H[&impl=IMPL]": host H of the network whose controller
      (`camus net serve`) listens at HOST:PORT (`controller.fabric_target`)."""
    kind, arg = check_spec(spec)
    if kind == "fabric":
        from controller.fabric_target import FabricTarget

        address, host, impl, iface = parse_fabric(arg)
        return FabricTarget(address, host, impl, iface)
    if kind == "embedded":
        from controller.embedded import EmbeddedTarget

        return EmbeddedTarget(arg)
    from controller.remote_spec import open_remote

    return open_remote(kind, arg)


def parse_fabric(spec: str) -> tuple[tuple[str, int] | str, str, str, str | None]:
    """(controller address: (host, port) or a Unix socket's path, network host, switch
    implementation, interface or None) of `fabric://HOST:PORT?host=H[&impl=IMPL]` or
    `fabric:///PATH?host=H[&impl=IMPL][&io=iface:NAME]`; ValueError saying what is wrong."""
    from urllib.parse import parse_qs, urlsplit

    from switch.dataplane import IMPLEMENTATIONS

    url = urlsplit(spec)
    try:
        port = url.port
    except ValueError:
        port = None
    address: tuple[str, int] | str | None = None
    if url.scheme == "fabric" and url.hostname and port is not None:
        address = (url.hostname, port)
    elif url.scheme == "fabric" and not url.netloc and url.path.startswith("/"):
        address = url.path
    if address is None:
        raise ValueError(f"{spec!r}: expected fabric://HOST:PORT?host=H or "
                         "fabric:///SOCKET_PATH?host=H")
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    unknown = set(query) - {"host", "impl", "io"}
    if unknown:
        raise ValueError(f"{spec!r}: unknown parameter(s) {', '.join(sorted(unknown))} "
                         "(known: host, impl, io)")
    iface = None
    if "io" in query:
        kind, _, iface = query["io"].partition(":")
        if kind != "iface" or not iface:
            raise ValueError(f"io={query['io']!r}: expected iface:NAME")
    if not query.get("host"):
        raise ValueError(f"{spec!r}: host= names this broker's host in the network")
    impl = query.get("impl", "native")
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl= takes one of {', '.join(IMPLEMENTATIONS)}")
    return address, query["host"], impl, iface
