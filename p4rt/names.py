"""The P4 names of a camus program: the contract between the pipeline IR, the P4 program and
its P4Info (docs/pipeline-ir.md, "P4 names").

The emitter (compiler/p4) declares its controls, tables and actions under these names and
`p4rt.p4info` lists the same names, so both live here. Spec authors name headers and fields
freely; a few of those names are P4_16 keywords (`type`, `key`, `error`, ...) or collide with
the program's own instances (`ethernet`, `ipv4`, `udp`). `ident` turns an IR name into a safe
identifier; the control-plane names stay the IR's because every key element carries
`@name("header.field")`, so escaping never shows in the P4Info.
"""

from __future__ import annotations

import re

# P4_16 (spec 1.2.x) reserved words. `state`, `key`, `actions`, `entries`, `type`, `apply`
# and `priority` are accepted as names by the grammar in most positions, but escaping them
# too costs nothing and keeps us clear of the positions where they are not.
KEYWORDS = frozenset("""
    abstract action actions apply bool bit break const continue control default else entries
    enum error exit extern false for header header_union if in inout int key list match_kind
    out package parser priority return select state string struct switch table this transition
    true tuple type typedef varbit valueset verify void
""".split())

# Instances, types and controls the emitter declares itself; spec names must not shadow them.
RESERVED = frozenset("""
    ethernet ipv4 ipv4_options udp hdr meta packet standard_metadata main NoAction
    headers_t metadata_t ethernet_t ipv4_t ipv4_options_t udp_t
    CamusParser CamusVerifyChecksum CamusIngress CamusEgress CamusComputeChecksum CamusDeparser
""".split())

INGRESS, EGRESS = "CamusIngress", "CamusEgress"
TABLE_SIZE = 1 << 16  # every table's; p4c's default of 1024 is far too small
DEFAULT_SLOTS = 8  # message blocks parsed and evaluated per MoldUDP64 packet
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def ident(name: str) -> str:
    """`name` as a P4 identifier: keywords and the emitter's own names get a trailing `_`."""
    if not _IDENT.match(name):
        raise ValueError(f"{name!r} is not usable as a P4 identifier")
    return name + "_" if name in KEYWORDS or name in RESERVED else name


def p4_table_name(ir_table: str, egress_table: str) -> str:
    """The P4 name of an IR table: `CamusIngress.T`, the egress table in `CamusEgress`."""
    return f"{EGRESS if ir_table == egress_table else INGRESS}.{ir_table}"


# The fabric variant's own tables (compiler/p4/fabric.py, docs/routing.md), in declaration
# order: (table, keys as (P4 expression, match kind, control-plane name, bitwidth), its one
# action, that action's (parameter, bitwidth)). Both are in CamusIngress.
FABRIC_TABLES = (
    ("fabric_port", (("standard_metadata.ingress_port", "exact", "ingress_port", 9),),
     "fabric_port_config", (("from_up", 1), ("up_ports", 32))),
    ("fabric_up_member", (("meta.fabric_up_index", "exact", "up_index", 16),),
     "set_up_port", (("port", 9),)),
)
