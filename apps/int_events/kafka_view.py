"""The INT stream as a Kafka topic, and the `int-anomalies` view ordinary consumers read.

Each record's value is one INT report exactly as it rode in UDP: the shim, the INT-MD
header, the hop stack and the sender's payload after it (the UDP payload of the INT packet).
The topic `int-telemetry` declares the top record's fields as byte ranges of that value
(`camus.schema`, shim/schema.py), and the view `int-anomalies` is a topic whose configs name
the source and a filter over those fields (`camus.source`, `camus.filter`), created through
the ordinary CreateTopics API. `camus serve` evaluates the filter in its embedded switch, so
a consumer of the view receives only the anomalies, with their original offsets.

`render_json` is the JSON rendering of a value (use it as a consumer's value deserializer).
`apps.kafka_demo` runs the topics through `camus serve` and reads the view.
"""

from __future__ import annotations

from apps.int_events.fabric import packet_number
from apps.int_events.int_md import MD_HEADER_BYTES, SHIM_BYTES, decode

TELEMETRY_TOPIC = "int-telemetry"
VIEW = "int-anomalies"
CLIENT = "camus-int-demo"  # the demo's admin client and consumer group
_TOP = SHIM_BYTES + MD_HEADER_BYTES  # the top record starts right after the MD header
SCHEMA = ",".join((
    f"switch_id:u32=bytes:{_TOP}:4",
    f"ingress_port:u16=bytes:{_TOP + 4}:2",
    f"egress_port:u16=bytes:{_TOP + 6}:2",
    f"hop_latency:u32=bytes:{_TOP + 8}:4",
    f"queue_id:u8=bytes:{_TOP + 12}:1",
    f"queue_occupancy:u32=bytes:{_TOP + 13}:3",
))


def render_json(value: bytes) -> dict:
    """One record value (an INT report) as a JSON-ready dict, most recent hop first."""
    stack, rest = decode(value)
    number, time_ns = packet_number(rest)
    return {
        "packet": number,
        "time_ns": time_ns,
        "original_port": stack.original_port,
        "remaining_hop_count": stack.remaining_hop_count,
        "flags": {"discard": stack.discard, "hop_count_exceeded": stack.hop_count_exceeded,
                  "mtu_exceeded": stack.mtu_exceeded},
        "hops": [{"node_id": h.node_id, "ingress_port": h.ingress_port, "egress_port": h.egress_port,
                  "hop_latency": h.hop_latency, "queue_id": h.queue_id, "queue_occupancy": h.queue_occupancy}
                 for h in stack.hops],
    }
