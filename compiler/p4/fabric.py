"""The fabric variant of the generated program: a switch inside a network of switches.

A switch of a network (docs/routing.md) runs rules whose ports cannot depend on where a
packet came from, and names its up ports as one logical port (511). The software switch
takes the three per-copy decisions this needs at its egress (`switch.fabric_egress`); the
fabric variant of the program (`emit_program(..., fabric=True)`) takes the same ones:

1. **The up-port choice, in ingress.** `fabric_port`, keyed by the ingress port, tells
   whether the packet came in on an up port and how many up ports the switch has (one entry
   per port of the switch). Unless it came from above, or the switch has none,
   `hash(meta.fabric_up_index, crc32, 0, {HASHED fields}, count)` picks an index and
   `fabric_up_member` (index -> port) turns it into the physical up port,
   `meta.fabric_up_port`. Otherwise that stays 511: no copy goes up.
2. **Unicast** `fwd(511)` leaves by `meta.fabric_up_port`, or is dropped if there is none.
3. **Multicast**: the application's group holds the physical up ports in place of 511 (the
   controller expands it, `control_plane`), and egress keeps a copy at port p iff the
   decision's bitmap has bit p, or has bit 511 and p is the chosen up port.
4. **Ingress pruning, in egress**: a copy for the ingress port is dropped, whatever made it.

All of it is decided once, on the packet's first ingress pass, and kept across
resubmission (`@field_list(1)`, like the MoldUDP64 passes' state): bmv2's simple_switch
resets all of the standard metadata of a resubmitted packet, `ingress_port` included (it
reads 0 on every later pass), so a prologue re-run there would take port 0 for the ingress
port: no copy would be pruned at the real one, and a multi-message ITCH packet would go back
out the port it came in by (two switches then pass it back and forth forever).

The switch's control-plane state (which ports are up, the member list, the expanded group)
is `control_plane(...)`: entries in entries.json's form, which `compiler.p4.runtime` turns
into P4Runtime updates and `controller.push` writes. Every switch of a network runs the same
program; they differ only in entries.

The hash is the one `switch.fabric_egress` computes (bmv2's crc32 is zlib's CRC-32 of the
valid fields, big-endian, concatenated), so the program and the software fabric send each
packet up the same port; tests/p4/test_p4_fabric.py checks it packet for packet.
"""

from __future__ import annotations

from p4rt.names import FABRIC_TABLES
from pipeline.fabric import HASHED, LOGICAL_UP

(PORT_TABLE, _, PORT_ACTION, _), (MEMBER_TABLE, _, MEMBER_ACTION, _) = FABRIC_TABLES
MAX_UP_PORTS = 510  # ports are 9 bits and 511 is the logical up port
NO_PORT = LOGICAL_UP  # meta.fabric_up_port when no copy may go up


def metadata() -> list[str]:
    return [
        "    // The fabric (compiler/p4/fabric.py): set on the first ingress pass, and the three",
        "    // @field_list(1) fields kept across resubmission (which zeroes ingress_port)",
        "    @field_list(1) bit<1> fabric_set;  // 1 once the first pass has set what follows",
        "    @field_list(1) bit<9> fabric_in_port;  // the ingress port: no copy leaves by it",
        "    bit<1>  fabric_from_up;   // it is an up port: no copy goes up again",
        "    bit<32> fabric_up_ports;  // how many up ports the switch has",
        "    bit<16> fabric_up_index;  // the hash's pick among them",
        f"    @field_list(1) bit<9> fabric_up_port;  // the physical up port for copies to {LOGICAL_UP}; {NO_PORT}: none",
    ]


def actions() -> str:
    return f"""\
    action {PORT_ACTION}(bit<1> from_up, bit<32> up_ports) {{
        meta.fabric_from_up = from_up;
        meta.fabric_up_ports = up_ports;
    }}
    action {MEMBER_ACTION}(bit<9> port) {{
        meta.fabric_up_port = port;
    }}
"""


def table_keys() -> list[tuple[str, list[tuple[str, str, str]], tuple[str, ...]]]:
    """(table, keys for compiler.p4.blocks.table, actions) of the fabric's two tables."""
    return [(name, [(e, kind, n) for e, kind, n, _ in keys], (action,))
            for name, keys, action, _ in FABRIC_TABLES]


def hashed_fields() -> str:
    return ", ".join(f"hdr.{h}.{f}" for h, f, _ in HASHED)


def ingress_prologue() -> list[str]:
    return [
        "// The fabric: where the packet came from, and which up port its copies for the",
        f"// logical up port {LOGICAL_UP} take (switch/fabric_egress.py chooses the same one).",
        "// First pass only: a resubmitted pass reads ingress_port 0 (bmv2 resets it).",
        "if (meta.fabric_set == 0) {",
        "    meta.fabric_set = 1;",
        "    meta.fabric_in_port = standard_metadata.ingress_port;",
        f"    meta.fabric_up_port = {NO_PORT};",
        f"    {PORT_TABLE}.apply();",
        "    if (meta.fabric_from_up == 0 && meta.fabric_up_ports != 0) {",
        "        hash(meta.fabric_up_index, HashAlgorithm.crc32, 16w0,",
        f"             {{ {hashed_fields()} }}, meta.fabric_up_ports);",
        f"        {MEMBER_TABLE}.apply();",
        "    }",
        "}",
    ]


def unicast() -> list[str]:
    """After a unicast decision: the logical up port becomes the chosen physical one."""
    return [
        f"if (standard_metadata.egress_spec == {LOGICAL_UP}) {{",
        f"    if (meta.fabric_up_port == {NO_PORT}) {{",
        "        mark_to_drop(standard_metadata);  // came from above, or no up ports: never up",
        "    } else {",
        "        standard_metadata.egress_spec = meta.fabric_up_port;",
        "    }",
        "}",
    ]


def selects(bitmap: str) -> str:
    """A decision's bitmap selects this copy: its port's bit, or the logical up port's bit
    when this copy is at the chosen up port (`meta.port_bit`: `compiler.p4.blocks.egress_port_bit`)."""
    return (f"(({bitmap} & meta.port_bit) != 0"
            f" || {bitmap}[{LOGICAL_UP}:{LOGICAL_UP}] == 1"
            f" && standard_metadata.egress_port == meta.fabric_up_port)")


def egress_prologue() -> list[str]:
    return [
        "if (standard_metadata.egress_port == meta.fabric_in_port) {",
        "    mark_to_drop(standard_metadata);  // the fabric: never out by the ingress port",
        "    meta.rewrite = 0;",
        "    meta.prune = 0;",
        "}",
    ]


def control_plane(up_ports: list[int] | tuple[int, ...], ports: list[int] | tuple[int, ...],
                  entries: dict) -> dict:
    """A switch's entries for the fabric program: `entries` (entries.json) with every
    multicast group's replicas of the logical up port replaced by the physical up ports,
    plus one `fabric_port` entry per port of the switch and one `fabric_up_member` entry per
    up port (member i is `up_ports[i]`, the order `switch.fabric_egress` indexes)."""
    up = list(up_ports)
    if len(up) > MAX_UP_PORTS or len(set(up)) != len(up):
        raise ValueError(f"up ports must be distinct and at most {MAX_UP_PORTS}: {up}")
    if any(not 0 <= p < LOGICAL_UP for p in list(ports) + up):
        raise ValueError(f"ports must be between 0 and {LOGICAL_UP - 1}")
    missing = set(up) - set(ports)
    if missing:
        raise ValueError(f"up ports {sorted(missing)} are not ports of the switch")
    # A decision naming a physical up port besides 511 would send that port two different
    # copies in the software switch and one here: the fabric's rules name up ports as 511 only.
    up_bits = sum(1 << p for p in up)
    for e in entries.get("table_entries", []):
        named = (1 << e["params"]["port"] if e["action"] == "fwd"
                 else e["params"]["ports"] if e["action"] == "mcast" else 0)
        if named & up_bits:
            raise ValueError(f"entry of table {e['table']!r} sends to up port(s) "
                             f"{[p for p in up if named >> p & 1]} by number; a fabric switch's "
                             f"rules name its up ports as the logical port {LOGICAL_UP}")
    groups = []
    for g in entries.get("multicast_groups", []):
        replicas = []
        for r in g["replicas"]:
            if r["port"] == LOGICAL_UP:
                replicas += [{"port": p, "rid": r.get("rid", 0)} for p in up]
            else:
                replicas.append(r)
        seen, unique = set(), []
        for r in replicas:
            key = (r["port"], r.get("rid", 0))
            if key not in seen:
                seen.add(key)
                unique.append(r)
        groups.append({**g, "replicas": sorted(unique, key=lambda r: (r["port"], r.get("rid", 0)))})
    table_entries = list(entries.get("table_entries", []))
    table_entries += [{"table": PORT_TABLE, "match": {"ingress_port": {"exact": p}},
                       "action": PORT_ACTION, "params": {"from_up": int(p in up), "up_ports": len(up)}}
                      for p in sorted(ports)]
    table_entries += [{"table": MEMBER_TABLE, "match": {"up_index": {"exact": i}},
                       "action": MEMBER_ACTION, "params": {"port": p}} for i, p in enumerate(up)]
    return {**entries, "table_entries": table_entries, "multicast_groups": groups}
