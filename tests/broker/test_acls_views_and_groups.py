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


def _view_filter(s, view) -> str:
    described = ask(s, 32, 4, resources=[{"resource_type": 2, "resource_name": view,
                                          "configuration_keys": ["camus.filter"]}],
                    include_synonyms=False, include_documentation=False)
    return {c.name: c.value for c in described.results[0].configs}["camus.filter"]


def test_changing_a_views_filter_needs_read_on_its_source(acl_broker):
    """bob may alter the view's configs (ALTER_CONFIGS on it) but may not read its source:
    widening its filter (IncrementalAlterConfigs or AlterConfigs, validate-only or not) is
    TOPIC_AUTHORIZATION_FAILED and changes nothing; its other configs still change; with
    READ on the source the filter changes too, as creating the view would need."""
    tag = unique("viewacl")
    source, view = f"{tag}-src", f"{tag}-view"
    make_topic(acl_broker, source, **{"camus.schema": "price:u32=$.price"})
    make_topic(acl_broker, view, **{"camus.source": source, "camus.filter": "price > 100"})
    grant(acl_broker, "User:bob", ResourceType.TOPIC, view, AclOperation.ALTER_CONFIGS,
          AclOperation.READ)
    admin_s, s = raw_login(acl_broker, "admin"), raw_login(acl_broker, "bob")

    def incremental(name, value, validate_only=False):
        answer = ask(s, 44, 1, resources=[{"resource_type": 2, "resource_name": view, "configs": [
            {"name": name, "config_operation": 0, "value": value}]}], validate_only=validate_only)
        return answer.responses[0].error_code

    def whole(configs, validate_only=False):
        answer = ask(s, 33, 2, resources=[{"resource_type": 2, "resource_name": view, "configs": [
            {"name": k, "value": v} for k, v in configs.items()]}], validate_only=validate_only)
        return answer.responses[0].error_code

    assert incremental("camus.filter", "price >= 0") == TOPIC_AUTH
    assert incremental("camus.filter", "price >= 0", validate_only=True) == TOPIC_AUTH
    assert whole({"camus.source": source, "camus.filter": "price >= 0"}) == TOPIC_AUTH
    assert incremental("camus.source", f"{tag}-other") == TOPIC_AUTH
    assert _view_filter(admin_s, view) == "price > 100"
    assert incremental("retention.ms", "600000") == NONE  # not the filter: ALTER_CONFIGS is enough

    grant(acl_broker, "User:bob", ResourceType.TOPIC, source, AclOperation.READ)
    assert incremental("camus.filter", "price > 50") == NONE
    assert _view_filter(admin_s, view) == "price > 50"
    s.close()
    admin_s.close()


def test_offset_delete_needs_read_on_each_topic(acl_broker):
    """bob may delete the group (DELETE on it) but not read the topic: every partition he
    names, of the topic, past its end or of a topic that does not exist, is
    TOPIC_AUTHORIZATION_FAILED (before: UNKNOWN_TOPIC_OR_PARTITION told which exist and how
    many partitions they have, and the committed offset was deleted); the offset stays.
    With READ on the topic it is deleted."""
    tag = unique("odacl")
    topic, group = f"{tag}-t", f"{tag}-g"
    make_topic(acl_broker, topic)  # two partitions
    grant(acl_broker, "User:bob", ResourceType.GROUP, group, AclOperation.DELETE)
    admin_s, s = raw_login(acl_broker, "admin"), raw_login(acl_broker, "bob")
    committed = ask(admin_s, 8, 9, group_id=group, generation_id_or_member_epoch=-1,
                    member_id="", group_instance_id=None, topics=[
                        {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                        "committed_leader_epoch": -1,
                                                        "committed_metadata": ""}]}])
    assert committed.topics[0].partitions[0].error_code == NONE

    def delete(user_s, name, *partitions):
        answer = ask(user_s, 47, 0, group_id=group, topics=[
            {"name": name, "partitions": [{"partition_index": p} for p in partitions]}])
        assert answer.error_code == NONE
        return [p.error_code for t in answer.topics for p in t.partitions]

    def offset():
        fetched = ask(admin_s, 9, 8, groups=[{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0]}]}], require_stable=False)
        return fetched.groups[0].topics[0].partitions[0].committed_offset

    assert delete(s, topic, 0, 7) == [TOPIC_AUTH, TOPIC_AUTH]
    assert delete(s, f"{tag}-nothing", 0) == [TOPIC_AUTH]
    assert offset() == 1
    grant(acl_broker, "User:bob", ResourceType.TOPIC, topic, AclOperation.READ)
    assert delete(s, topic, 0, 7) == [NONE, 3]  # UNKNOWN_TOPIC_OR_PARTITION past its end
    assert offset() == -1
    s.close()
    admin_s.close()
