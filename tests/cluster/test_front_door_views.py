"""Views through the front door: a Kafka client creates a view through `camus serve --kafka`
as it would on the embedded broker (CreateTopics with camus.source and camus.filter, a
source with camus.schema), the view is materialised into the three-node cluster (by the
materialiser `camus serve --kafka` runs, and by a `camus cluster materialise` instance
sharing the work), and a consumer reading the view straight from the cluster and one
reading it through camus see the same records: those the reference evaluator selects."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from shim.cluster.catalog import Catalog, group_id  # noqa: E402
from shim.cluster.connection import settings_from  # noqa: E402
from tests.front_door.conftest import front_door  # noqa: E402

from .conftest import camus, unique, wait_until  # noqa: E402
from .kafka_io import caught_up, read_all  # noqa: E402
from .test_materialise import SCHEMA, check_view, doc, expected, produce  # noqa: E402

pytestmark = pytest.mark.java

QUIET = {"log_level": 0}


def _create(admin: AdminClient, *topics: NewTopic) -> dict[str, KafkaException | None]:
    """Each topic's outcome: None, or the error the front door answered."""
    out = {}
    for name, future in admin.create_topics(list(topics), operation_timeout=60).items():
        try:
            future.result(90)
            out[name] = None
        except KafkaException as exc:
            out[name] = exc
    return out


def _views(bootstrap: str, deployment: str) -> set[str]:
    catalog = Catalog(settings_from(bootstrap), deployment)
    try:
        return set(catalog.read().views)
    finally:
        catalog.close()


def test_a_view_created_through_camus_is_materialised_and_read_alike(cluster, materialisers):
    b = cluster.bootstrap
    dep, src, view = unique("dep"), unique("src"), unique("view")
    door = front_door(b, "--deployment", dep, "--instance", "serve-1")
    try:
        admin = AdminClient({"bootstrap.servers": door.bootstrap, **QUIET})
        text = 'a > 500 and side == "B" or s == "CD"'
        # A source with filterable fields, then, in one request, a view of it, a view whose
        # filter does not parse, and a plain topic: each gets its own answer.
        assert _create(admin, NewTopic(src, 2, 3, config={"camus.schema": SCHEMA})) == {src: None}
        plain, bad = unique("plain"), unique("bad")
        out = _create(admin,
                      NewTopic(view, 2, 3, config={"camus.source": src, "camus.filter": text}),
                      NewTopic(bad, 2, 3, config={"camus.source": src, "camus.filter": "a >"}),
                      NewTopic(plain, 1, 3))
        assert out[view] is None and out[plain] is None
        err = out[bad].args[0]
        assert err.code() == KafkaError.INVALID_CONFIG and "1:4" in err.str(), err.str()
        assert _views(b, dep) == {view}
        topics = AdminClient({"bootstrap.servers": b, **QUIET}).list_topics(timeout=30).topics
        assert {src, view, plain} <= set(topics) and bad not in topics
        # Exists already: the embedded broker's answer.
        again = _create(admin, NewTopic(view, 2, 3, config={"camus.source": src,
                                                           "camus.filter": text}))[view]
        assert again.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

        # A second instance, `camus cluster materialise`, shares the work with camus serve's.
        materialisers(b, dep, "cli-1")
        rng = random.Random(11)
        produce(door.bootstrap, src, [doc(rng) for _ in range(3000)])  # through camus too
        wait_until(lambda: caught_up(b, group_id(dep, view), src), 180, "the view to catch up")
        source = read_all(b, src)
        straight = read_all(b, view)
        through = read_all(door.bootstrap, view)
        want = expected(SCHEMA, text, source)
        assert 0 < len(want) < len(source)
        check_view(source, straight, want)
        assert through == straight

        # A source of views cannot go while they are there, as on the embedded broker.
        with pytest.raises(KafkaException) as refused:
            admin.delete_topics([src], operation_timeout=60)[src].result(90)
        # (librdkafka shows DeleteTopics' code only, not the message naming the views.)
        assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
        # DeleteTopics of the view through camus: out of the catalog and the cluster; the
        # plain topic in the same request is the cluster's to delete.
        for name, future in admin.delete_topics([view, plain], operation_timeout=60).items():
            future.result(90)
        assert view not in _views(b, dep)
        wait_until(lambda: not {view, plain} & set(
            AdminClient({"bootstrap.servers": b, **QUIET}).list_topics(timeout=30).topics),
            60, "the view and the plain topic to leave the cluster")
        listed = camus("cluster", "view", "list", "--kafka", b, "--deployment", dep)
        assert listed.returncode == 0 and view not in listed.stdout
    finally:
        door.stop()
    assert "materialising the views of deployment" in door.stderr(), door.stderr()
