"""Regular expressions clients send (issue 24, item 13): ConsumerGroupHeartbeat's
subscribed_topic_regex and ListTransactions' transactional_id_pattern.

Python's `re` backtracks: `(.*.*)*X` against a 30-character name that has no X takes
longer than the age of the universe, and it ran on the event loop, so one such request
stopped every answer to every client. Kafka matches them with RE2/J, in linear time; camus
now does the same with RE2, and refuses what RE2 cannot express (lookaround,
backreferences) with INVALID_REGULAR_EXPRESSION, as Kafka does."""

from __future__ import annotations

import socket
import time

from shim.protocol import ErrorCode

from .conftest import unique
from .test_bad_input import connect, read_frame, request
from .test_wire_semantics import call, create_topic
from tests.protocol.protocol_helpers import decode_response

HOSTILE = "(.*.*)*X"
LONG_NAME = "a" * 30  # no X: a backtracking matcher tries every split of it


def _heartbeat(group: str, regex: str) -> bytes:
    return request(68, 1, 11, group_id=group, member_id="m-regex", member_epoch=0,
                   instance_id=None, rack_id=None, rebalance_timeout=30000,
                   subscribed_topic_names=None, subscribed_topic_regex=regex,
                   server_assignor=None, topic_partitions=[])


def _list_transactions(pattern: str) -> bytes:
    return request(66, 2, 12, state_filters=[], producer_id_filters=[], duration_filter=-1,
                   transactional_id_pattern=pattern)


def _others_answered_promptly(server) -> float:
    """How long another client waits for an ApiVersions and a Metadata answer."""
    other = connect(server)
    other.settimeout(5)
    t0 = time.monotonic()
    try:
        assert call(other, 18, 3, client_software_name="t",
                    client_software_version="1").error_code == ErrorCode.none
        meta = call(other, 3, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
        assert LONG_NAME in {t.name for t in meta.topics}
    except socket.timeout:
        return float("inf")
    finally:
        other.close()
    return time.monotonic() - t0


def test_a_hostile_regex_neither_freezes_the_broker_nor_goes_unanswered(camus_server):
    server = camus_server()
    s = connect(server)
    assert create_topic(s, LONG_NAME).error_code == ErrorCode.none
    init = call(s, 22, 4, transactional_id=LONG_NAME, transaction_timeout=60000,
                producer_id=-1, producer_epoch=-1)
    assert init.error_code == ErrorCode.none

    s.sendall(_heartbeat(unique("g"), HOSTILE))
    assert _others_answered_promptly(server) < 2
    s.settimeout(5)
    beat = decode_response(68, 1, read_frame(s))[1]
    assert beat.error_code == ErrorCode.none, beat  # valid syntax: it simply matches nothing
    assert not beat.assignment.topic_partitions
    s.sendall(_heartbeat(unique("g"), "a{30}"))  # the engine matches what it should
    beat = decode_response(68, 1, read_frame(s))[1]
    assert [len(tp.partitions) for tp in beat.assignment.topic_partitions] == [1]

    s.sendall(_list_transactions(HOSTILE))
    assert _others_answered_promptly(server) < 2
    listed = decode_response(66, 2, read_frame(s))[1]
    assert listed.error_code == ErrorCode.none and not listed.transaction_states
    # The same engine still matches what it should, whole names only.
    listed = decode_response(66, 2, (s.sendall(_list_transactions("a{30}")), read_frame(s))[1])[1]
    assert [t.transactional_id for t in listed.transaction_states] == [LONG_NAME]
    listed = decode_response(66, 2, (s.sendall(_list_transactions("a{29}")), read_frame(s))[1])[1]
    assert not listed.transaction_states
    s.close()


def test_syntax_re2_cannot_run_in_linear_time_is_refused(broker):
    """Lookahead and backreferences (Java and Python have them, RE2/J does not): refused
    with INVALID_REGULAR_EXPRESSION and a message, as Kafka refuses them; so is a pattern
    that does not parse at all. The group is not created by the refused join."""
    s = connect(broker)
    for bad in ("(?=a).*", r"(a)\1", "(unclosed"):
        group = unique("g")
        s.sendall(_heartbeat(group, bad))
        beat = decode_response(68, 1, read_frame(s))[1]
        assert beat.error_code == ErrorCode.invalid_regular_expression, (bad, beat)
        assert beat.error_message
        described = call(s, 69, 0, group_ids=[group], include_authorized_operations=False)
        assert described.groups[0].error_code == ErrorCode.group_id_not_found
        s.sendall(_list_transactions(bad))
        listed = decode_response(66, 2, read_frame(s))[1]
        assert listed.error_code == ErrorCode.invalid_regular_expression, (bad, listed)
    s.close()


def test_a_regex_is_matched_once_per_change_of_topics_not_per_heartbeat():
    """Sixty members of one group share a costly regex over 2,000 topics. Before, every
    heartbeat matched every member's regex against every topic name (these 120 heartbeats
    took 42 s here, on the event loop). Now a regex is matched once until the topics
    change; a topic appearing is still found."""
    from shim.consumer_groups import ConsumerGroups

    names = [f"{'x' * 40}-{i}" for i in range(2000)] + ["wanted-1"]
    groups = ConsumerGroups(lambda g: None, lambda t: 1, lambda: list(names))
    regex = "(wanted|[a-z]{0,30}(ab|cd){1,20}x{0,100})-[0-9]+"

    def beat(member, epoch=0):
        return groups.heartbeat("g", member, epoch, instance_id=None, rack_id=None,
                                rebalance_timeout_ms=30000, subscribed=None, regex=regex,
                                owned=None, client_id="c", client_host="h")

    t0 = time.monotonic()
    epochs = {f"m{i}": beat(f"m{i}")["member_epoch"] for i in range(60)}
    for member, epoch in epochs.items():
        beat(member, epoch)
    assert time.monotonic() - t0 < 3
    assert groups.topics_of(groups.groups["g"].members["m0"]) == {"wanted-1"}
    names.append("wanted-2")
    assert groups.topics_of(groups.groups["g"].members["m0"]) == {"wanted-1", "wanted-2"}
