"""`camus net ...`: a network of switches compiled from one subscription set, and run.

`camus net compile` writes DIR/network.json (switches, layers, links with port numbers,
hosts), one pipeline directory per switch (DIR/switches/NAME/, as `camus compile --out`
writes, so `camus switch run` and `camus eval` work on each) and DIR/stats.json.
`camus net run` forwards pcaps injected at hosts through every switch of DIR in this
process (`controller.network.Fabric`) and writes what each host received.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from compiler.errors import CamusError

DEFAULT_TREE = "mst++"
KAFKA_SPEC = Path(__file__).resolve().parent.parent / "p4" / "kafka" / "kafka.p4"  # the broker's


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("net", help="compile and run networks of switches",
                                   description="Routing on networks of switches (docs/routing.md).")
    sub = parser.add_subparsers(dest="net_command", metavar="SUBCOMMAND")
    sub.required = True
    c = sub.add_parser("compile", help="compile subscriptions into every switch of a network",
                       description="Compute each switch port's filter set (policy MR or TR on a fat "
                                   "tree, a spanning tree on a general graph), compile each "
                                   "switch's rules, and write the network to --out.")
    c.add_argument("spec", help="annotated P4_16 header spec, e.g. p4/itch/itch.p4")
    c.add_argument("subscriptions", help="one subscription a line: `HOST: FILTER`; # comments")
    where = c.add_mutually_exclusive_group(required=True)
    where.add_argument("--topology", metavar="fattree:K", help="a k-ary fat tree, e.g. fattree:4")
    where.add_argument("--graph", metavar="FILE", help="a graph file: `A B` links, `host H A`")
    c.add_argument("--tree", choices=("mst", "mst++"), default=DEFAULT_TREE,
                   help=f"spanning tree for --graph (default {DEFAULT_TREE})")
    c.add_argument("--policy", choices=("mr", "tr"), default="tr",
                   help="fat tree up-port policy: mr = memory (up is `true`), tr = traffic "
                        "(default; general graphs always route as tr)")
    c.add_argument("--alpha", type=_positive, default=1, metavar="N",
                   help="round constants on ports that lead to switches to multiples of N "
                        "(default 1: exact)")
    c.add_argument("--out", required=True, metavar="DIR", help="output directory")
    c.add_argument("--p4", action="store_true",
                   help="also write each switch's P4 program (the fabric variant, for bmv2), "
                        "P4Info and P4Runtime entries (docs/routing.md)")
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run pcaps through a compiled network in this process",
                       description="Inject each pcap's frames at a host (they enter its access "
                                   "switch), forward hop by hop, and write OUT/HOST.pcap for "
                                   "every host that received anything and OUT/links.json.")
    _net_option(r)
    r.add_argument("--inject", action="append", required=True, metavar="HOST=IN.pcap",
                   help="frames sent by HOST; repeatable (files run in the order given)")
    r.add_argument("--out-dir", required=True, metavar="OUT")
    r.add_argument("--impl", choices=("native", "python"), default="native",
                   help="data-plane implementation (default native)")
    r.set_defaults(func=cmd_run)

    ch = sub.add_parser("change", help="add or remove subscriptions of a compiled network",
                        description="Apply each --add and --remove in the order given: compile "
                                    "only the switches whose filter sets change (incrementally, "
                                    "once a switch's compiler is built by its first change), "
                                    "rewrite their directories and DIR/subscriptions.txt, and "
                                    "report per change the switches compiled and changed, the "
                                    "entries written and the time.")
    _net_option(ch)
    ch.add_argument("--add", dest="ops", action="append", type=lambda t: ("add", t), default=[],
                    metavar="'HOST: FILTER'")
    ch.add_argument("--remove", dest="ops", action="append", type=lambda t: ("remove", t),
                    metavar="'HOST: FILTER'")
    ch.add_argument("--fail-link", dest="ops", action="append", type=lambda t: ("fail-link", t),
                    metavar="A,B", help="general graphs: the link between switches A and B goes down")
    ch.add_argument("--fail-switch", dest="ops", action="append", type=lambda t: ("fail-switch", t),
                    metavar="S", help="general graphs: switch S goes down")
    ch.add_argument("--json", action="store_true", help="print the reports as JSON lines")
    ch.set_defaults(func=cmd_change)

    u = sub.add_parser("up", help="the network as processes in Mininet (root; Debian's mininet)",
                       description="One `camus switch serve --fabric` per switch, programmed over "
                                   "P4Runtime; hosts in their own namespaces. With --inject: send, "
                                   "capture on every host, write --out-dir, and stop; without: "
                                   "stay up until SIGINT/SIGTERM or `camus net down`.")
    _net_option(u)
    u.add_argument("--inject", action="append", default=[], metavar="HOST=IN.pcap")
    u.add_argument("--out-dir", metavar="OUT", help="with --inject: OUT/HOST.pcap per receiving host")
    u.add_argument("--settle", type=_seconds, default=2.0, metavar="S",
                   help="seconds to wait after the last frame is sent (default 2)")
    u.add_argument("--impl", choices=("native", "python"), default="native")
    _switch_option(u)
    u.set_defaults(func=cmd_up)
    d = sub.add_parser("down", help="stop what `camus net up --net DIR` started")
    _net_option(d)
    d.set_defaults(func=cmd_down)

    sv = sub.add_parser("serve", help="a network's controller for brokers on its hosts "
                                      "(camus serve --target fabric://...)",
                        description="Run the network in this process with no subscriptions; host "
                                    "brokers (`camus serve --target fabric://LISTEN?host=H`) "
                                    "publish theirs and send produced records into their host's "
                                    "access switch over loopback UDP; copies go to the brokers "
                                    "of the hosts they reach (docs/routing.md).")
    where = sv.add_mutually_exclusive_group(required=True)
    where.add_argument("--topology", metavar="fattree:K", help="a k-ary fat tree, e.g. fattree:4")
    where.add_argument("--graph", metavar="FILE", help="a graph file: `A B` links, `host H A`")
    sv.add_argument("--tree", choices=("mst", "mst++"), default=DEFAULT_TREE)
    sv.add_argument("--policy", choices=("mr", "tr"), default="tr")
    sv.add_argument("--alpha", type=_positive, default=1, metavar="N")
    sv.add_argument("--listen", default=None, metavar="HOST:PORT|unix:PATH",
                    help="the control API, JSON lines over TCP or a Unix socket (default "
                         "127.0.0.1, any free port; with --mininet, a Unix socket in a "
                         "temporary directory, which the hosts' namespaces reach)")
    sv.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                    help="address of the hosts' UDP sockets (default 127.0.0.1)")
    sv.add_argument("--state", metavar="DIR", help="keep the topic numbers in DIR/topics.json")
    sv.add_argument("--impl", choices=("native", "python"), default="native")
    sv.add_argument("--mininet", action="store_true",
                    help="the network in Mininet (root): switches as processes (--switch) "
                         "programmed over P4Runtime, brokers on the hosts "
                         "(their target: fabric:///SOCKET?host=H&io=iface:IFACE)")
    _switch_option(sv, " (with --mininet)")
    sv.set_defaults(func=cmd_serve)


def _switch_option(p: argparse.ArgumentParser, when: str = "") -> None:
    p.add_argument("--switch", choices=("auto", "bmv2", "camus"), default="camus",
                   help=f"each switch's process{when}: camus (default: camus switch serve "
                        "--fabric), bmv2 (simple_switch_grpc running the fabric program, "
                        "compiled by p4c-bm2-ss), or auto: bmv2 where both tools are on PATH, "
                        "else camus")


def _net_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--net", required=True, metavar="DIR", help="directory written by camus net compile")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError("alpha must be at least 1")
    return n


def _seconds(text: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= t < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds >= 0")
    return t


def load_topology(args):
    from compiler.cli import _read_text
    from controller.topology import TopologyError, fat_tree, parse_graph

    if args.topology:
        kind, _, k = args.topology.partition(":")
        if kind != "fattree" or not k.isdigit():
            raise TopologyError(f"--topology {args.topology!r}: expected fattree:K")
        return fat_tree(int(k))
    return parse_graph(_read_text(Path(args.graph)), args.graph)


def make_out_dir(path: str, command: str) -> Path | None:
    """`path` as a directory (created with its parents), or None once the reason is said."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        print(f"camus net {command}: error: --out-dir {path}: exists and is not a directory",
              file=sys.stderr)
        return None
    except OSError as exc:
        print(f"camus net {command}: error: --out-dir {path}: {exc.strerror}", file=sys.stderr)
        return None
    return out


def cmd_compile(args) -> int:
    from compiler.cli import _read_text
    from compiler.compile import no_cyclic_gc
    from compiler.spec import parse_spec
    from controller.network import Network
    from controller.subscriptions import parse_subscriptions
    from controller.topology import TopologyError

    try:
        spec = parse_spec(_read_text(Path(args.spec)), name=Path(args.spec).stem, source=args.spec)
        topo = load_topology(args)
        with no_cyclic_gc():
            subs = parse_subscriptions(_read_text(Path(args.subscriptions)), spec,
                                       set(topo.hosts), args.subscriptions)
        net = Network(spec, topo, subs, args.policy, args.alpha, args.tree)
    except (CamusError, TopologyError, OSError, OverflowError) as exc:
        # OverflowError: more distinct port sets or states than their ids can number.
        print(f"camus net compile: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:  # past what controller.memory foresaw: the subscriptions' share
        print("camus net compile: error: out of memory (the network's size fits; its "
              "subscriptions took the rest)", file=sys.stderr)
        return 2
    try:
        net.write(args.out)
        # What `camus net change` reads the network back with.
        Path(args.out, f"{spec.name}.p4").write_bytes(Path(args.spec).read_bytes())
        write_subscriptions(Path(args.out) / "subscriptions.txt", subs)
        if args.p4:
            from controller.fabric_p4 import write_switches

            write_switches(args.out)
    except OSError as exc:
        print(f"camus net compile: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    s = net.summary()
    layers = ", ".join(f"{layer} {v['entries']} (max {v['max']})"
                       for layer, v in s["entries"]["per_layer"].items())
    print(f"{s['subscriptions']} subscriptions, {len(topo.switches)} switches -> "
          f"{s['entries']['total']} entries ({layers}) in {s['compile_seconds']['total']:.2f} s; "
          f"wrote {args.out}/network.json, stats.json, switches/", file=sys.stderr)
    return 0


def cmd_run(args) -> int:
    from controller.network import Fabric, RoutingLoop
    from switch.pcap import PcapError, PcapReader, PcapWriter

    injects = _injects(args.inject, "run")
    if injects is None:
        return 2
    try:
        fabric = Fabric.load(args.net, args.impl)
    except (OSError, ValueError, KeyError) as exc:
        print(f"camus net run: error: cannot load {args.net}: {exc}", file=sys.stderr)
        return 2
    for host, _ in injects:
        if host not in fabric.topo.hosts:
            print(f"camus net run: error: no host {host!r} in {args.net}", file=sys.stderr)
            return 2
    out = make_out_dir(args.out_dir, "run")
    if out is None:
        return 2
    writers: dict[str, tuple] = {}
    sent = delivered = 0
    try:
        for host, path in injects:
            with open(path, "rb") as fh:
                reader = PcapReader(fh)
                for record in reader:
                    sent += 1
                    for dest, frame in fabric.inject(host, record.data):
                        delivered += 1
                        if dest not in writers:
                            stream = open(out / f"{dest}.pcap", "wb")
                            writers[dest] = (stream, PcapWriter(stream, reader.nanoseconds))
                        writers[dest][1].write(frame, record.seconds, record.fraction)
                if reader.truncated:
                    print(f"camus net run: {path}: {reader.truncated}; the records before it "
                          "were sent", file=sys.stderr)
    except (OSError, PcapError) as exc:
        print(f"camus net run: error: {exc}", file=sys.stderr)
        return 2
    except RoutingLoop as exc:
        print(f"camus net run: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for stream, _ in writers.values():
            stream.close()
    (out / "links.json").write_text(json.dumps(fabric.links_json(), indent=2) + "\n")
    print(f"{sent} frames sent, {delivered} delivered to {len(writers)} hosts; "
          f"wrote {out}/links.json", file=sys.stderr)
    return 0


def _injects(texts: list[str], command: str) -> list[tuple[str, str]] | None:
    out = []
    for text in texts:
        host, eq, path = text.partition("=")
        if not eq or not host or not path:
            print(f"camus net {command}: error: --inject {text!r}: expected HOST=IN.pcap",
                  file=sys.stderr)
            return None
        out.append((host, path))
    return out


def cmd_up(args) -> int:
    import os
    import signal
    import threading

    from controller.emulation import Emulation, EmulationError

    injects = _injects(args.inject, "up")
    if injects is None:
        return 2
    if injects and not args.out_dir:
        print("camus net up: error: --inject needs --out-dir", file=sys.stderr)
        return 2
    if args.out_dir and make_out_dir(args.out_dir, "up") is None:  # before Mininet starts
        return 2
    try:
        emulation = Emulation(args.net, args.impl, args.switch)
    except EmulationError as exc:
        print(f"camus net up: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as exc:
        print(f"camus net up: error: cannot load {args.net}: {exc}", file=sys.stderr)
        return 2
    unknown = [h for h, _ in injects if h not in emulation.topo.hosts]
    if unknown:
        print(f"camus net up: error: no host {unknown[0]!r} in {args.net}", file=sys.stderr)
        return 2
    pid_file = Path(args.net) / "up.pid"
    try:
        emulation.start()
        print(f"up: {len(emulation.topo.switches)} switches, {len(emulation.topo.hosts)} hosts",
              flush=True)
        if injects:
            counts = emulation.exchange(injects, args.out_dir, args.settle)
            print(f"received: {sum(counts.values())} frames at {len(counts)} hosts; "
                  f"wrote {args.out_dir}", file=sys.stderr)
            return 0
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        pid_file.write_text(f"{os.getpid()}\n")
        print("ready", flush=True)
        while not stop.wait(0.5):
            pass
        return 0
    except EmulationError as exc:
        print(f"camus net up: error: {exc}", file=sys.stderr)
        return 2
    finally:
        emulation.stop()
        if pid_file.exists() and pid_file.read_text().strip() == str(os.getpid()):
            pid_file.unlink()


def cmd_down(args) -> int:
    import os
    import signal
    import time

    pid_file = Path(args.net) / "up.pid"
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        print(f"camus net down: error: nothing of {args.net} is up (no {pid_file})", file=sys.stderr)
        return 2
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        print(f"camus net down: {args.net} was not up (stale {pid_file} removed)", file=sys.stderr)
        return 0
    for _ in range(120):  # the network stops its switches and removes its links
        if not pid_file.exists():
            return 0
        time.sleep(0.25)
    print(f"camus net down: process {pid} did not stop in 30 s", file=sys.stderr)
    return 1


def cmd_serve(args) -> int:
    import logging
    import signal
    import threading

    from compiler.spec import load_spec
    from controller.fabric_service import FabricService, StateError, read_topics
    from controller.network import Network
    from controller.topology import TopologyError

    import shutil
    import tempfile

    from controller.emulation import Emulation, EmulationError

    why = _address_problem(args.listen, args.bind)
    if args.switch != "camus" and not args.mininet:
        # without Mininet the network runs in this process, on camus's switch only
        why = f"--switch {args.switch} needs --mininet"
    if why:
        print(f"camus net serve: error: {why}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="camus-net-serve-")) if args.mininet else None
    listen = args.listen or (f"unix:{work / 'fabric.sock'}" if work else "127.0.0.1:0")
    if listen.startswith("unix:"):
        address = listen[5:]
    else:
        host, _, port = listen.rpartition(":")
        address = (host, int(port))
    emulation = service = None
    try:
        topo = load_topology(args)
        if args.state:
            read_topics(Path(args.state))  # its mistakes said before Mininet starts
        net = Network(load_spec(KAFKA_SPEC), topo, [], args.policy, args.alpha, args.tree)
        if work is not None:
            net.write(work / "net")
            emulation = Emulation(work / "net", args.impl, args.switch)
            emulation.start()
        service = FabricService(net, address, args.bind, Path(args.state) if args.state else None,
                                args.impl, emulation, work / "net" if work else None).start()
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        where = service.address if isinstance(service.address, str) else "%s:%d" % service.address
        print(f"camus: fabric controller on {where} ({len(topo.switches)} switches, "
              f"{len(topo.hosts)} hosts: {', '.join(sorted(topo.hosts))})", flush=True)
        if emulation is not None:  # how to reach each host: its namespace and interface
            for h in topo.hosts:
                node = emulation.host(h)
                print(f"host {h} pid {node.pid} iface {node.name}-eth0", flush=True)
            print("ready", flush=True)
        while not stop.wait(0.5):
            pass
        return 0
    except (OSError, TopologyError, CamusError, EmulationError, StateError) as exc:
        print(f"camus net serve: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("camus net serve: error: out of memory", file=sys.stderr)
        return 2
    finally:
        if service is not None:
            service.close()
        if emulation is not None:
            emulation.stop()
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _address_problem(listen: str | None, bind: str) -> str | None:
    """What is wrong with `camus net serve`'s --listen or --bind, or None: said before
    anything starts (a name that does not resolve failed the same way for either)."""
    import socket

    named = [("--bind", bind)]
    if listen and listen.startswith("unix:"):
        parent = Path(listen[5:]).parent
        if not parent.is_dir():
            return f"--listen {listen!r}: no directory {parent}"
    elif listen:
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit() or int(port) > 65535:
            return f"--listen {listen!r}: expected HOST:PORT (a port 0-65535) or unix:PATH"
        named.append(("--listen", host))
    for option, host in named:
        try:
            socket.getaddrinfo(host, None)
        except socket.gaierror as exc:
            return f"{option} {host!r}: {exc.strerror}"
    return None


def write_subscriptions(path: Path, subs) -> None:
    path.write_text("".join(f"{s.host}: {s.text}\n" for s in subs))


def cmd_change(args) -> int:
    import time

    from compiler.spec import load_spec
    from controller.network import Network
    from controller.subscriptions import parse_subscriptions

    if not args.ops:
        print("camus net change: error: nothing to do (give --add or --remove)", file=sys.stderr)
        return 2
    for op, text in args.ops:
        if op == "fail-link" and (text.count(",") != 1 or not all(text.split(","))):
            print(f"camus net change: error: --fail-link {text!r}: expected two switches, A,B",
                  file=sys.stderr)
            return 2
    d = Path(args.net)
    try:
        doc = json.loads((d / "network.json").read_text())
        spec = load_spec(d / f"{doc['application']}.p4")
        hosts = {h["name"] for h in doc["hosts"]}
        subs = parse_subscriptions((d / "subscriptions.txt").read_text(), spec, hosts,
                                   str(d / "subscriptions.txt"))
        changes = [(op, parse_subscriptions(text, spec, hosts, f"--{op}") if op in ("add", "remove")
                    else None) for op, text in args.ops]
        started = time.perf_counter()
        net = Network.load(d, spec, subs)
        loaded = time.perf_counter() - started
    except (CamusError, OSError, ValueError, KeyError, TypeError) as exc:
        # TypeError, KeyError: a network.json of another shape than camus net compile writes.
        print(f"camus net change: error: {exc}", file=sys.stderr)
        return 2
    for (op, parsed), (_, text) in zip(changes, args.ops):
        if parsed is not None and len(parsed) != 1:
            print(f"camus net change: error: --{op} {text!r}: expected one `HOST: FILTER`",
                  file=sys.stderr)
            return 2
    touched: set[str] = set()
    failed = False  # a change that cannot be made: the ones before it are kept and written
    for (op, parsed), (_, text) in zip(changes, args.ops):
        if parsed is None:  # a failure
            try:
                report = net.fail(link=tuple(text.split(",", 1)) if op == "fail-link" else None,
                                  switch=text if op == "fail-switch" else None)
            except ValueError as exc:
                print(f"camus net change: error: --{op} {text}: {exc}", file=sys.stderr)
                failed = True
                break
        elif op == "add":
            sub = parsed[0]
            report = net.add(sub)
            subs.append(sub)
        else:
            sub = parsed[0]
            at = next((i for i, s in enumerate(subs) if s.host == sub.host and s.filter == sub.filter), None)
            if at is None:
                print(f"camus net change: error: --remove {text!r}: {sub.host} has no such "
                      "subscription", file=sys.stderr)
                failed = True
                break
            report = net.remove(sub)
            subs.pop(at)
        touched |= set(report.reached)  # their stats.json changes even if no entry did
        if args.json:
            print(json.dumps({"change": op, "subscription": text, **report.to_json()}))
        else:
            print(f"{op} {text}: {len(report.reached)} switches compiled, "
                  f"{len(report.switches)} changed ({', '.join(report.switches) or 'none'}), "
                  f"{report.writes} writes, "
                  f"{report.seconds * 1000:.1f} ms")
    try:
        net.write(d, only=touched)
        write_subscriptions(d / "subscriptions.txt", subs)
        from controller.fabric_p4 import has_p4, write_switches

        if has_p4(d):  # compiled with --p4: the touched switches' P4Runtime entries follow
            write_switches(d, only=touched)
    except OSError as exc:
        print(f"camus net change: error: cannot write {d}: {exc}", file=sys.stderr)
        return 2
    print(f"read the network back in {loaded:.2f} s; rewrote {len(touched)} switch directories",
          file=sys.stderr)
    return 1 if failed else 0
