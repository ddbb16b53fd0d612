"""The ITCH feed as a Kafka topic, and one filtered view per subscriber, served by `camus serve`.

Each record's value is one raw ITCH 5.0 message (type byte first, no length prefix, exactly
the bytes of a MoldUDP64 block); one partition keeps the feed's order, so a record's offset
is its message's sequence number minus one. The topic's `camus.schema` declares the Add
Order fields as byte ranges of the value (wire-formats.md 1.3), under the names the P4 spec
uses, so a subscriber's filter reads the same in both places:

    type:str1=bytes:0:1, buy_sell_indicator:str1=bytes:19:1, shares:u32=bytes:20:4,
    stock:str8=bytes:24:8, price:u32=bytes:32:4

A view is a topic created through the ordinary CreateTopics API with `camus.source=itch`
and `camus.filter=(type == "A" or type == "F") and (FILTER)`. The type guard is what the P4
spec's `message_type` annotation does on the switch: other messages are shorter (their
stock bytes are missing, which the schema turns into spaces) or hold other fields at those
offsets (an Order Replace has its new order number there), so no filter may look at them.
Consumers of a view read the selected messages with their original offsets, gaps included.

`apps.kafka_demo` runs the topics through `camus serve` and reads the views.
"""

from __future__ import annotations

from collections.abc import Sequence

from apps.itch_filter.subscription import Subscription

TOPIC = "itch"
SCHEMA = ("type:str1=bytes:0:1,buy_sell_indicator:str1=bytes:19:1,shares:u32=bytes:20:4,"
          "stock:str8=bytes:24:8,price:u32=bytes:32:4")
ADD_ORDER_GUARD = '(type == "A" or type == "F")'
CLIENT = "camus-itch-demo"  # the demo's admin client and consumer group


def view_name(s: Subscription) -> str:
    return f"itch-{s.name}"


def view_filter(s: Subscription) -> str:
    return f"{ADD_ORDER_GUARD} and ({s.filter})"


def views(subscriptions: Sequence[Subscription]) -> dict[str, str]:
    """{view name: filter}, one view per subscriber."""
    return {view_name(s): view_filter(s) for s in subscriptions}
