"""A Kafka client run inside an emulated host's namespace (`mnexec -a PID`), for
test_kafka_fabric.py's Mininet test: the host's broker listens on that namespace's loopback,
which the test's own namespace cannot reach.

    python kafka_host_client.py BOOTSTRAP create TOPIC CONFIG_JSON
    python kafka_host_client.py BOOTSTRAP produce TOPIC DOCS_JSON_FILE
    python kafka_host_client.py BOOTSTRAP consume TOPIC WANT QUIET_SECONDS   # prints a JSON list
"""

from __future__ import annotations

import json
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def main(bootstrap: str, what: str, topic: str, *rest: str) -> int:
    if what == "create":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(topic, 2, 1, config=json.loads(rest[0]))]).values():
            f.result(30)
    elif what == "produce":
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        with open(rest[0]) as fh:
            for i, d in enumerate(json.load(fh)):
                p.produce(topic, json.dumps(d).encode(), partition=i % 2)
        if p.flush(30):
            return 1
    elif what == "consume":
        want, quiet = int(rest[0]), float(rest[1])
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        got, last, deadline = [], time.monotonic(), time.monotonic() + 60
        while time.monotonic() < deadline and time.monotonic() - last < quiet + (3 if not got else 0):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(json.loads(m.value()))
                last = time.monotonic()
                if len(got) >= want > 0:
                    break
        c.close()
        print(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
