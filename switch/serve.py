"""`camus switch serve`: the software switch online.

Loads DIR/pipeline.json (and DIR/entries.json, if present) into a `Device` (or, without
`--pipeline`, starts empty and forwards nothing until a controller sets a pipeline), binds the
ports given with `--port N=BINDING` (and ingress-only sockets with `--ingress [N=]BINDING`;
`--egress-range udp:HOST:BASE` sends copies for every other port N to HOST:BASE+N, so a
controller whose subscriptions come and go, like the broker's remote target, needs no
binding per port), serves
P4Runtime on `--p4runtime` (127.0.0.1:9559 by default; `none` to disable) so a controller can
change entries live, and forwards until SIGINT or SIGTERM, then prints the counters.

Frames arriving on bound ports have no time of their own: stateful rules (IR 4) see each at
its data plane's clock as it is processed (the native switch's: real time in µs since the
epoch, docs/stateful.md "Running it").

Once everything is bound it prints one line per binding and a final `ready` line (stdout,
flushed), so scripts and tests can wait for it; with port 0 the real addresses appear there.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from switch.cli import format_counters
from switch.dataplane import IMPLEMENTATIONS
from switch.device import Device, config_from_dir
from switch.fabric_egress import FabricEgress, parse_up_ports
from switch.ports import PortError, Ports, parse_binding, parse_port_option, parse_range

DEFAULT_P4RUNTIME = "127.0.0.1:9559"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the switch online: bound ports, P4Runtime control",
                       description="Forward frames between bound ports through the pipeline; serve "
                                   "P4Runtime so entries can change live. Stops on SIGINT/SIGTERM.")
    p.add_argument("--pipeline", metavar="DIR",
                   help="directory holding pipeline.json (and entries.json, loaded at start if present); "
                        "without it the switch waits for a controller's SetForwardingPipelineConfig")
    p.add_argument("--p4runtime", default=DEFAULT_P4RUNTIME, metavar="HOST:PORT",
                   help=f"P4Runtime listen address (default {DEFAULT_P4RUNTIME}; port 0 = ephemeral; "
                        "'none' = no P4Runtime)")
    p.add_argument("--port", action="append", default=[], metavar="N=BINDING",
                   help="bind switch port N: udp:HOST:PORT[@BINDHOST:BINDPORT] (frames as UDP payloads) "
                        "or iface:NAME (AF_PACKET); repeatable")
    p.add_argument("--ingress", action="append", default=[], metavar="[N=]udp:HOST:PORT",
                   help="a receive-only UDP socket bound to HOST:PORT whose frames enter on port N "
                        "(default 0); repeatable")
    p.add_argument("--egress-range", metavar="udp:HOST:BASE",
                   help="copies for a port N with no --port binding go to HOST:BASE+N as UDP payloads "
                        "(one sending socket for all of them)")
    p.add_argument("--fabric", metavar="UP_PORTS", nargs="?", const="",
                   help="a switch inside a network of switches (docs/routing.md): never send a "
                        "copy back out of its ingress port, and send copies for the logical up "
                        "port 511 out of one of UP_PORTS (comma-separated; none for a core)")
    p.add_argument("--impl", choices=IMPLEMENTATIONS, default="native", help="data plane (default native)")
    p.add_argument("--device-id", type=int, default=1, metavar="N", help="P4Runtime device id (default 1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    device = Device(args.impl, args.device_id)
    if args.pipeline is not None:
        try:
            config, entries = config_from_dir(args.pipeline)
            device.install(config, entries)
        except (OSError, ValueError) as exc:
            print(f"camus switch serve: cannot load {args.pipeline}: {exc}", file=sys.stderr)
            return 2
    ports = Ports(device)
    if args.fabric is not None:
        try:
            ports.fabric = FabricEgress(parse_up_ports(args.fabric))
        except ValueError as exc:
            print(f"camus switch serve: --fabric: {exc}", file=sys.stderr)
            return 2
    server = None
    try:
        if args.egress_range is not None:
            ports.set_range(parse_range(args.egress_range))
        for text in args.port:
            number, spec = parse_port_option(text)
            ports.add(parse_binding(number, spec))
        for text in args.ingress:
            number, spec = parse_port_option(text, default_number=0)
            if spec.startswith("udp:") and "@" not in spec:
                spec = "udp:@" + spec[4:]  # an ingress binding only listens: the address is local
            ports.add(parse_binding(number, spec), egress=False)
        if args.p4runtime != "none":
            from switch.p4runtime_server import serve  # grpc only when P4Runtime is wanted

            server, p4rt_port = serve(device, args.p4runtime)
            host = args.p4runtime.rpartition(":")[0]
            print(f"p4runtime {host}:{p4rt_port} device {args.device_id}", flush=True)
    except (PortError, OSError, RuntimeError) as exc:
        print(f"camus switch serve: {exc}", file=sys.stderr)
        ports.stop()
        return 2

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    for port in ports.bindings:
        print(f"port {port.number}: {port.description}", flush=True)
    if ports.range is not None:
        print(f"other ports: {ports.range.description}", flush=True)
    ports.start()
    print("ready", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        ports.stop()
        if server is not None:
            server.stop(grace=1).wait(2)
    with device.lock:
        if device.dataplane is not None:
            print(format_counters(device.dataplane.counters()))
    print(f"unbound egress copies: {ports.unbound}")
    return 0
