"""A subscriber's filter, as camus rules, and the host-side check of a message against it.

A subscription is a filter over the Add Order fields that p4/itch/itch.p4 declares (`stock`,
`price`, `shares`, `buy_sell_indicator`) and the switch port its copies leave by. The switch
compiles every subscription into its tables; each subscriber also keeps its own rules and
checks every message it gets against them with `compiler.semantics` (the definition of
correct), which is all a host-filtering subscriber does with the whole feed.

Only subscription messages can be selected: `A` and `F` (the spec's `message_type`
annotation), at least as long as the spec's message. Executions, cancels and the rest carry
no symbol and are never selected, on the switch or here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from compiler.ast import Rule
from compiler.rules import parse_rules
from compiler.semantics import evaluate
from compiler.spec import Spec, load_spec

SPEC_PATH = Path(__file__).resolve().parents[2] / "p4" / "itch" / "itch.p4"


@functools.cache
def itch_spec() -> Spec:
    return load_spec(SPEC_PATH)


@dataclass(frozen=True)
class Subscription:
    name: str
    filter: str  # e.g. 'stock == "MSFT" and price > 3000000'
    port: int  # the switch port whose copies reach this subscriber

    @property
    def rule(self) -> str:
        return f"{self.filter} : fwd({self.port})"


# The demo's subscribers: the two example filters and three more of different
# selectivity (a narrow symbol, a broad side/size filter across every symbol).
DEMO_SUBSCRIPTIONS = (
    Subscription("googl", 'stock == "GOOGL"', 1),
    Subscription("msft-over-300", 'stock == "MSFT" and price > 3000000', 2),
    Subscription("aapl-500-shares", 'stock == "AAPL" and shares >= 500', 3),
    Subscription("nvda-under-119.90", 'stock == "NVDA" and price < 1199000', 4),
    Subscription("big-sells", 'buy_sell_indicator == "S" and shares >= 1000', 5),
)


def rules_text(subscriptions: tuple[Subscription, ...] | list[Subscription]) -> str:
    return "\n".join(s.rule for s in subscriptions) + "\n"


class Fields:
    """Reads the query fields of a subscription message, located as the spec declares them."""

    def __init__(self, spec: Spec):
        self.length = spec.message_bytes
        self.bits = 8 * self.length
        self.types = frozenset(spec.message_types)
        self.type_at = spec.message_offset(spec.message_type_field) // 8 if spec.message_type_field else None
        self.fields = [(q.qname, q.bit_offset, q.width) for q in spec.query_fields.values()]

    def values(self, message: bytes) -> dict[str, int] | None:
        """{qname: value} of a subscription message, or None for any other message."""
        if len(message) < self.length:
            return None
        if self.type_at is not None and message[self.type_at] not in self.types:
            return None
        whole = int.from_bytes(message[: self.length], "big")
        return {name: (whole >> (self.bits - off - width)) & ((1 << width) - 1)
                for name, off, width in self.fields}


class Matcher:
    """One subscriber's own rules, evaluated on the host."""

    def __init__(self, subscription: Subscription, spec: Spec | None = None):
        spec = spec or itch_spec()
        self.subscription = subscription
        self.rules: list[Rule] = parse_rules(subscription.rule, spec)
        self.fields = Fields(spec)

    def selects(self, message: bytes) -> bool:
        values = self.fields.values(message)
        return values is not None and self.subscription.port in evaluate(self.rules, values)


def expected_ports(rules: list[Rule], fields: Fields, message: bytes) -> set[int]:
    """The ports `compiler.semantics` says a message goes to (empty for non-subscription ones)."""
    values = fields.values(message)
    return set() if values is None else evaluate(rules, values)
