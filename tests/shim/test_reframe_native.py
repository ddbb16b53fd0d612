"""Native framing (shim.protocol._native.frame_records) against shim.reframe.packets, byte for byte,
and the data path's native receive side (tally_copies) against reassembly."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shim import reframe
from shim.protocol.records import Record, batch_records, decode_batches, encode_batch
from shim.schema import parse_schema
from shim.subscriptions import view_filter

from .inline import data_path, delivered

pytestmark = pytest.mark.skipif(reframe._native is None, reason="shim.protocol._native not built or stale: "
                                "tests/protocol/test_native.py fails")

U64 = st.integers(0, 2**64 - 1)
records = st.lists(st.builds(
    Record,
    offset=st.integers(0, 2**40),
    timestamp=st.integers(-2**63, 2**63 - 1),
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=3000),
    headers=st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=30)),
                     max_size=4).map(tuple),
    attributes=st.integers(0, 255),
), max_size=12)


def reference(topic, partition, recs, slots, shift, fragment, lanes=None, single=False):
    frames, owner = [], []
    for j, r in enumerate(recs):
        got = reframe.packets(topic, partition, r.offset + shift, slots[j] if slots else [0] * 8,
                              reframe.Record(r.timestamp, r.key, r.value, tuple(r.headers)),
                              fragment=fragment, lanes=lanes, single=single)
        frames += got
        owner += [j] * len(got)
    return (b"".join(frames), struct.pack(f"<{len(frames)}I", *map(len, frames)),
            struct.pack(f"<{len(owner)}I", *owner))


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_frames_are_the_references_bytes(recs, data):
    topic, partition = data.draw(st.integers(0, 2**32 - 1)), data.draw(st.integers(0, 2**32 - 1))
    shift = data.draw(st.integers(0, 2**20))
    slots = data.draw(st.none() | st.lists(st.lists(U64, min_size=8, max_size=8),
                                           min_size=len(recs), max_size=len(recs)))
    # fragment sizes around the bodies' lengths: bodies that end exactly on a boundary
    sizes = [len(reframe.encode_record(reframe.Record(r.timestamp, r.key, r.value, r.headers)))
             for r in recs] or [1]
    n = data.draw(st.sampled_from(sizes))
    fragment = data.draw(st.sampled_from([1, 7, 1400, n, max(1, n - 1), n + 1, max(1, n // 2),
                                          max(1, n // 3)]))
    # packets fed to a stateful view: average lanes, one packet per record
    lanes = tuple(data.draw(st.lists(st.integers(0, 7), max_size=2)))
    single = data.draw(st.booleans())
    got = reframe.frame_records(topic, partition, recs, slots, shift, fragment=fragment,
                                lanes=lanes, single=single)
    assert got == reference(topic, partition, recs, slots, shift, fragment, lanes, single)
    if slots is not None:  # the same slots packed, as Schema.extract_packed gives them
        packed = b"".join(struct.pack("<8Q", *s) for s in slots)
        assert reframe.frame_records(topic, partition, recs, packed, shift, fragment=fragment,
                                     lanes=lanes, single=single) == got


@pytest.mark.parametrize("size", [0, 1400 - 14, 1400 - 13, 2 * 1400 - 14, 1 << 20, 3 << 19])
def test_large_and_boundary_records(size):
    rec = Record(5, 1, None, bytes(range(256)) * (size // 256) + bytes(size % 256))
    got = reframe.frame_records(1, 2, [rec, rec], [list(range(8))] * 2, 3)
    assert got == reference(1, 2, [rec, rec], [list(range(8))] * 2, 3, reframe.DEFAULT_FRAGMENT)


@pytest.mark.parametrize("rec, slots", [
    (Record(-1, 0, None, b"x"), None),  # an offset the header's u64 cannot hold
    (Record(0, 2**63, None, b"x"), None),  # a timestamp beyond i64
    (Record(0, 0, None, b"x", (("\ud800", None),)), None),  # a name UTF-8 cannot encode
    (Record(0, 0, None, b"x"), [[-1] + [0] * 7]),  # a slot the header cannot hold
    (Record(0, 0, bytearray(b"k"), b"x"), None),  # not bytes: read as the reference reads it
    (Record(0, 0, None, b"x", [("h", b"v")]), None),
    (Record(0, 0, None, b"x", (["h", b"v"],)), None),
])
def test_what_the_reference_decides(rec, slots):
    assert reframe.frame_records(1, 0, [rec], slots) is None
    try:
        reference(1, 0, [rec], slots, 0, reframe.DEFAULT_FRAGMENT)
    except (ValueError, struct.error, UnicodeEncodeError):
        pass  # what the data path then raises, as before


@pytest.mark.parametrize("rec", [
    Record(4, 0, None, b"x", (("h", None),) * 65536),  # too many headers for the encoding
    Record(4, 0, b"k", bytes(reframe.MAX_RECORD)),  # an encoding past MAX_RECORD
    Record(4, 0, None, b"x" * (65535 * 1400)),  # more than 65535 fragments
])
def test_a_record_the_fragments_cannot_carry_is_one_frame_by_reference(rec):
    got = reframe.frame_records(1, 0, [rec], [list(range(8))])
    assert got == reference(1, 0, [rec], [list(range(8))], 0, reframe.DEFAULT_FRAGMENT)
    frames, lengths, owner = got
    assert len(frames) == reframe.ETH_IP_UDP + reframe.HEADER.size and owner == bytes(4)
    assert reframe.Reassembler().push(frames) == (1, 0, 4, None)
    assert (reframe._native.MAX_RECORD, reframe._native.BY_REFERENCE) == (
        reframe.MAX_RECORD, reframe.BY_REFERENCE)


@pytest.mark.parametrize("size", [(1 << 20) + (1 << 19) - 30, 2 << 20, 90 << 20])
def test_a_view_receives_a_large_record_either_way(size):
    value = json.dumps({"sel": 7, "pad": "x" * size}).encode()
    batches = [(0, 0, [Record(0, 1, None, b'{"sel": 7}'), Record(1, 1, b"k", value)])]
    native = run(True, batches, only_view=True)
    assert native == run(False, batches, only_view=True)
    [out] = native[0]
    [(port, got)] = out.items()
    assert [(o, r.key, r.value) for o, r in got] == [(0, None, b'{"sel": 7}'), (1, b"k", value)]


def run(native: bool, batches, only_view=False, all_json=False):
    """Every batch through a data path with a view and a member; what each observes.
    `all_json`: a schema of JSON fields only, whose slots the extension reads in one call."""
    with pytest.MonkeyPatch.context() as m:
        if not native:
            m.setattr(reframe, "_native", None)
        dp = data_path("native")
        schema = parse_schema("sel:u8=$.sel,h:u16=" + ("$.h" if all_json else "header:h"))
        view, member = dp.allocate_port(), dp.allocate_port()
        dp.subscribe(view, 1, None, view_filter(dp.spec, schema, "sel == 7"))
        dp.subscribe(member, 1, frozenset([0]), view_filter(dp.spec, schema, "h > 2"), log=False)
        outs = [delivered(dp.send, 1, p, schema, recs, shift=shift,
                          only=view if only_view else None)
                for p, shift, recs in batches]
        return outs, dp.stats, schema.misses, {p: (r.pending, r.malformed)
                                               for p, r in dp.reassemblers.items()}


json_records = st.lists(st.builds(
    lambda sel, pad, h, k, ts: Record(0, ts, k, json.dumps({"sel": sel, "pad": pad, "h": int(h)
                                                           if h and h.isdigit() else None}).encode(),
                                      (("h", h),) if h is not None else ()),
    st.sampled_from([7, 7, 3, 300, -1]), st.sampled_from(["", "x" * 1390, "y" * 5000]),
    st.none() | st.sampled_from([b"1", b"5", b"x"]), st.none() | st.binary(max_size=5),
    st.integers(0, 2**40)), max_size=20).map(
        lambda rs: [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(rs)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1000), json_records), max_size=4),
       st.booleans(), st.booleans())
def test_a_view_receives_the_same_records_either_way(batches, only_view, all_json):
    assert run(True, batches, only_view, all_json) == run(False, batches, only_view, all_json)


def test_a_record_under_way_is_left_to_reassembly():
    """A port holding part of a record from an earlier call reassembles, as before."""
    recs = [Record(0, 1, None, json.dumps({"sel": 7, "pad": "z" * 3000}).encode())]

    def with_pending(native):
        with pytest.MonkeyPatch.context() as m:
            if not native:
                m.setattr(reframe, "_native", None)
            dp = data_path("native")
            schema = parse_schema("sel:u8=$.sel")
            view = dp.allocate_port()
            dp.subscribe(view, 1, None, view_filter(dp.spec, schema, "sel == 7"))
            first = reframe.packets(1, 0, 0, [7] + [0] * 7,
                                    reframe.Record(1, None, recs[0].value), fragment=1400)[0]
            dp.sync()
            dp.reassemblers[view] = reframe.Reassembler()
            dp.reassemblers[view].push(first)
            return delivered(dp.send, 1, 0, schema, recs), dp.reassemblers[view].pending

    assert with_pending(True) == with_pending(False)


def run_batches(how: str, batches, schema_text):
    """Produced batches through a data path with a view and a member, as the broker sends
    them: `how` "body" (`send_batch`, framed from the records section), "records" (`send`
    of the built records, native) or "reference" (`send` without the extension)."""
    with pytest.MonkeyPatch.context() as m:
        if how == "reference":
            m.setattr(reframe, "_native", None)
        dp = data_path("native")
        schema = parse_schema(schema_text) if schema_text else None
        view, member = dp.allocate_port(), dp.allocate_port()
        filt = "sel == 7" if schema else "true"
        dp.subscribe(view, 1, None, view_filter(dp.spec, schema or parse_schema("sel:u8=$.sel"),
                                                 filt))
        dp.subscribe(member, 1, frozenset([0]), view_filter(
            dp.spec, schema or parse_schema("sel:u8=$.sel"), "sel > 2"), log=False)
        outs = []
        for p, shift, recs, codec in batches:
            [b] = decode_batches(encode_batch(recs, compression=codec), records=False)
            if how == "body":
                outs.append(delivered(dp.send_batch, 1, p, schema, b, shift=shift))
            else:
                outs.append(delivered(dp.send, 1, p, schema, batch_records(b), shift=shift))
        return outs, dp.stats, schema and schema.misses


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1000),
                          json_records.filter(bool), st.sampled_from([0, 1])), max_size=4),
       st.sampled_from([None, "sel:u8=$.sel", "sel:u8=$.sel,h:u16=$.h",
                        "sel:u8=$.sel,h:u16=header:h"]))
def test_a_batch_framed_from_its_body_is_sent_as_its_records(batches, schema_text):
    body = run_batches("body", batches, schema_text)
    assert body == run_batches("records", batches, schema_text)
    assert body == run_batches("reference", batches, schema_text)


def test_a_batch_the_extension_cannot_frame_takes_the_records_path():
    """A JSON value only json.loads can read (a BOM), and a timestamp past i64 after the
    batch's base: frame_body declines, and send_batch still answers as send does."""
    recs = [Record(0, 1, None, b"\xef\xbb\xbf" + json.dumps({"sel": 7}).encode()),
            Record(1, 1, None, json.dumps({"sel": 7}).encode())]
    [b] = decode_batches(encode_batch(recs), records=False)
    schema = parse_schema("sel:u8=$.sel")
    assert reframe.frame_body(1, 0, b, schema.packed_paths()) is None
    assert reframe.frame_body(1, 0, b, None) is not None
    assert reframe.frame_body(1, 0, b, None, shift=-1) is None  # offset -1: the u64 field
    batches = [(0, 0, recs, 0)]
    assert run_batches("body", batches, "sel:u8=$.sel") == run_batches(
        "reference", batches, "sel:u8=$.sel")
