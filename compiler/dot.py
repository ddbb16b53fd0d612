"""The decision diagram as Graphviz dot: one node per state, one edge per value interval."""

from __future__ import annotations

from compiler.diagram import Diagram


def render(d: Diagram, ids: dict[int, int] | None = None, max_edges_per_node: int = 64) -> str:
    ids = ids or {s: s for s in range(len(d.contents))}
    lines = ["digraph camus {", "  rankdir=TB;", "  node [fontname=Helvetica fontsize=10];"]
    for s in d.reachable():
        g, items = d.contents[s]
        split = d.splits.get(s)
        if split is not None:
            q = d.order[split.stage]
            lines.append(f'  s{ids[s]} [shape=ellipse label="{q.qname}\\nstate {ids[s]}"];')
            shown = split.intervals[:max_edges_per_node]
            for lo, hi, t in shown:
                lines.append(f'  s{ids[s]} -> s{ids[t]} [label="{_interval(q, lo, hi)}"];')
            if len(split.intervals) > len(shown):
                lines.append(f'  s{ids[s]}_more [shape=plaintext label="'
                             f'+{len(split.intervals) - len(shown)} more"];')
                lines.append(f"  s{ids[s]} -> s{ids[s]}_more [style=dotted];")
        elif not items:
            ports = ",".join(map(str, sorted(g))) or "none"
            lines.append(f'  s{ids[s]} [shape=box label="fwd({ports})"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _interval(q, lo: int, hi: int) -> str:
    def show(v: int) -> str:
        if not q.ascii:
            return str(v)
        raw = v.to_bytes(q.width // 8, "big")
        if all(32 <= b < 127 and b not in b'"\\' for b in raw):
            return f'\\"{raw.decode().rstrip()}\\"'
        return hex(v)

    if lo == hi:
        return show(lo)
    if lo == 0 and hi == q.max_value:
        return "*"
    return f"{show(lo)}..{show(hi)}"
