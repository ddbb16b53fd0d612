"""ACL gaps found from outside (issue 24): a KIP-848 subscription reaching topics its member
may not describe, a view's filter widened without Read on its source, OffsetDelete without
Read on the topic. Real sockets, SASL logins, the ACLs Kafka's KafkaApis checks; bob starts
with no ACL in each test and is granted exactly what the step needs (this module has its
own broker)."""

from __future__ import annotations

from confluent_kafka.admin import AclOperation, ResourceType

from tests.broker.conftest import unique
from tests.broker.test_acls import acl_broker, grant, make_topic, raw_login  # noqa: F401 (fixture)
from tests.broker.test_acls_admin_and_txn_apis import ask

NONE, TOPIC_AUTH = 0, 29


def _beat(s, group, member, epoch, names=None, regex=None):
    return ask(s, 68, 1, group_id=group, member_id=member, member_epoch=epoch, instance_id=None,
               rack_id=None, rebalance_timeout=30000, subscribed_topic_names=names,
               subscribed_topic_regex=regex, server_assignor=None,
               topic_partitions=[] if epoch == 0 else None)


def _topic_ids(s, *names) -> dict:
    meta = ask(s, 3, 12, topics=[{"topic_id": None, "name": n} for n in names],
               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return {t.topic_id: t.name for t in meta.topics}


def test_kip848_subscriptions_reach_only_describable_topics(acl_broker):
    """Naming a topic bob may not describe fails the heartbeat with TOPIC_AUTHORIZATION_FAILED
    (and joins nobody); a regex matching it and a describable one gets only the latter."""
    tag = unique("k848acl")
    seen, hidden, group = f"{tag}-seen", f"{tag}-hidden", f"{tag}-g"
    make_topic(acl_broker, seen)
    make_topic(acl_broker, hidden)
    grant(acl_broker, "User:bob", ResourceType.GROUP, group, AclOperation.READ)
    grant(acl_broker, "User:bob", ResourceType.TOPIC, seen, AclOperation.DESCRIBE)
    admin_s = raw_login(acl_broker, "admin")
    ids = _topic_ids(admin_s, seen, hidden)
    s = raw_login(acl_broker, "bob")

    for names in ([hidden], [seen, hidden]):
        refused = _beat(s, group, "m1", 0, names=names)
        assert refused.error_code == TOPIC_AUTH, (names, refused)
        assert refused.assignment is None
    described = ask(admin_s, 69, 0, group_ids=[group], include_authorized_operations=False)
    assert described.groups[0].error_code != NONE  # the refused joins made no group

    by_name = _beat(s, group, "m1", 0, names=[seen])
    assert by_name.error_code == NONE
    assert {ids[tp.topic_id] for tp in by_name.assignment.topic_partitions} == {seen}

    by_regex = _beat(s, group, "m2", 0, regex=f"{tag}-.*")
    assert by_regex.error_code == NONE
    got = {ids[tp.topic_id] for tp in by_regex.assignment.topic_partitions}
    assert hidden not in got  # before: every partition of `hidden` went to bob
    # The admin's member, in another group, resolves the same regex over both.
    other = _beat(admin_s, f"{group}-2", "a1", 0, regex=f"{tag}-.*")
    assert {ids[tp.topic_id] for tp in other.assignment.topic_partitions} == {seen, hidden}
    s.close()
    admin_s.close()
