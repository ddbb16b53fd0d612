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

An application whose spec declares state (IR 4, docs/pipeline-ir.md "State") also has a
`State`: its declared counters, averages and meters, each with `banks` register arrays and a
bind table per bank, and one decide table. Its stage, default and leaf tables may then decide
`stateful(ctx)`, which hands the message to the state stages. A pipeline without state is
IR 3, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

IR_VERSION = 3  # a pipeline without state
STATE_IR_VERSION = 4  # a pipeline with an application that has state (IR 3 plus "state")
# a pipeline with an application that declares actions or a default action, or whose
# messages are DNS queries (IR 3 plus "actions", "default_action", framing "dns")
ACTIONS_IR_VERSION = 5
IR_VERSIONS = (IR_VERSION, STATE_IR_VERSION, ACTIONS_IR_VERSION)
FRAMINGS = ("single", "moldudp64", "dns")
# framing "dns": the message is the DNS header (12 bytes) then the question, whose first
# field holds the query name's wire form zero-padded to its width, then type and class.
DNS_HEADER_BITS = 96
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

# State (IR 4; docs/pipeline-ir.md "State"). Widths of the machine model every target runs.
CTX_WIDTH = 24  # a context id, the parameter of `stateful(ctx)` (0 is never a context)
TAG_WIDTH = 48  # a cell's window tag: a whole window index of 48-bit microseconds
COUNT_WIDTH = 32  # a cell's count n
SUM_WIDTH = 64  # an average cell's sum s
TIMESTAMP_WIDTH = 48  # ts_us, microseconds
MAX_BOUNDARIES = 8  # thresholds a bind entry carries (t0..t7)
THRESHOLD_WIDTH = 32  # each threshold (counts and averages of fields up to 32 bits)
REGION_WIDTH = 4  # a bank's region (0..MAX_BOUNDARIES) in the decide key
BASE_WIDTH = 24  # a bind entry's base cell (slots are at most 2^24)
MAX_BANKS = 16  # register arrays per declared state
DEFAULT_BANKS = 4
STATE_KINDS = ("counter", "average", "meter")
METER_UNITS = ("packets", "bytes")
# A declared time field's unit and how its value v becomes microseconds: v // 1000 (ns),
# v (us), v * 1000 (ms), then reduced modulo 2^48.
TIME_UNITS = ("ns", "us", "ms")

# Table roles: what a table's key is and which actions it may hold.
STAGE, DEFAULT, LEAF, IPV4, EGRESS = "stage", "default", "leaf", "ipv4", "egress"
BIND, DECIDE = "bind", "decide"  # state tables (IR 4)
ROLE_ACTIONS = {
    # A stage may also decide: fwd/mcast end the walk, skipping later stages and the leaf.
    # mcast's parameter is a port bitmap; the copies come from the application's group.
    STAGE: ("set_state", "fwd", "mcast"),
    DEFAULT: ("set_state", "fwd", "mcast"),
    LEAF: ("fwd", "mcast"),
    IPV4: ("fwd", "drop"),
    EGRESS: ("set_udp_port",),
    BIND: ("bind",),
    DECIDE: ("decide",),
}
# In an application with state, a walk may also end in `stateful(ctx)`.
STATEFUL_ROLE_ACTIONS = {role: acts + ("stateful",) for role, acts in ROLE_ACTIONS.items()
                         if role in (STAGE, DEFAULT, LEAF)}
BIND_PARAMS = ("base", "scoped", "bounds", "strict") + tuple(
    f"t{j}" for j in range(MAX_BOUNDARIES))


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
    """An action and its parameters (at most one, but for the state actions `bind` and
    `decide`)."""

    name: str
    params: tuple[Param, ...]


def actions(state_width: int, ports_width: int, banks: int = 0) -> dict[str, Action]:
    """Every action of a pipeline whose state is `state_width` bits and whose port bitmaps
    are `ports_width` bits; with `banks` (the most banks an application with state has, all
    its states together), the state actions too."""
    out = [
        Action("set_state", (Param("state", state_width),)),
        Action("fwd", (Param("port", PORT_WIDTH),)),
        Action("mcast", (Param("ports", ports_width),)),
        Action("drop", ()),
        Action("set_udp_port", (Param("port", UDP_PORT_WIDTH),)),
    ]
    if banks:
        out += [
            Action("stateful", (Param("ctx", CTX_WIDTH),)),
            Action("bind", (Param("base", BASE_WIDTH), Param("scoped", 1),
                            Param("bounds", (MAX_BOUNDARIES).bit_length()),
                            Param("strict", MAX_BOUNDARIES))
                   + tuple(Param(f"t{j}", THRESHOLD_WIDTH) for j in range(MAX_BOUNDARIES))),
            Action("decide", (Param("ports", ports_width), Param("update", banks))),
        ]
    return {a.name: a for a in out}


# The actions of the pipeline's own machinery: no application may declare one of these names.
MACHINE_ACTIONS = ("set_state", "fwd", "mcast", "set_udp_port", "stateful", "bind", "decide")


@dataclass(frozen=True)
class Call:
    """An action with its parameters' values: an application's default action."""

    action: str
    params: tuple[tuple[str, int], ...] = ()


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
class Timestamp:
    """A declared time field: a message's ts_us is its value in `unit` turned to µs."""

    field: Field
    unit: str  # "ns" | "us" | "ms"

    def ts_us(self, value: int) -> int:
        """The message's timestamp in µs (48 bits) from the field's value."""
        if self.unit == "ns":
            value //= 1000
        elif self.unit == "ms":
            value *= 1000
        return value & ((1 << TIMESTAMP_WIDTH) - 1)


@dataclass(frozen=True)
class StateVar:
    """A declared state as the data plane holds it: `banks` register arrays of `slots`
    cells, each bank with its bind table (docs/pipeline-ir.md, "State")."""

    name: str  # how rules name it: the counter's or meter's name, `avg(h.f)`
    ident: str  # its part of table and register names (`avg_h_f` for `avg(h.f)`)
    kind: str  # "counter" | "average" | "meter"
    unit: str | None  # a meter's "packets" | "bytes"
    field: Field | None  # an average's field
    key: Field | None  # a keyed state's key field
    window_us: int
    slots: int
    buckets: int  # a power of two; 1 without a key
    bind_tables: tuple[str, ...]  # one per bank
    registers: tuple[str, ...]  # one per bank

    @property
    def banks(self) -> int:
        return len(self.bind_tables)

    @property
    def cell_width(self) -> int:
        """A cell: tag, n (and s for an average), packed tag|n|s from the high bits."""
        return TAG_WIDTH + COUNT_WIDTH + (SUM_WIDTH if self.kind == "average" else 0)


@dataclass(frozen=True)
class State:
    """An application's state: its declared states in order, the decide table, and where
    a message's time comes from (`timestamp`; None: the packet's ingress time)."""

    vars: tuple[StateVar, ...]
    decide_table: str
    timestamp: Timestamp | None = None
    ctx_width: int = CTX_WIDTH

    @property
    def banks(self) -> int:
        """Every bank of every state: the decide key has a region, and `decide` an update
        bit, for each, in this order (states in order, banks in order)."""
        return sum(v.banks for v in self.vars)

    @property
    def regions_width(self) -> int:
        return REGION_WIDTH * self.banks

    def bank_index(self, var: int, bank: int) -> int:
        """The position of bank `bank` of state `var` (an index into `vars`) among every
        bank: its region is bits [4i, 4i+4) of the decide key, its update bit bit i."""
        return sum(v.banks for v in self.vars[:var]) + bank


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
    # IR 4: the declared state (None: the spec declares none). An application with state
    # has one lane.
    state: State | None = None
    # IR 5 (docs/actions.md): the actions its tables may decide besides set_state, fwd and
    # mcast (`drop`, and library actions whose first parameter, `ports`, the pipeline adds:
    # these are the others), and what a message no entry decides gets (None: nothing, so
    # the frame goes by IPv4 routing).
    actions: tuple[Action, ...] = ()
    default_action: Call | None = None

    @property
    def uses_actions(self) -> bool:
        """Whether the application needs IR 5."""
        return bool(self.actions) or self.default_action is not None or self.framing == "dns"

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
        return self.keys[-1].match_kind if self.role in (STAGE, IPV4, EGRESS, DECIDE) else None


IPV4_DST = Field("ipv4.dst_addr", 0, IPV4_WIDTH)


def tables(state_width: int, applications: tuple[Application, ...], ipv4_table: str,
           egress_table: str) -> list[Table]:
    """Every table of a pipeline, in the order P4Info lists them."""
    state = Key("state", state_width, "exact")
    out = []
    for app in applications:
        acts = STATEFUL_ROLE_ACTIONS if app.state else ROLE_ACTIONS
        if app.actions:
            own = tuple(a.name for a in app.actions)
            acts = {role: a + own if role in (STAGE, DEFAULT, LEAF) else a
                    for role, a in acts.items()}
        for lane in app.all_lanes:
            for st in lane.stages:
                out.append(Table(st.table, STAGE, (state, Key(st.field.name, st.field.width, st.match_kind)),
                                 acts[STAGE], st.field))
                out.append(Table(st.default_table, DEFAULT, (state,), acts[DEFAULT]))
            out.append(Table(lane.leaf_table, LEAF, (state,), acts[LEAF]))
        if app.state:
            ctx = Key("ctx", app.state.ctx_width, "exact")
            for var in app.state.vars:
                out += [Table(t, BIND, (ctx,), ROLE_ACTIONS[BIND]) for t in var.bind_tables]
            out.append(Table(app.state.decide_table, DECIDE,
                             (ctx, Key("regions", app.state.regions_width, "exact")),
                             ROLE_ACTIONS[DECIDE]))
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
        registers: set[str] = set()
        for app in applications:
            if app.state is None:
                continue
            _check_state(app)
            for var in app.state.vars:
                for r in var.registers:
                    if r in registers or r in index:
                        raise PipelineError(f"register name {r!r} is used twice")
                    registers.add(r)
        banks = max((a.state.banks for a in applications if a.state), default=0)
        acts = actions(state_width, ports_width, banks)
        declared: dict[str, Action] = {}
        for app in applications:
            for a in app.actions:
                full = a if a.name == "drop" else \
                    Action(a.name, (Param("ports", ports_width),) + a.params)
                _check_action(app, a, declared.get(a.name, full))
                declared[a.name] = full
        acts.update(declared)
        for app in applications:
            if app.default_action is not None:
                _check_default(app, app.default_action, acts)
            if app.state is not None and app.uses_actions:
                raise PipelineError(f"application {app.name!r}: state and actions beyond fwd "
                                    f"together are not supported yet (docs/actions.md)")
            if app.framing == "dns":
                _check_dns(app)
            if app.framing == "moldudp64" and any(a.name != "drop" for a in app.actions):
                raise PipelineError(f"application {app.name!r}: actions other than drop need "
                                    f"one message per packet (framing single or dns)")
        return cls(state_width, applications, ipv4_table, egress_table, index, acts,
                   ports_width)

    @property
    def version(self) -> int:
        """camus_ir: 5 when an application uses actions beyond fwd (or DNS framing), 4
        when one has state, else 3."""
        if any(a.uses_actions for a in self.applications):
            return ACTIONS_IR_VERSION
        return STATE_IR_VERSION if any(a.state for a in self.applications) else IR_VERSION

    def state_var_of(self, table: str) -> tuple[Application, int, int] | None:
        """(application, index of the state in its `vars`, bank) of a bind table."""
        for app in self.applications:
            if app.state:
                for i, var in enumerate(app.state.vars):
                    if table in var.bind_tables:
                        return app, i, var.bind_tables.index(table)
        return None

    def application_of(self, table: str) -> Application | None:
        """The application whose stage, default, leaf or state table `table` is (None: ipv4,
        egress)."""
        for app in self.applications:
            for lane in app.all_lanes:
                if table == lane.leaf_table or any(table in (s.table, s.default_table)
                                                   for s in lane.stages):
                    return app
            if app.state and (table == app.state.decide_table or
                              any(table in v.bind_tables for v in app.state.vars)):
                return app
        return None

    def application_for_port(self, udp_port: int) -> Application | None:
        for app in self.applications:
            if app.udp_port == udp_port:
                return app
        return None


def _check_action(app: Application, a: Action, known: Action) -> None:
    """PipelineError for a declared action the pipeline cannot hold."""
    where = f"application {app.name!r} action {a.name!r}"
    if a.name in MACHINE_ACTIONS:
        raise PipelineError(f"{where}: the name of one of the pipeline's own actions")
    if a.name == "drop" and a.params:
        raise PipelineError(f"{where}: drop takes no parameters")
    names = [p.name for p in a.params]
    if "ports" in names or len(set(names)) != len(names):
        raise PipelineError(f"{where}: parameter names are distinct and not 'ports'")
    if any(not 1 <= p.width <= 64 for p in a.params):
        raise PipelineError(f"{where}: parameters are 1..64 bits wide")
    if a.name != "drop" and known.params[1:] != a.params:
        raise PipelineError(f"{where}: declared with other parameters by another application")


def dns_name_field(app: Application) -> HeaderField:
    """framing "dns": the question header's first field, which holds the query name."""
    return app.message.headers[1].fields[0]


def _check_dns(app: Application) -> None:
    """PipelineError for a DNS application whose message is not laid out as framing "dns"
    says: the 12-byte DNS header, then the question: name (whole bytes), type, class."""
    hs = app.message.headers
    where = f"application {app.name!r} (framing dns)"
    if len(hs) != 2 or hs[0].bits != DNS_HEADER_BITS or hs[0].bit_offset != 0:
        raise PipelineError(f"{where}: the message is two headers, the 96-bit DNS header and "
                            f"the question")
    q = hs[1].fields
    if len(q) != 3 or q[0].width % 8 or q[0].bit_offset != 0 or \
            [f.width for f in q[1:]] != [16, 16] or not 8 <= q[0].width <= MAX_FIELD_WIDTH:
        raise PipelineError(f"{where}: the question is a name of 1..8 whole bytes, then a "
                            f"16-bit type and a 16-bit class")


def _check_default(app: Application, call: Call, acts: dict[str, Action]) -> None:
    """PipelineError for a default action the application cannot take."""
    where = f"application {app.name!r} default_action"
    allowed = ("fwd", "mcast") + tuple(a.name for a in app.actions)
    if call.action not in allowed:
        raise PipelineError(f"{where}: {call.action!r} is not one of {allowed}")
    want = acts[call.action].params
    if [n for n, _ in call.params] != [p.name for p in want]:
        raise PipelineError(f"{where}: {call.action} takes {[p.name for p in want]}")
    for (n, v), p in zip(call.params, want):
        if type(v) is not int or not 0 <= v < 1 << p.width:
            raise PipelineError(f"{where}: {n} = {v!r} does not fit {p.width} bits")


def _check_state(app: Application) -> None:
    """PipelineError for an application whose state the machine model cannot hold."""
    st = app.state
    where = f"application {app.name!r} state"
    if app.lanes:
        raise PipelineError(f"{where}: an application with state has one lane")
    if st.ctx_width != CTX_WIDTH:
        raise PipelineError(f"{where}: ctx_width is {CTX_WIDTH}, not {st.ctx_width}")
    if not st.vars:
        raise PipelineError(f"{where}: no state declared")
    names = set()
    for v in st.vars:
        w = f"{where} {v.name!r}"
        if v.name in names:
            raise PipelineError(f"{w}: declared twice")
        names.add(v.name)
        if v.kind not in STATE_KINDS:
            raise PipelineError(f"{w}: kind {v.kind!r} is not one of {STATE_KINDS}")
        if (v.kind == "meter") != (v.unit is not None) or \
                (v.unit is not None and v.unit not in METER_UNITS):
            raise PipelineError(f"{w}: a meter, and only a meter, has a unit in {METER_UNITS}")
        if (v.kind == "average") != (v.field is not None):
            raise PipelineError(f"{w}: an average, and only an average, has a field")
        if v.field is not None and not 1 <= v.field.width <= THRESHOLD_WIDTH:
            raise PipelineError(f"{w}: an averaged field has 1..{THRESHOLD_WIDTH} bits")
        if not 1 <= v.window_us < 1 << TIMESTAMP_WIDTH:
            raise PipelineError(f"{w}: window_us {v.window_us} not in 1..2^48-1")
        if not 1 <= v.slots <= 1 << BASE_WIDTH:
            raise PipelineError(f"{w}: slots {v.slots} not in 1..2^{BASE_WIDTH}")
        b = v.buckets
        if b < 1 or b & (b - 1) or b > v.slots or (b > 1) != (v.key is not None):
            raise PipelineError(f"{w}: buckets {b}: a power of two, at most the slots, and "
                                f"more than 1 exactly when the state has a key")
        if not 1 <= v.banks <= MAX_BANKS or len(v.registers) != v.banks:
            raise PipelineError(f"{w}: 1..{MAX_BANKS} banks, each a bind table and a register")
    if st.timestamp is not None and st.timestamp.unit not in TIME_UNITS:
        raise PipelineError(f"{where}: timestamp unit {st.timestamp.unit!r} is not one of "
                            f"{TIME_UNITS}")
