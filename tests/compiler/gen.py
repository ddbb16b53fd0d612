"""Random specs, rule sets and messages for property tests (shared by compiler and switch tests).

Constants are drawn from a small pool per field (so rules overlap and share cut points) that
always includes the boundary values 0 and 2^w - 1 and their neighbours; messages take values
at, just below and just above every constant, which is where an off-by-one would hide.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from compiler.spec import Spec, parse_spec

WIDTHS = (1, 2, 3, 8, 16, 32, 64)


@dataclass
class FieldGen:
    qname: str
    width: int
    kind: str  # range | exact | lpm
    pool: list[int]


def random_spec(rng: random.Random, n_fields: int | None = None) -> tuple[Spec, list[FieldGen]]:
    n = n_fields or rng.randint(1, 4)
    lines, annotations, gens = [], [], []
    for i in range(n):
        width = rng.choice(WIDTHS)
        kind = rng.choice(("range", "range", "exact", "lpm"))
        lines.append(f"    bit<{width}> f{i};")
        annotations.append({"range": "query_field", "exact": "query_field_exact",
                            "lpm": "query_field_lpm"}[kind] + f"(msg.f{i})")
        top = (1 << width) - 1
        pool = {0, top, min(1, top), max(top - 1, 0)}
        while len(pool) < min(top + 1, 6):
            pool.add(rng.randint(0, top))
        gens.append(FieldGen(f"msg.f{i}", width, kind, sorted(pool)))
    pad = (-sum(g.width for g in gens)) % 8
    if pad:
        lines.append(f"    bit<{pad}> pad;")
    text = "header msg {\n" + "\n".join(lines) + "\n}\n" + \
        "\n".join(f"@pragma {a}" for a in annotations) + "\n"
    return parse_spec(text, name="t"), gens


def random_filter(rng: random.Random, gens: list[FieldGen], depth: int = 0) -> str:
    r = rng.random()
    if depth < 3 and r < 0.25:
        op = rng.choice(("and", "or"))
        parts = [random_filter(rng, gens, depth + 1) for _ in range(rng.randint(2, 3))]
        return "(" + f" {op} ".join(parts) + ")"
    if depth < 3 and r < 0.32:
        return "not " + random_filter(rng, gens, depth + 1)
    if r < 0.34:
        return rng.choice(("true", "false"))
    g = rng.choice(gens)
    value = rng.choice(g.pool)
    if g.kind == "exact":
        op = rng.choice(("==", "!="))
    elif g.kind == "lpm":
        op = rng.choice(("==", "!="))
        if rng.random() < 0.6:
            plen = rng.randint(0, g.width)
            return f"{g.qname} {op} {value}/{plen}" if g.width != 32 else \
                f"{g.qname} {op} {_dotted(value)}/{plen}"
    else:
        op = rng.choice(("==", "!=", "<", "<=", ">", ">="))
    if rng.random() < 0.2 and g.kind != "lpm":
        values = ", ".join(str(rng.choice(g.pool)) for _ in range(rng.randint(1, 3)))
        return f"{g.qname} {'not in' if rng.random() < 0.3 else 'in'} {{{values}}}"
    return f"{g.qname} {op} {value}"


def random_rules(rng: random.Random, gens: list[FieldGen], n: int, max_port: int = 12) -> str:
    lines = []
    for _ in range(n):
        ports = sorted(rng.sample(range(1, max_port + 1), rng.randint(1, 3)))
        lines.append(f"{random_filter(rng, gens)} : fwd({', '.join(map(str, ports))})")
    return "\n".join(lines)


def random_message(rng: random.Random, gens: list[FieldGen]) -> dict[str, int]:
    out = {}
    for g in gens:
        top = (1 << g.width) - 1
        if rng.random() < 0.8:
            v = rng.choice(g.pool) + rng.choice((-1, 0, 0, 1))
            out[g.qname] = min(max(v, 0), top)
        else:
            out[g.qname] = rng.randint(0, top)
    return out


def _dotted(v: int) -> str:
    return ".".join(str((v >> s) & 0xFF) for s in (24, 16, 8, 0))


def itch_mix(rng: random.Random, n: int, stocks: int = 150, prices: int = 3000) -> str:
    """`n` ITCH rules of the four everyday kinds, in equal shares: one stock, a set of two
    stocks, a price band, a stock above a price; each to one of 100 ports. Stock names come
    from a pool of `stocks`, prices from `prices` multiples of $0.01 (the defaults: 20,000
    such rules are estimated at 1,500,786 entries and compile to 8,007, issue 24 item 1)."""
    names = [f"S{i:03d}" for i in range(stocks)]
    lines = []
    for _ in range(n):
        kind = rng.randrange(4)
        if kind == 0:
            f = f'stock == "{rng.choice(names)}"'
        elif kind == 1:
            a, b = rng.sample(names, 2)
            f = f'stock in {{"{a}", "{b}"}}'
        elif kind == 2:
            lo, hi = sorted(rng.sample(range(prices), 2))
            f = f"price >= {lo * 100} and price <= {hi * 100}"
        else:
            f = f'stock == "{rng.choice(names)}" and price > {rng.randrange(prices) * 100}'
        lines.append(f"{f} : fwd({rng.randint(1, 100)})")
    return "\n".join(lines)
