"""Fixtures shared across test directories.

`kafka_cluster`: one real three-node Apache Kafka cluster (tests/cluster/kafka_cluster.py)
per session, for tests/cluster (the materialiser) and tests/front_door (the front door over
three brokers) alike: it is here, above both, so that a run of both starts three JVMs once,
not twice. It skips with the reason where it cannot run (no java, no Kafka jars)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory):
    from tests.cluster.kafka_cluster import KafkaCluster, missing

    why = missing()
    if why:
        pytest.skip(why)
    pytest.importorskip("confluent_kafka")
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"))
    try:
        cluster.start()
    except BaseException:
        cluster.close()
        raise
    yield cluster
    cluster.close()


@pytest.fixture
def cluster(kafka_cluster):
    """The session's cluster with every node running (an earlier test may have killed one)."""
    for node_id in [n.node_id for n in kafka_cluster.nodes if not n.alive()]:
        kafka_cluster.restart(node_id)
    return kafka_cluster
