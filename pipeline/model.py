"""The pipeline IR as dataclasses: what a data plane is (docs/pipeline-ir.md, pipeline.json).

A `Pipeline` holds its applications (where messages are, which fields the stages match, in
which order and with which match kind) and, derived from them, every table by name with its
role, its keys and the actions it may hold, and every action with its parameters' widths.
Instances are built by the compiler (`compiler.lowering`) or read from pipeline.json
(`pipeline.document.from_json`, which validates); consumers never look at the JSON.

Widths are those of the P4 program the IR compiles to (v1model: ports 9 bits, multicast
groups and replica ids 16 bits), so the P4 program, its P4Info and every target check the
same limits. Two widths are the pipeline's own: the state's (`state_width`, sized by the
compiler to the states it needs) and the port bitmap's (`ports_width`: bit p of an `mcast`
decision selects port p, so it is one more than the highest port a rule names).

An application's stages form one or more *lanes* (IR 3): each lane is a field-ordered walk of
its own from state 0 with its own tables and leaf, and a message's port set is the union of
what every lane decides. Rules on independent fields then take one small diagram per group
of fields instead of one diagram whose size is the product of theirs (`compiler.lanes`).
"""

from __future__ import annotations

from dataclasses import dataclass

IR_VERSION = 3
FRAMINGS = ("single", "moldudp64")
MOLDUDP64_HEADER_BYTES = 20
MAX_FIELD_WIDTH = 64
MAX_STATE_WIDTH = 56  # the native tables pack an action and its parameter into 64 bits
IPV4_TABLE = "ipv4_lpm"
EGRESS_TABLE = "egress_udp_rewrite"

PORT_WIDTH = 9  # v1model egress_spec / egress_port
GROUP_WIDTH = 16  # v1model mcast_grp
RID_WIDTH = 16  # v1model egress_rid (P4Runtime replica ids)
MAX_PORTS_WIDTH = 1 << PORT_WIDTH  # a bitmap bit for every port v1model can name
# bmv2's P4Runtime server (PI) refuses multicast group ids from 32768 on ("Group id value is
# too high": that half is reserved), so every group id a pipeline names is in 1..32767.
MAX_GROUP_ID = (1 << (GROUP_WIDTH - 1)) - 1
UDP_PORT_WIDTH = 16
IPV4_WIDTH = 32

# Table roles: what a table's key is and which actions it may hold.
STAGE, DEFAULT, LEAF, IPV4, EGRESS = "stage", "default", "leaf", "ipv4", "egress"
ROLE_ACTIONS = {
    # A stage may also decide: fwd/mcast end the walk, skipping later stages and the leaf.
    # mcast's parameter is a port bitmap; the copies come from the application's group.
    STAGE: ("set_state", "fwd", "mcast"),
    DEFAULT: ("set_state", "fwd", "mcast"),
    LEAF: ("fwd", "mcast"),
    IPV4: ("fwd", "drop"),
    EGRESS: ("set_udp_port",),
}


class PipelineError(ValueError):
    """A pipeline that is not valid IR (pipeline.json naming the first problem, or a model
    whose tables or UDP ports collide)."""


class EntryError(ValueError):
    """An entry or multicast group that the pipeline cannot hold (bad name, key, value, action)."""


@dataclass(frozen=True)
class Param:
    name: str
    width: int


@dataclass(frozen=True)
class Action:
    """An action and its parameters (every camus action has at most one)."""

    name: str
    params: tuple[Param, ...]


def actions(state_width: int, ports_width: int) -> dict[str, Action]:
    """Every action of a pipeline whose state is `state_width` bits and whose port bitmaps
    are `ports_width` bits."""
    return {a.name: a for a in (
        Action("set_state", (Param("state", state_width),)),
        Action("fwd", (Param("port", PORT_WIDTH),)),
        Action("mcast", (Param("ports", ports_width),)),
        Action("drop", ()),
        Action("set_udp_port", (Param("port", UDP_PORT_WIDTH),)),
    )}


@dataclass(frozen=True)
class HeaderField:
    """A header's field: `width` bits, `bit_offset` bits after the header's first bit."""

    name: str
    bit_offset: int
    width: int


@dataclass(frozen=True)
class Header:
    name: str
    bits: int
    fields: tuple[HeaderField, ...]
    bit_offset: int | None = None  # message headers: from the message's first bit


@dataclass(frozen=True)
class Field:
    """A message field: `width` bits starting `bit_offset` bits after the message's first byte.

    Query fields (the ones rules may test) also say their declared match kind and whether
    they hold space-padded ASCII.
    """

    name: str  # header.field
    bit_offset: int
    width: int
    declared: str | None = None
    ascii: bool | None = None


@dataclass(frozen=True)
class Message:
    headers: tuple[Header, ...]
    bytes: int  # a subscription message has at least this many bytes
    type_field: Field | None  # with `types`: which messages are subscription messages
    types: tuple[int, ...]


@dataclass(frozen=True)
class Stage:
    table: str
    default_table: str
    field: Field
    match_kind: str  # a name in pipeline.match_kinds.MATCH_KINDS


@dataclass(frozen=True)
class Lane:
    """A lane after the first: its own ordered stages and leaf table (docs/pipeline-ir.md)."""

    stages: tuple[Stage, ...]
    leaf_table: str


@dataclass(frozen=True)
class Application:
    name: str
    udp_port: int
    framing: str
    packet_header: Header | None  # moldudp64: the MoldUDP64 header
    message: Message
    fields: dict[str, Field]  # the query fields, by header.field
    stages: tuple[Stage, ...]
    leaf_table: str
    # The one multicast group an `mcast(ports)` decision replicates through: a group reaching
    # every port the application's rules name; egress keeps the copies whose bit is set.
    multicast_group: int
    # The lanes after the first (whose stages and leaf are `stages` and `leaf_table`): each
    # walks from state 0 on its own; the message's port set is the union of their decisions.
    lanes: tuple[Lane, ...] = ()

    @property
    def all_lanes(self) -> tuple[Lane, ...]:
        """Every lane, the first (`stages`, `leaf_table`) included, in walk order."""
        return (Lane(self.stages, self.leaf_table),) + self.lanes

    @property
    def all_stages(self) -> tuple[Stage, ...]:
        """Every stage of every lane, in walk order."""
        return tuple(s for lane in self.all_lanes for s in lane.stages)

    @property
    def message_bytes(self) -> int:
        return self.message.bytes

    @property
    def type_field(self) -> Field | None:
        return self.message.type_field

    @property
    def types(self) -> tuple[int, ...]:
        return self.message.types


@dataclass(frozen=True)
class Key:
    """One key element of a table: its control-plane name, width and match kind."""

    name: str
    width: int
    match_kind: str


@dataclass(frozen=True)
class Table:
    """One table: its role, keys (the first is exact: the state, or the egress port) and actions."""

    name: str
    role: str
    keys: tuple[Key, ...]
    actions: tuple[str, ...]
    field: Field | None = None  # stage tables: the field matched; ipv4: the destination address

    @property
    def match_kind(self) -> str | None:
        """The kind of the key after the state (the only key of ipv4); None for state tables."""
        return self.keys[-1].match_kind if self.role in (STAGE, IPV4, EGRESS) else None


IPV4_DST = Field("ipv4.dst_addr", 0, IPV4_WIDTH)


def tables(state_width: int, applications: tuple[Application, ...], ipv4_table: str,
           egress_table: str) -> list[Table]:
    """Every table of a pipeline, in the order P4Info lists them."""
    state = Key("state", state_width, "exact")
    out = []
    for app in applications:
        for lane in app.all_lanes:
            for st in lane.stages:
                out.append(Table(st.table, STAGE, (state, Key(st.field.name, st.field.width, st.match_kind)),
                                 ROLE_ACTIONS[STAGE], st.field))
                out.append(Table(st.default_table, DEFAULT, (state,), ROLE_ACTIONS[DEFAULT]))
            out.append(Table(lane.leaf_table, LEAF, (state,), ROLE_ACTIONS[LEAF]))
    out.append(Table(ipv4_table, IPV4, (Key(IPV4_DST.name, IPV4_WIDTH, "lpm"),), ROLE_ACTIONS[IPV4], IPV4_DST))
    out.append(Table(egress_table, EGRESS, (Key("egress_port", PORT_WIDTH, "exact"),
                                            Key("egress_rid", RID_WIDTH, "exact")), ROLE_ACTIONS[EGRESS]))
    return out


@dataclass(frozen=True)
class Pipeline:
    """A whole pipeline. Build it with `Pipeline.of` (or `pipeline.document.from_json`)."""

    state_width: int
    applications: tuple[Application, ...]
    ipv4_table: str
    egress_table: str
    tables: dict[str, Table]
    actions: dict[str, Action]
    ports_width: int

    @classmethod
    def of(cls, state_width: int, applications, ipv4_table: str = IPV4_TABLE,
           egress_table: str = EGRESS_TABLE, ports_width: int = MAX_PORTS_WIDTH) -> Pipeline:
        """The pipeline with its table and action index; PipelineError when two tables share a
        name, two applications a UDP port or a multicast group, or a width is out of range."""
        applications = tuple(applications)
        ports = [a.udp_port for a in applications]
        if len(set(ports)) != len(ports):
            raise PipelineError(f"two applications share a UDP port: {ports}")
        groups = [a.multicast_group for a in applications]
        if len(set(groups)) != len(groups):
            raise PipelineError(f"two applications share a multicast group: {groups}")
        if any(not 1 <= g <= MAX_GROUP_ID for g in groups):
            raise PipelineError(f"multicast group ids must be in 1..{MAX_GROUP_ID}: {groups}")
        if not 1 <= ports_width <= MAX_PORTS_WIDTH:
            raise PipelineError(f"ports_width {ports_width} not in 1..{MAX_PORTS_WIDTH}")
        index: dict[str, Table] = {}
        for t in tables(state_width, applications, ipv4_table, egress_table):
            if t.name in index:
                raise PipelineError(f"table name {t.name!r} is used twice")
            index[t.name] = t
        return cls(state_width, applications, ipv4_table, egress_table, index,
                   actions(state_width, ports_width), ports_width)

    def application_of(self, table: str) -> Application | None:
        """The application whose stage, default or leaf table `table` is (None: ipv4, egress)."""
        for app in self.applications:
            for lane in app.all_lanes:
                if table == lane.leaf_table or any(table in (s.table, s.default_table)
                                                   for s in lane.stages):
                    return app
        return None

    def application_for_port(self, udp_port: int) -> Application | None:
        for app in self.applications:
            if app.udp_port == udp_port:
                return app
        return None
