"""The fabric variant of the generated program decides what the software fabric decides.

The program text (`emit_program(..., fabric=True)`) runs in tests/p4/p4_interp.py (no p4c or
bmv2 here) holding a switch's entries plus its fabric control plane
(`compiler.p4.fabric.control_plane`: which ports are up, the member list, the group with the
physical up ports in place of 511). It is checked packet for packet, with Hypothesis:

* one switch: against the software switch followed by `switch.fabric_egress` (what
  `camus switch serve --fabric` does), on random rules naming the logical up port, random up
  port sets (none: a core) and random ingress ports;
* a whole k = 4 fat tree compiled by `controller.network.Network`: every switch a program
  interpreter, hop by hop, against `controller.network.Fabric` (the same deliveries on every
  host, the same packets on every link) and against the brute-force expectation computed from
  the subscriptions alone.

It is our reading of P4 and bmv2 (docs/p4.md); nothing here shows that p4c accepts the program.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.compile import compile_rules, compile_text
from compiler.p4 import emit_program
from compiler.p4.fabric import control_plane
from compiler.rules import parse_rules
from compiler.spec import load_spec
from controller.network import Fabric, Network
from controller.subscriptions import parse_subscriptions
from controller.topology import fat_tree, parse_graph
from p4rt.p4info import program_p4info
from pipeline.fabric import LOGICAL_UP
from switch.dataplane import load
from switch.fabric_egress import FabricEgress
from switch.packet import mold_payload, udp_frame
from tests.controller.routing_helpers import expected, message, received, subscriptions_text
from tests.controller.test_network import random_graph
from tests.p4.p4_grammar import parse as grammar_parse
from tests.p4.p4_interp import Interpreter
from tests.p4.p4_structure import problems
from tests.p4.test_p4_behaviour import SESSION, STOCKS, _random_itch_rules, add_order
from tests.switch.switch_helpers import ITCH_PORT

ROOT = Path(__file__).resolve().parents[2]
ITCH = load_spec(ROOT / "p4" / "itch" / "itch.p4")
INT = load_spec(ROOT / "p4" / "int" / "int.p4")
SLOTS = 4
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(min_value=0, max_value=2**32 - 1)


def _itch_frame(rng: random.Random, seq: int, msgs: list[bytes]) -> bytes:
    # Source ports and addresses vary, so the hash spreads packets over the up ports.
    return udp_frame(mold_payload(SESSION, seq, msgs), dst_port=ITCH_PORT,
                     src_port=rng.randrange(1024, 65536), src_ip=0x0A000000 | rng.randrange(1, 255))


def _software(pipeline, entries, up: tuple[int, ...], frame: bytes, in_port: int) -> list:
    """`camus switch serve --fabric`: the switch's copies, then the fabric's egress decisions
    (a copy for a port with nothing bound, like a core's 511, is not sent)."""
    egress = FabricEgress(up)
    out = []
    for port, copy in load(pipeline, entries, impl="python").process(frame, in_port):
        port = egress.port(in_port, port, frame)
        if port is not None and port != LOGICAL_UP:
            out.append((port, copy))
    return sorted(out)


def test_the_fabric_program_passes_the_structure_check_and_the_grammar():
    c = compile_rules(ITCH, [], static=True)
    program = emit_program(c.pipeline, SLOTS, fabric=True)
    assert problems(program, program_p4info(c.pipeline, fabric=True)) == []
    grammar_parse(program)
    assert program.count("hash(meta.fabric_up_index, HashAlgorithm.crc32") == 1
    assert emit_program(c.pipeline, SLOTS) != program and "fabric" not in emit_program(c.pipeline, SLOTS)


def test_the_fabric_program_needs_a_static_pipelines_bitmaps():
    c = compile_text((ROOT / "p4/itch/itch.p4").read_text(), 'stock == "GOOGL" : fwd(1)\n', name="itch")
    with pytest.raises(ValueError, match="512 bits"):
        emit_program(c.pipeline, fabric=True)


def test_control_plane_lists_every_port_the_members_and_the_expanded_group():
    entries = {"table_entries": [], "multicast_groups": [
        {"id": 7, "replicas": [{"port": 1, "rid": 0}, {"port": 3, "rid": 0}, {"port": LOGICAL_UP, "rid": 0}]}]}
    cp = control_plane((3, 4), (1, 2, 3, 4), entries)
    assert cp["multicast_groups"] == [{"id": 7, "replicas": [{"port": p, "rid": 0} for p in (1, 3, 4)]}]
    ports = {e["match"]["ingress_port"]["exact"]: e["params"] for e in cp["table_entries"]
             if e["table"] == "fabric_port"}
    assert ports == {1: {"from_up": 0, "up_ports": 2}, 2: {"from_up": 0, "up_ports": 2},
                     3: {"from_up": 1, "up_ports": 2}, 4: {"from_up": 1, "up_ports": 2}}
    members = [(e["match"]["up_index"]["exact"], e["params"]["port"]) for e in cp["table_entries"]
               if e["table"] == "fabric_up_member"]
    assert members == [(0, 3), (1, 4)]
    core = control_plane((), (1, 2), entries)  # a core: copies for 511 have nowhere to go
    assert core["multicast_groups"][0]["replicas"] == [{"port": 1, "rid": 0}, {"port": 3, "rid": 0}]
    for bad in [((3, 3), (1, 3)), ((5,), (1, 2)), ((LOGICAL_UP,), (1, LOGICAL_UP))]:
        with pytest.raises(ValueError):
            control_plane(*bad, entries)
    named = {"table_entries": [{"table": "itch_leaf", "match": {"state": {"exact": 1}}, "action": "mcast",
                                "params": {"ports": 1 << 1 | 1 << 3}}], "multicast_groups": []}
    with pytest.raises(ValueError, match="by number"):  # up port 3 named besides 511
        control_plane((3, 4), (1, 2, 3, 4), named)


@SETTINGS
@given(seeds)
def test_one_switch_runs_as_the_software_switch_with_its_fabric_egress(seed):
    """ITCH (several messages a packet, resubmission, per-copy pruning, fwd and mcast)."""
    rng = random.Random(seed)
    nports = rng.randint(2, 5)
    up = tuple(sorted(rng.sample(range(1, nports + 1), rng.randint(0, nports - 1))))
    down = [p for p in range(1, nports + 1) if p not in up]
    rules = _random_itch_rules(rng, down + [LOGICAL_UP] * 3)
    c = compile_rules(ITCH, parse_rules(rules, ITCH), static=True)
    cp = control_plane(up, range(1, nports + 1), c.entries)
    program = Interpreter(emit_program(c.pipeline, SLOTS, fabric=True), cp)
    ups = set()
    for i in range(12):
        msgs = [add_order(rng.choice(STOCKS), 1, rng.choice([1, 1000, 2000000])) for _ in range(rng.randint(1, SLOTS))]
        frame = _itch_frame(rng, i, msgs)
        in_port = rng.randint(1, nports)
        got = sorted(program.process(frame, in_port))
        assert got == _software(c.pipeline, c.entries, up, frame, in_port), (rules, up, in_port)
        assert in_port not in [p for p, _ in got]
        ups |= {p for p, _ in got if p in up}
    assert ups <= set(up)


@SETTINGS
@given(seeds)
def test_one_switch_single_message_application(seed):
    """INT (one message a packet): unicast fwd(511) resolved in ingress, mcast pruned in
    egress; other UDP traffic routed by ipv4_lpm, up, down or dropped."""
    rng = random.Random(seed)
    up = (3, 4)
    lines = []
    for _ in range(rng.randint(1, 4)):
        ports = sorted(set(rng.sample([1, 2, 3, 4, LOGICAL_UP], rng.randint(1, 2))) - {3, 4})
        lines.append(f"int_hop.switch_id == {rng.randint(0, 3)} : fwd({', '.join(map(str, ports or [1]))})")
    c = compile_rules(INT, parse_rules("\n".join(lines) + "\n", INT), static=True)
    # Routes for other traffic: one up (fwd(511)), one down, one dropped.
    routes = [(0x0A000000, 8, "fwd", {"port": LOGICAL_UP}), (0xC0A80000, 16, "fwd", {"port": 2}),
              (0xAC100000, 12, "drop", {})]
    c.entries["table_entries"] += [{"table": "ipv4_lpm", "match": {"ipv4.dst_addr": {"lpm": [v, n]}},
                                    "action": a, "params": p} for v, n, a, p in routes]
    cp = control_plane(up, (1, 2, 3, 4), c.entries)
    program = Interpreter(emit_program(c.pipeline, SLOTS, fabric=True), cp)
    app = c.application
    for _ in range(15):
        whole = 0
        for q, f in app.fields.items():
            whole |= rng.randint(0, 3) << (app.message_bytes * 8 - f.bit_offset - f.width)
        frame = udp_frame(whole.to_bytes(app.message_bytes, "big"),
                          dst_port=rng.choice([app.udp_port, app.udp_port, 5555]),  # 5555: routed
                          dst_ip=rng.choice([0xE8000001, 0x0A000001, 0xC0A80101, 0xAC100001]),
                          src_port=rng.randrange(1024, 65536))
        in_port = rng.randint(1, 4)
        assert sorted(program.process(frame, in_port)) == _software(c.pipeline, c.entries, up, frame, in_port)


class _ProgramSwitch:
    """A switch of the network as the fabric program: the interpreter holding the switch's
    entries and fabric control plane. It takes the fabric decisions itself."""

    def __init__(self, program: str, entries: dict):
        self.interp = Interpreter(program, entries)

    def process(self, frame: bytes, in_port: int) -> list:
        return self.interp.process(frame, in_port)


class _NoEgress:
    def port(self, in_port: int, egress: int, frame: bytes) -> int:
        return egress


def _program_fabric(net: Network) -> Fabric:
    fabric = Fabric.of(net, impl="python")
    program = emit_program(net.pipeline, SLOTS, fabric=True)
    for s in net.topo.switches:
        state = control_plane(net.topo.up.get(s, ()), sorted(net.topo.ports[s]), net.compiled[s])
        fabric.switches[s] = _ProgramSwitch(program, state)
        fabric.egress[s] = _NoEgress()
    return fabric


def _sorted(deliveries) -> dict:
    out: dict = {}
    for h, frame in deliveries:
        out.setdefault(h, []).append(frame)
    return {h: sorted(v) for h, v in out.items()}


def _same_network_behaviour(net: Network, rng: random.Random, packets: int) -> None:
    """Every packet from a random host: the same copies at every host from the programs as
    from the software fabric, exactly what the subscriptions ask for, the same link counts."""
    hosts = list(net.topo.hosts)
    software, p4 = Fabric.of(net, impl="python"), _program_fabric(net)
    wants = {h: net.routing.wants(h) for h in hosts}
    for i in range(packets):
        sender = rng.choice(hosts)
        msgs = [message(rng) for _ in range(rng.randint(1, SLOTS))]
        frame = _itch_frame(rng, 1000 * i + 1, msgs)
        got = p4.inject(sender, frame)
        assert _sorted(got) == _sorted(software.inject(sender, frame)), f"packet {i} from {sender}"
        assert received(got) == expected(wants, sender, 1000 * i + 1, msgs)
    assert p4.links == software.links  # the same up ports taken, packet for packet


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds, st.sampled_from(("mr", "tr")), st.sampled_from((1, 100)))
def test_a_fat_tree_of_fabric_programs_delivers_what_the_software_fabric_delivers(seed, policy, alpha):
    rng = random.Random(seed)
    topo = fat_tree(4)
    hosts = list(topo.hosts)
    subs = parse_subscriptions(subscriptions_text(rng, hosts, rng.randint(1, 8)), ITCH, set(hosts))
    _same_network_behaviour(Network(ITCH, topo, subs, policy, alpha), rng, 6)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seeds, st.sampled_from(("mst", "mst++")), st.integers(2, 7))
def test_a_general_graph_of_fabric_programs_delivers_what_the_software_fabric_delivers(seed, tree, n):
    """Spanning trees: no up ports, so what the program adds is ingress pruning alone; links
    off the tree carry nothing."""
    rng = random.Random(seed)
    topo = parse_graph(random_graph(rng, n, rng.randint(0, n), rng.randint(2, 6)))
    hosts = list(topo.hosts)
    subs = parse_subscriptions(subscriptions_text(rng, hosts, rng.randint(1, 8)), ITCH, set(hosts))
    _same_network_behaviour(Network(ITCH, topo, subs, "tr", 1, tree), rng, 6)


def test_net_compile_p4_writes_each_switchs_program_and_p4runtime_entries(tmp_path):
    """`camus net compile --p4`: one fabric program for every switch, the P4Info naming its
    fabric tables, and entries.txtpb holding the switch's entries plus its fabric control
    plane, which resolve through that P4Info and decode back to exactly that control plane;
    `camus net change` rewrites the entries of the switches it recompiles."""
    import json

    from google.protobuf import text_format

    from camus.cli import main
    from controller.fabric_p4 import switch_entries
    from p4rt.entries import entry_dict
    from p4rt.index import P4InfoIndex
    from p4rt.protos import p4info_pb2, p4runtime_pb2

    subs = tmp_path / "subs.txt"
    subs.write_text('h1: stock == "GOOGL"\nh6: price > 100\n')
    out = tmp_path / "net"
    assert main(["net", "compile", "p4/itch/itch.p4", str(subs), "--topology", "fattree:4",
                 "--out", str(out), "--p4"]) == 0
    topo = fat_tree(4)
    programs = {(out / "switches" / s / "program.p4").read_text() for s in topo.switches}
    assert len(programs) == 1 and "fabric_up_member.apply();" in programs.pop()

    def decoded(s: str) -> tuple[list, list]:
        info = text_format.Parse((out / "switches" / s / "p4info.txtpb").read_text(), p4info_pb2.P4Info())
        req = text_format.Parse((out / "switches" / s / "entries.txtpb").read_text(), p4runtime_pb2.WriteRequest())
        index = P4InfoIndex(info)
        tables = [entry_dict(index, u.entity.table_entry) for u in req.updates if u.entity.HasField("table_entry")]
        groups = [u.entity.packet_replication_engine_entry.multicast_group_entry for u in req.updates
                  if u.entity.HasField("packet_replication_engine_entry")]
        return tables, [sorted(r.egress_port for r in g.replicas) for g in groups]

    for s in ("t0_0", "a0_0", "c0"):
        entries = json.loads((out / "switches" / s / "entries.json").read_text())
        want = switch_entries(topo, s, entries)
        tables, groups = decoded(s)
        assert [e for e in tables if e["table"].startswith("fabric")] == \
            [e for e in want["table_entries"] if e["table"].startswith("fabric")]
        assert len(tables) == len(want["table_entries"])
        assert groups == [sorted(r["port"] for r in g["replicas"]) for g in want["multicast_groups"]]
        assert all(LOGICAL_UP not in g for g in groups)
    before = (out / "switches" / "t0_0" / "entries.txtpb").read_text()
    assert main(["net", "change", "--net", str(out), "--add", 'h2: stock == "MSFT"']) == 0
    after = (out / "switches" / "t0_0" / "entries.txtpb").read_text()
    assert after != before
    tables, _ = decoded("t0_0")
    entries = json.loads((out / "switches" / "t0_0" / "entries.json").read_text())
    assert len(tables) == len(switch_entries(topo, "t0_0", entries)["table_entries"])


def test_controller_push_fabric_checks_the_targets_p4info_before_writing(tmp_path, capsys):
    """`camus controller push --fabric` adds the switch's fabric control plane. camus's
    software switch has no fabric tables (it takes the decisions with --fabric), so there the
    push stops with a clear error before writing anything; without --fabric it succeeds."""
    from camus.cli import main
    from controller.p4runtime_client import P4RuntimeClient
    from p4rt.protos import p4runtime_pb2
    from switch.device import Device
    from switch.p4runtime_server import serve

    subs = tmp_path / "subs.txt"
    subs.write_text('h1: stock == "GOOGL"\n')
    out = tmp_path / "net"
    assert main(["net", "compile", "p4/itch/itch.p4", str(subs), "--topology", "fattree:4", "--out", str(out)]) == 0
    server, port = serve(Device("python"), "127.0.0.1:0", max_workers=4)
    try:
        target = f"127.0.0.1:{port}"
        switch = str(out / "switches" / "t0_0")
        assert main(["controller", "push", "--target", target, "--pipeline", switch, "--fabric"]) == 2
        assert "fabric_port" in capsys.readouterr().err
        with P4RuntimeClient(target, 1, 2, 5.0) as client:
            client.arbitrate()
            held = list(client.read([p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())]))
        assert held == []  # nothing written
        assert main(["controller", "push", "--target", target, "--pipeline", switch]) == 0
        import shutil

        alone = shutil.copytree(switch, tmp_path / "alone")  # a compiled pipeline outside a network
        capsys.readouterr()
        assert main(["controller", "push", "--target", target, "--pipeline", str(alone), "--fabric"]) == 2
        assert "not NET/switches/S" in capsys.readouterr().err
    finally:
        server.stop(0).wait(5)
