"""The state stages of docs/pipeline-ir.md ("State") as v1model P4: registers, bind and decide
tables, and the per-message read / compare / decide / write sequence.

Only an application whose spec declares state gets any of this; a program without state is
byte for byte what it was. The walk ends in `stateful(ctx)` (which sets `meta.st_on` and, like
fwd/mcast, `meta.decided`, so no later stage runs); `stages` then runs, for each state and
each of its banks in IR order, the bank's bind table on `meta.st_ctx` and on a hit reads the
bound cell, computes the bank's region and the cell to write, decides through the decide
table, and writes each accessed cell at most once. A register array is therefore read at
most once and written at most once per message, at one index.

One `bind` action serves every bind table (the contract has one action), so it leaves its
parameters in shared metadata (`meta.st_*`) and the code after each bind table's `apply`
uses them at once, before the next bind table overwrites them. Each bank's pending write
(hit, index, new cell, scoped) is kept in locals until the decide table has given `update`.

Arithmetic: p4c-bm2-ss refuses `/` unless both operands are compile-time constants ("could
not evaluate expression at compilation time"), so the window index `floor(ts / W)` (and a
nanosecond time field's `floor(v / 1000)`) is an exact multiply-shift by a reciprocal
(`reciprocal`, whose exactness over every input of the width is proved by
tests/p4/test_p4_state.py). An average's `s >= t * n` multiplies two values below 2^32, exact
in 64 bits. docs/p4.md ("State") says why the cell is one wide register and what a hardware
target would do instead.
"""

from __future__ import annotations

from compiler.p4.layout import AppLayout, Field
from pipeline.model import (BASE_WIDTH, COUNT_WIDTH, CTX_WIDTH, MAX_BOUNDARIES, REGION_WIDTH,
                            SUM_WIDTH, TAG_WIDTH, THRESHOLD_WIDTH, TIMESTAMP_WIDTH, Pipeline,
                            StateVar)

STRICT_WIDTH = MAX_BOUNDARIES
BOUNDS_WIDTH = MAX_BOUNDARIES.bit_length()


def reciprocal(d: int, bits: int) -> tuple[int, int]:
    """(m, k) with floor(x * m / 2^k) == floor(x / d) for every 0 <= x < 2^bits.

    For d a power of two, m = 1 and k = log2(d). Otherwise, with l = ceil(log2 d) and
    k = bits + l, m = ceil(2^k / d) (Granlund and Montgomery, "Division by invariant integers
    using multiplication", 1994, theorem 4.2): m*d = 2^k + e with 0 <= e < d <= 2^l, so for
    x = q*d + r (0 <= r < d), x*m / 2^k = x/d + x*e/(d*2^k), and x*e < 2^bits * 2^l = 2^k
    makes the second term less than 1/d: the sum stays below q + (r + 1)/d <= q + 1."""
    if d < 1:
        raise ValueError(f"division by {d}")
    if d & (d - 1) == 0:
        return 1, d.bit_length() - 1
    k = bits + d.bit_length()  # d is not a power of two: ceil(log2 d) = its bit length
    return -(-(1 << k) // d), k


def divide(expr: str, bits: int, d: int) -> str:
    """P4 for floor(expr / d), expr and the result bit<bits> (no `/`: `reciprocal`)."""
    m, k = reciprocal(d, bits)
    if m == 1:
        return expr if k == 0 else f"({expr} >> {k})"
    width = bits + m.bit_length()  # x * m < 2^bits * 2^bitlen(m)
    return f"(bit<{bits}>)(((bit<{width}>){expr} * {width}w{m}) >> {k})"


def has_state(pipeline: Pipeline) -> bool:
    return any(a.state for a in pipeline.applications)


def update_width(pipeline: Pipeline) -> int:
    return pipeline.actions["decide"].params[1].width


# ---- the fields a state reads: they need not be query fields ---------------------------


def state_fields(a: AppLayout) -> list[Field]:
    """Message fields the state stages read besides the query fields (keys, averaged fields,
    the time field), in a fixed order, each once."""
    st = a.app.state
    if st is None:
        return []
    wanted = [f for v in st.vars for f in (v.key, v.field) if f is not None]
    if st.timestamp is not None:
        wanted.append(st.timestamp.field)
    out: dict[str, Field] = {}
    for f in wanted:
        if f.name not in a.fields and f.name not in out:
            header, name = f.name.split(".", 1)
            out[f.name] = Field(f.name, header, name, f.width)
    return list(out.values())


def _field(a: AppLayout, f) -> str:
    """The P4 expression of a message field for the message under evaluation."""
    header, name = f.name.split(".", 1)
    return a.key_expr(Field(f.name, header, name, f.width))


# ---- declarations ----------------------------------------------------------------------


def metadata(pipeline: Pipeline, apps: list[AppLayout]) -> list[str]:
    """metadata_t lines shared by every application with state, then each one's own."""
    if not has_state(pipeline):
        return []
    out = [f"    bit<{CTX_WIDTH}> st_ctx;  // state: the context `stateful(ctx)` decided",
           "    bit<1>  st_on;       // state: the walk decided stateful(ctx); the state stages run",
           f"    bit<{BASE_WIDTH}> st_base;  // bind's parameters, used right after its table",
           "    bit<1>  st_scoped;",
           f"    bit<{BOUNDS_WIDTH}>  st_bounds;",
           f"    bit<{STRICT_WIDTH}>  st_strict;"]
    out += [f"    bit<{THRESHOLD_WIDTH}> st_t{j};" for j in range(MAX_BOUNDARIES)]
    out.append(f"    bit<{update_width(pipeline)}> st_update;  // decide's update bits, one per bank")
    for a in apps:
        st = a.app.state
        if st is None:
            continue
        out.append(f"    bit<{st.regions_width}> {a.meta('regions')};  // {a.app.name}: the banks' "
                   f"regions, {REGION_WIDTH} bits each (the decide key)")
    return out


def mold_metadata(a: AppLayout) -> list[tuple[str, str, bool, str]]:
    """A MoldUDP64 application's own state metadata, as moldudp64_pruning.metadata lists it."""
    if a.app.state is None:
        return []
    out = [("bit<16>", a.meta("msglen"), False, "the evaluated block's length (bytes meters)")]
    if a.app.state.timestamp is None:
        out.append((f"bit<{TIMESTAMP_WIDTH}>", a.meta("ts"), True,
                    "the packet's first pass's ingress time: every message's time"))
    return out


def actions(pipeline: Pipeline) -> str:
    if not has_state(pipeline):
        return ""
    ports = pipeline.ports_width
    bind_params = ", ".join([f"bit<{BASE_WIDTH}> base", "bit<1> scoped", f"bit<{BOUNDS_WIDTH}> bounds",
                             f"bit<{STRICT_WIDTH}> strict"]
                            + [f"bit<{THRESHOLD_WIDTH}> t{j}" for j in range(MAX_BOUNDARIES)])
    sets = "".join(f"        meta.st_t{j} = t{j};\n" for j in range(MAX_BOUNDARIES))
    return (f"    action stateful(bit<{CTX_WIDTH}> ctx) {{\n"
            "        meta.st_ctx = ctx;\n"
            "        meta.st_on = 1;\n"
            "        meta.decided = 1;  // the walk ends; the state stages decide\n"
            "    }\n"
            f"    action bind({bind_params}) {{\n"
            "        meta.st_base = base;\n"
            "        meta.st_scoped = scoped;\n"
            "        meta.st_bounds = bounds;\n"
            "        meta.st_strict = strict;\n"
            f"{sets}"
            "    }\n"
            f"    action decide(bit<{ports}> ports, bit<{update_width(pipeline)}> update) {{\n"
            "        meta.ports = ports;\n"
            "        meta.st_update = update;\n"
            "    }\n")


def registers(apps: list[AppLayout]) -> str:
    out = []
    for a in apps:
        st = a.app.state
        if st is None:
            continue
        for v in st.vars:
            out += [f"    register<bit<{v.cell_width}>>({v.slots}) {r};" for r in v.registers]
    return "\n".join(out) + "\n" if out else ""


# ---- the stages ------------------------------------------------------------------------


def _timestamp(a: AppLayout) -> str:
    """ts_us of the message under evaluation (48 bits)."""
    ts = a.app.state.timestamp
    if ts is None:
        if a.framing == "moldudp64":
            return f"meta.{a.meta('ts')}"
        return "standard_metadata.ingress_global_timestamp"
    v, width = _field(a, ts.field), ts.field.width
    if ts.unit == "us":
        return f"(bit<{TIMESTAMP_WIDTH}>){v}"
    if ts.unit == "ms":  # (v mod 2^48) * 1000 mod 2^48 == v * 1000 mod 2^48
        return f"(bit<{TIMESTAMP_WIDTH}>){v} * {TIMESTAMP_WIDTH}w1000"
    return f"(bit<{TIMESTAMP_WIDTH}>){divide(v, width, 1000)}"


def _length(a: AppLayout) -> str:
    if a.framing == "moldudp64":
        return f"(bit<{COUNT_WIDTH}>)meta.{a.meta('msglen')}"
    return f"(bit<{COUNT_WIDTH}>)(hdr.udp.length - 8)"


def _satisfied(v: StateVar, j: int) -> str:
    """Boundary j holds for the compared value (cn, cs): docs/pipeline-ir.md step 3."""
    t, strict = f"meta.st_t{j}", f"meta.st_strict[{j}:{j}]"
    if v.kind != "average":
        return f"cn > {t} || {strict} == 0 && cn == {t}"
    product = f"(bit<{SUM_WIDTH}>){t} * (bit<{SUM_WIDTH}>)cn"  # both below 2^32: exact
    return (f"cn == 0 && {strict} == 0 && {t} == 0"
            f" || cn != 0 && (cs > {product} || {strict} == 0 && cs == {product})")


def _bank(a: AppLayout, v: StateVar, b: int, g: int) -> list[str]:
    """Bank b of state v (global bank g): bind, read, region, the cell to write."""
    cw, avg = v.cell_width, v.kind == "average"
    n_shift = SUM_WIDTH if avg else 0
    idx = "(bit<32>)meta.st_base"
    if v.key is not None:
        mask = min(v.buckets, 1 << v.key.width) - 1  # a narrow key is below the buckets anyway
        idx += f" + (bit<32>)({_field(a, v.key)} & {v.key.width}w{mask})"
    dn = _length(a) if v.kind == "meter" and v.unit == "bytes" else f"{COUNT_WIDTH}w1"
    body = [f"hit_{g} = 1;",
            f"scoped_{g} = meta.st_scoped;",
            f"idx_{g} = {idx};",
            f"{v.registers[b]}.read(cell_{g}, idx_{g});",
            f"bit<{TAG_WIDTH}> tag = (bit<{TAG_WIDTH}>)(cell_{g} >> {cw - TAG_WIDTH});",
            f"bit<{COUNT_WIDTH}> n = (bit<{COUNT_WIDTH}>)" + (f"(cell_{g} >> {n_shift});" if n_shift else f"cell_{g};")]
    if avg:
        body.append(f"bit<{SUM_WIDTH}> s = (bit<{SUM_WIDTH}>)cell_{g};")
    body += [f"if (tag != w_{v.ident}) {{", "    n = 0;"] + (["    s = 0;"] if avg else []) + ["}"]
    # The added value, saturating as a whole: one bit wider, then kept only if neither
    # accumulator passed its maximum.
    body.append(f"bit<{COUNT_WIDTH + 1}> n_sum = (bit<{COUNT_WIDTH + 1}>)n + (bit<{COUNT_WIDTH + 1}>){dn};")
    fits = f"n_sum[{COUNT_WIDTH}:{COUNT_WIDTH}] == 0"
    if avg:
        body.append(f"bit<{SUM_WIDTH + 1}> s_sum = (bit<{SUM_WIDTH + 1}>)s + "
                    f"(bit<{SUM_WIDTH + 1}>){_field(a, v.field)};")
        fits += f" && s_sum[{SUM_WIDTH}:{SUM_WIDTH}] == 0"
    body += [f"bit<{COUNT_WIDTH}> n_new = n;"] + ([f"bit<{SUM_WIDTH}> s_new = s;"] if avg else [])
    body += [f"if ({fits}) {{", f"    n_new = n_sum[{COUNT_WIDTH - 1}:0];"]
    body += [f"    s_new = s_sum[{SUM_WIDTH - 1}:0];"] if avg else []
    body += ["}"]
    # The compared value: after the add when the state is scoped, before it otherwise.
    body += [f"bit<{COUNT_WIDTH}> cn = n;"] + ([f"bit<{SUM_WIDTH}> cs = s;"] if avg else [])
    body += ["if (meta.st_scoped == 1) {", "    cn = n_new;"] + (["    cs = s_new;"] if avg else []) + ["}"]
    body.append(f"bit<{REGION_WIDTH}> region = 0;")
    for j in range(MAX_BOUNDARIES):
        body += [f"if (meta.st_bounds > {j} && ({_satisfied(v, j)})) {{", "    region = region + 1;", "}"]
    # A slice assignment, not a shift: p4c-bm2-ss refuses constant shifts of 256 or more.
    lo = REGION_WIDTH * g
    body.append(f"meta.{a.meta('regions')}[{lo + REGION_WIDTH - 1}:{lo}] = region;")
    new = f"(bit<{cw}>)w_{v.ident} << {cw - TAG_WIDTH} | (bit<{cw}>)n_new" + (f" << {n_shift}" if n_shift else "")
    if avg:
        new += f" | (bit<{cw}>)s_new"
    body.append(f"cell_{g} = {new};")
    head = [f"// {v.name}, bank {b}: region bits {REGION_WIDTH * g}..{REGION_WIDTH * g + REGION_WIDTH - 1}"]
    return head + [f"if ({v.bind_tables[b]}.apply().hit) {{"] + ["    " + x for x in body] + ["}"]


def stages(a: AppLayout) -> list[str]:
    """After the walk: the state stages when it decided `stateful(ctx)`, leaving the
    message decided as `mcast(ports)` (ports != 0) or undecided (no port)."""
    st = a.app.state
    if st is None:
        return []
    out = ["if (meta.st_on == 1) {",
           "    // docs/pipeline-ir.md, \"State\": bind and read each bank, decide, write.",
           f"    bit<{TIMESTAMP_WIDTH}> ts = {_timestamp(a)};"]
    for v in st.vars:
        out.append(f"    bit<{TAG_WIDTH}> w_{v.ident} = {divide('ts', TIMESTAMP_WIDTH, v.window_us)};"
                   f"  // floor(ts / {v.window_us})")
    out.append(f"    meta.{a.meta('regions')} = 0;")
    g = 0
    banks = []
    for v in st.vars:
        for b in range(v.banks):
            out += [f"    bit<1> hit_{g} = 0;", f"    bit<1> scoped_{g} = 0;", f"    bit<32> idx_{g} = 0;",
                    f"    bit<{v.cell_width}> cell_{g} = 0;"]
            out += ["    " + x for x in _bank(a, v, b, g)]
            banks.append((v, b, g))
            g += 1
    out += ["    meta.ports = 0;  // a miss: no port, and no update",
            "    meta.st_update = 0;",
            f"    {st.decide_table}.apply();"]
    for v, b, g in banks:
        out += [f"    if (hit_{g} == 1 && (scoped_{g} == 1 || meta.st_update[{g}:{g}] == 1)) {{",
                f"        {v.registers[b]}.write(idx_{g}, cell_{g});",
                "    }"]
    out += ["    meta.st_on = 0;",
            "    meta.decided = 0;",
            "    if (meta.ports != 0) {",
            "        meta.decided = 1;  // as mcast(ports)",
            "        meta.multicast = 1;",
            "    }",
            "}"]
    return out


def tables(pipeline: Pipeline, a: AppLayout) -> list[tuple[str, list[tuple[str, str, str]], tuple[str, ...]]]:
    """(name, keys, actions) of the application's bind and decide tables, in IR order."""
    st = a.app.state
    if st is None:
        return []
    ctx = ("meta.st_ctx", "exact", "ctx")
    out = [(t, [ctx], pipeline.tables[t].actions) for v in st.vars for t in v.bind_tables]
    out.append((st.decide_table, [ctx, (f"meta.{a.meta('regions')}", "exact", "regions")],
                pipeline.tables[st.decide_table].actions))
    return out
