"""entries.json text: the chunked writer (`pipeline.entries.write`) gives byte for byte what one
json.dumps per object gives, whatever the objects hold (strings with `}, {` in them, lists of
dicts, objects that are not dicts, chunks of every size)."""

from __future__ import annotations

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import entries

# JSON values weighted towards what breaks a `}, {` split: braces and commas in strings,
# dicts inside lists, empty dicts.
_text = st.text(alphabet="{}, ab\"\\\n", max_size=8)
_values = st.recursive(st.one_of(st.integers(), _text, st.booleans(), st.none()),
                       lambda inner: st.one_of(st.lists(inner, max_size=3),
                                               st.dictionaries(_text, inner, max_size=3)),
                       max_leaves=8)
_objects = st.lists(st.one_of(st.dictionaries(_text, _values, max_size=4), _values), max_size=12)


def one_per_object(doc: dict) -> str:
    """The writer as it was: one json.dumps per entry and group."""
    return ('{"camus_entries": %d,\n "table_entries": [\n' % doc["camus_entries"]
            + ",\n".join("  " + json.dumps(e) for e in doc["table_entries"])
            + '\n ],\n "multicast_groups": [\n'
            + ",\n".join("  " + json.dumps(g) for g in doc["multicast_groups"])
            + "\n ]}\n")


def written(doc: dict) -> str:
    out = io.StringIO()
    entries.write(doc, out)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(_objects, _objects, st.sampled_from([1, 2, 3, 4096]))
def test_chunked_writer_equals_one_dumps_per_object(table_entries, groups, chunk):
    doc = {"camus_entries": 2, "table_entries": table_entries, "multicast_groups": groups}
    was, entries._CHUNK = entries._CHUNK, chunk
    try:
        assert written(doc) == one_per_object(doc)
    finally:
        entries._CHUNK = was


def test_compiler_shaped_entries_across_chunks():
    rows = [{"table": "t", "match": {"state": {"exact": 0}, "f": {"exact": v}},
             "action": "fwd", "params": {"port": v % 7 + 1}} for v in range(10_000)]
    doc = {"camus_entries": 2, "table_entries": rows,
           "multicast_groups": [{"id": 5, "replicas": [{"port": 1, "rid": 0}]}]}
    text = written(doc)
    assert text == one_per_object(doc)
    assert json.loads(text) == doc
