"""KIP-447's fencing, step by step: a worker that read a batch, then lost its partitions
to another instance while it held the batch, cannot commit it.

The worker is driven in this process one step at a time (`ViewWorker.read`,
`through_switch`, `write`), so the batch is held exactly across the rebalance, which a
real process hits only by chance; the instance that takes over is a real separate
`camus cluster materialise`.
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402

from controller.targets import open_target  # noqa: E402
from shim.cluster.catalog import Catalog, group_id  # noqa: E402
from shim.cluster.connection import settings_from  # noqa: E402
from shim.cluster.materialise import Materialiser, Settings, ViewWorker  # noqa: E402
from shim.datapath import DataPath  # noqa: E402

from .conftest import source_with_views, unique, wait_until  # noqa: E402
from .kafka_io import caught_up, read_all  # noqa: E402
from .test_materialise import check_view, expected  # noqa: E402

pytestmark = pytest.mark.java

SCHEMA = "price:u32=$.price"


def test_a_worker_that_lost_its_partitions_cannot_commit_them(cluster, materialisers):
    b = cluster.bootstrap
    dep, src, view = unique("dep"), unique("fsrc"), unique("fview")
    text = "price >= 50"
    source_with_views(b, dep, src, 2, SCHEMA, {view: text})
    p = Producer({"bootstrap.servers": b, "acks": "all", "enable.idempotence": True})
    for i in range(200):
        p.produce(src, json.dumps({"price": i % 100}).encode(), partition=i % 2)
    assert p.flush(60) == 0

    conn = settings_from(b)
    # Out of the group 3 s after its last poll (Kafka's max.poll.interval.ms).
    settings = Settings(deployment=dep, instance="zombie", session_timeout_ms=3000,
                        max_poll_interval_ms=3000)
    catalog = Catalog(conn, dep)
    definition = catalog.read().views[view]
    catalog.close()
    other = {}

    async def scenario() -> tuple[bool, int]:
        mat = Materialiser(conn, settings)
        mat.datapath = DataPath(open_target("embedded:native"))
        mat.datapath.compile_in_background()
        worker = ViewWorker(mat, definition)
        try:
            assert await worker.start()
            batch = {}
            for _ in range(200):
                batch = await worker.read()
                if batch:
                    break
            assert batch, "the worker read nothing"
            delivered = await worker.through_switch(batch)
            assert delivered
            # While the worker holds its batch without polling, another instance joins; the
            # group waits for the worker at most its poll interval, then goes on without it.
            other["y"] = await asyncio.to_thread(materialisers, b, dep, "y")
            await asyncio.to_thread(
                wait_until, lambda: f"view {view}: instance y assigned source partitions [0, 1]"
                in other["y"].stderr(), 60, "y to take every partition")
            ok = await worker.write(batch, delivered)
            return ok, worker.counters.aborted
        finally:
            await worker.close()
            mat.datapath.close()

    ok, aborted = asyncio.run(scenario())
    assert not ok and aborted == 1, "a worker out of the group committed its batch"
    wait_until(lambda: caught_up(b, group_id(dep, view), src), 60, "y to materialise the view")
    source = read_all(b, src)
    check_view(source, read_all(b, view), expected(SCHEMA, text, source))
