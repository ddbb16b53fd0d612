"""Group assignments as switch subscriptions, observed inside a broker run in-process.

A member's assignment (topic or view, partitions) becomes one rule on the embedded switch;
a rebalance, a LeaveGroup or an expired session changes the rules, and only the
difference is written. The switch must then hold exactly the compiled entries.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import NewTopic  # noqa: E402

from .conftest import unique, wait_until  # noqa: E402
from .test_confluent_kafka import create  # noqa: E402
from .test_groups_and_restart import Member, produce  # noqa: E402


def member_subs(broker):
    dp = broker.datapath
    return sorted((sorted(s.partitions or []), s.topic_id) for p, s in dp.subscriptions.items()
                  if p not in broker.view_ports)


def switch_matches_compiled(broker) -> bool:
    import json as _json

    dp = broker.datapath
    have = sorted(_json.dumps(e, sort_keys=True) for e in dp.target.entries())
    want = sorted(_json.dumps(e, sort_keys=True) for e in dp.entries["table_entries"])
    return have == want


def test_member_assignments_become_subscriptions_and_follow_rebalances(inprocess):
    b = inprocess.broker
    src, view, group = unique("live"), unique("live-view"), unique("g")
    create(inprocess.bootstrap, NewTopic(src, 4, 1, config={"camus.schema": "n:u32=$.n"}))
    create(inprocess.bootstrap, NewTopic(view, config={"camus.source": src, "camus.filter": "n < 5"}))
    a = Member(inprocess.bootstrap, group, view)
    assert wait_until(lambda: (a.poll(0.1), a.assigned == {0, 1, 2, 3})[1], 15)
    assert wait_until(lambda: member_subs(b) == [([0, 1, 2, 3], b.catalog.get(src).number)], 5)
    m = Member(inprocess.bootstrap, group, view)

    def split():
        a.poll(0.05)
        m.poll(0.05)
        return len(a.assigned) == 2 and len(m.assigned) == 2

    assert wait_until(split, 20)
    assert wait_until(lambda: [p for p, _ in member_subs(b)] == sorted(
        [sorted(a.assigned), sorted(m.assigned)]), 5)
    assert switch_matches_compiled(b)
    produce(inprocess.bootstrap, src, [json.dumps({"n": n}).encode() for n in range(20)],
            partitions=4)
    assert wait_until(lambda: (a.poll(0.05), m.poll(0.05), len(a.got) + len(m.got) == 5)[2], 15)
    writes_before = b.datapath.stats.writes
    m.c.close()
    assert wait_until(lambda: (a.poll(0.1), a.assigned == {0, 1, 2, 3})[1], 20)
    assert wait_until(lambda: len(member_subs(b)) == 1, 5)
    assert switch_matches_compiled(b)
    # The change rewrote the members' entries, not the view's nor a full reload.
    assert 0 < b.datapath.stats.writes - writes_before < 4 * len(b.datapath.entries["table_entries"]) + 8
    a.c.close()
    assert wait_until(lambda: member_subs(b) == [], 10)


CRASHING_MEMBER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "session.timeout.ms": 3000, "heartbeat.interval.ms": 300})
    c.subscribe([sys.argv[3]], on_assign=lambda c, p: print("assigned", flush=True))
    while True:
        c.poll(0.1)
""")


def test_session_expiry_of_a_crashed_member_rebalances(inprocess):
    topic, group = unique("crash"), unique("g")
    create(inprocess.bootstrap, NewTopic(topic, 2, 1))
    a = Member(inprocess.bootstrap, group, topic)
    assert wait_until(lambda: (a.poll(0.1), a.assigned == {0, 1})[1], 15)
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_MEMBER, inprocess.bootstrap, group,
                             topic], stdout=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: (a.poll(0.05), len(a.assigned) == 1)[1], 20)
        proc.send_signal(signal.SIGKILL)  # no LeaveGroup: only the session timeout can tell
        proc.wait(5)
        assert wait_until(lambda: (a.poll(0.1), a.assigned == {0, 1})[1], 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    a.c.close()
