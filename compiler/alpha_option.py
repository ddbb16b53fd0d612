"""`camus compile --alpha`: approximate the rules before compiling (the paper's §IV-C/D).

`--alpha N` rounds every numeric range constant to a multiple of N; `--alpha price=100,shares=10`
gives fields their own α (fields named as in rules, `price` or `itch_order.price`; the others
stay exact). The rewrite is `compiler.approximate`: each filter becomes a superset of itself,
so the switch forwards everything the exact rules select and some more, which whoever receives
it filters exactly (a host-facing consumer must not get the extra: see the broker's edge check).
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.approximate import approximate_rules
from compiler.ast import Rule, state_atoms
from compiler.errors import CamusError, StateError
from compiler.spec import Spec


def parse_alpha(text: str, spec: Spec) -> int | dict[str, int]:
    """`N` or `field=N,field=N` as an α for `approximate_rules`; a clear error otherwise."""
    text = text.strip()
    if "=" not in text:
        return _positive(text, "--alpha")
    out: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise CamusError(f"--alpha: expected field=N, got {part.strip()!r}")
        try:
            q = spec.resolve(name.strip())
        except CamusError as exc:
            raise CamusError(f"--alpha: {exc.message}") from None
        if q.qname in out:
            raise CamusError(f"--alpha names '{q.qname}' twice")
        if q.ascii:
            raise CamusError(f"--alpha: '{q.qname}' holds characters, which are never rounded")
        out[q.qname] = _positive(value, f"--alpha {q.qname}")
    return out


def _positive(text: str, what: str) -> int:
    try:
        n = int(text.strip())
    except ValueError:
        raise CamusError(f"{what}: expected a positive integer, got {text.strip()!r}") from None
    if n < 1:
        raise CamusError(f"{what}: expected a positive integer, got {n}")
    return n


def apply(rules: Sequence[Rule], text: str | None, spec: Spec,
          source: str | None = None) -> list[Rule]:
    """The rules approximated as `--alpha text` says (unchanged without it). A stateful rule
    is refused: a wider filter is a wider scope, whose state would count other packets, so
    the result would be no superset of the rule."""
    if text is None:
        return list(rules)
    for r in rules:
        if r.updates or state_atoms(r.filter):
            raise StateError("--alpha widens filters, which for a stateful rule changes which "
                             "packets its state counts (no longer a superset of the rule): "
                             "compile stateful rules without --alpha", r.line or None, 1,
                             source)
    return approximate_rules(list(rules), parse_alpha(text, spec))

