"""One CreateTopics can neither break the broker nor its restart (issue 13, item 3).

A view filter too large to compile is refused where it is created (INVALID_CONFIG), not at
every later produce; a legal topic name of 249 characters gets partition directories a file
system accepts; a catalog entry that no longer loads is reported and skipped at start-up,
and kept in topics.json. confluent-kafka against `camus serve`.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .conftest import unique  # noqa: E402
from .test_confluent_kafka import consume, create  # noqa: E402
from .test_groups_and_restart import produce  # noqa: E402

# 32 and-ed pairs of alternatives: 2**32 alternatives in disjunctive normal form, and as a
# formula more than 5,000 residuals (which of the clauses on a..d are still open after a..d
# are read), so the compiler refuses it too (compiler.formula.check).
HUGE = " and ".join(f"({'abcd'[i % 4]} > {i // 4 * 10 + 1} or e != {i})" for i in range(32))


def test_a_filter_too_large_to_compile_is_refused_at_create_topics(camus_server, tmp_path):
    s = camus_server(tmp_path / "d")
    src = unique("src")
    create(s.bootstrap, NewTopic(src, 1, 1, config={
        "camus.schema": "a:u32=$.a,b:u32=$.b,c:u32=$.c,d:u32=$.d,e:u32=$.e"}))
    admin = AdminClient({"bootstrap.servers": s.bootstrap})
    bad = admin.create_topics([NewTopic(unique("huge"), 1, 1, config={
        "camus.source": src, "camus.filter": HUGE})])
    with pytest.raises(KafkaException) as err:
        next(iter(bad.values())).result(10)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "too wide to compile" in err.value.args[0].str()
    # Nothing else noticed: produce and consume on the source, and a restart.
    produce(s.bootstrap, src, [json.dumps({"a": i, "b": i}).encode() for i in range(10)])
    assert len(consume(s.bootstrap, src, 10)) == 10
    s.stop()
    s2 = camus_server(tmp_path / "d")
    assert len(consume(s2.bootstrap, src, 10)) == 10


def test_longest_legal_topic_names_survive_a_restart(camus_server, tmp_path):
    s = camus_server(tmp_path / "d")
    names = ["a" * 249, "a" * 248 + "b", "x" * 223]
    create(s.bootstrap, *(NewTopic(n, 2, 1) for n in names))
    for n in names:
        produce(s.bootstrap, n, [n[-1].encode() * 3] * 4)
    s.stop()
    s2 = camus_server(tmp_path / "d")
    for n in names:
        got = consume(s2.bootstrap, n, 4)
        assert [m.value() for m in got] == [n[-1].encode() * 3] * 4


def test_a_catalog_entry_that_no_longer_loads_is_skipped_and_kept(camus_server, tmp_path):
    s = camus_server(tmp_path / "d")
    good, view = unique("good"), unique("view")
    create(s.bootstrap, NewTopic(good, 1, 1, config={"camus.schema": "n:u32=$.n"}))
    create(s.bootstrap, NewTopic(view, 1, 1, config={"camus.source": good,
                                                    "camus.filter": "n > 3"}))
    produce(s.bootstrap, good, [json.dumps({"n": i}).encode() for i in range(8)])
    s.stop()
    catalog = tmp_path / "d" / "topics.json"
    doc = json.loads(catalog.read_text())
    broken = next(t for t in doc["topics"] if t["name"] == view)
    broken["configs"]["camus.filter"] = "no_such_field > 3"  # as an older or edited catalog
    catalog.write_text(json.dumps(doc))

    s2 = camus_server(tmp_path / "d")
    assert len(consume(s2.bootstrap, good, 8)) == 8  # the rest of the broker serves
    assert f"skipping topic {view!r}" in s2.stderr() and "no_such_field" in s2.stderr()
    admin = AdminClient({"bootstrap.servers": s2.bootstrap})
    assert view not in admin.list_topics(timeout=10).topics
    create(s2.bootstrap, NewTopic(unique("more"), 1, 1))  # the catalog is written again...
    s2.stop()
    names = [t["name"] for t in json.loads(catalog.read_text())["topics"]]
    assert view in names  # ...and still holds the entry it could not load
