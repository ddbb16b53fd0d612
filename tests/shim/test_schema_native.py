"""JSON fields read by shim.protocol._native.JsonPaths against json.loads (the reference): the same
slot values and the same miss counts on random JSON (duplicate keys, escapes, every
number form, NaN/Infinity, deep nesting), on mutated JSON and on non-JSON bytes."""

from __future__ import annotations

import json
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shim.schema as schema_mod
from shim.protocol.native import native
from shim.schema import parse_schema

pytestmark = pytest.mark.skipif(native is None, reason="shim.protocol._native not built or stale: "
                                "tests/protocol/test_native.py fails")

KEYS = ["a", "b", "c", "n", "l", "é", "a\x00", "😀", "\ud800", "x y", ""]
PATHS = ["$.a", "$.b.c", "$.n", "$.l[0]", "$.l[1]", '$["é"]', "$.a.a", "$.a.b.c",
         '$["a\x00"]', '$["😀"]', '$[""]', '$["x y"]', "$.l[0].n", "$[0]", "$[1][0]"]
TYPES = ["u8", "u16", "u32", "u64", "str1", "str3", "str8"]

NUMBERS = st.one_of(
    st.integers(-300, 300), st.integers(0, 1 << 70), st.integers(-(1 << 70), 1 << 70),
    st.sampled_from([0, -0, 255, 256, 65535, 65536, (1 << 32) - 1, 1 << 32, (1 << 64) - 1,
                     1 << 64, 10 ** 40]),
    st.floats(allow_nan=True, allow_infinity=True))
TEXT = st.one_of(st.text(max_size=10), st.sampled_from(["", "A", "abc", "abcdefgh", "abcdefghi",
                                                        "é", "\x00", "\ud800", "\udc00x"]))
LEAF = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
# Objects as lists of pairs, so keys may repeat (json.loads keeps the last).
VALUE = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=5).map(lambda p: ("obj", p))),
    max_leaves=20)
WS = st.sampled_from(["", "", " ", "\n", "\t ", "\r\n  "])


def _escape(text: str, mode: int) -> str:
    """A JSON string literal; mode 0 raw UTF-8, 1 \\u escapes for non-ASCII, 2 for all."""
    out = []
    for ch in text:
        if ch in '"\\' or ord(ch) < 0x20:
            out.append(json.dumps(ch)[1:-1])
        elif mode == 2 or (mode == 1 and ord(ch) > 0x7F):
            cp = ord(ch)
            if cp > 0xFFFF:
                cp -= 0x10000
                out.append(f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04X}")
            else:
                out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _ser(v, draw) -> str:
    w = draw(WS)
    if isinstance(v, tuple) and v and v[0] == "obj":
        items = [f"{w}{_escape(k, draw(st.integers(0, 2)))}{draw(WS)}:{draw(WS)}{_ser(x, draw)}"
                 for k, x in v[1]]
        return "{" + ",".join(items) + w + "}"
    if isinstance(v, list):
        return "[" + ",".join(w + _ser(x, draw) for x in v) + w + "]"
    if isinstance(v, str):
        return _escape(v, draw(st.integers(0, 2)))
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v) or draw(st.booleans()):
            return json.dumps(v)
        return draw(st.sampled_from(["{:e}", "{:E}", "{!r}", "{:.3f}"])).format(v)
    return json.dumps(v)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _schemas(paths: list[str], types: list[str]):
    text = ",".join(f"f{i}:{t}={p}" for i, (p, t) in enumerate(zip(paths, types)))
    fast = parse_schema(text)
    saved = schema_mod._native
    schema_mod._native = None
    try:
        ref = parse_schema(text)
    finally:
        schema_mod._native = saved
    assert fast._json_paths is not None and ref._json_paths is None
    return fast, ref


def _same(value: bytes | None, paths: list[str], types: list[str]) -> None:
    fast, ref = _schemas(paths, types)
    assert fast.extract(None, value, []) == ref.extract(None, value, [])
    assert fast.misses == ref.misses
    _same_packed([value, b'{"a":1,"n":300}', None, value], paths, types)


def _same_packed(values: list, paths: list[str], types: list[str]) -> None:
    """`extract_packed` (when it answers) against `extract` record by record, json.loads
    doing the reading: the same slots, and the same misses in the same order."""
    fast, ref = _schemas(paths, types)
    packed = fast.extract_packed(values)
    want = [ref.extract(None, v, []) for v in values]
    if packed is None:  # json.loads must decide: nothing counted
        assert fast.misses == {}
        return
    assert [list(s) for s in struct.iter_unpack("<8Q", packed)] == want
    assert list(fast.misses.items()) == list(ref.misses.items())


FIELDS = st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from(TYPES)), min_size=1,
                  max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([None, b'{"a":"xyz","n":7}', b'{"n":999999}', b'{"a":7}',
                                 b'{"l":[1,"ab"]}', b"[", rb'{"a":"\u00e9"}']), max_size=8),
       FIELDS)
def test_packed_batches_count_misses_in_order(values, fields):
    paths, types = zip(*fields)
    _same_packed(values, list(paths), list(types))


def test_packed_needs_bytes_and_all_json_fields():
    fast, _ = _schemas(["$.a"], ["u8"])
    assert fast.extract_packed([bytearray(b'{"a":1}')]) is None
    assert fast.extract_packed([b'{"a":1}', b"\xef\xbb\xbf{}"]) is None  # a BOM: json.loads decides
    assert parse_schema("a:u8=$.a,h:u8=header:h").extract_packed([b'{"a":1}']) is None


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUE, FIELDS, st.data())
def test_random_json_reads_the_same(doc, fields, data):
    text = data.draw(WS) + _ser(doc, data.draw) + data.draw(WS)
    paths, types = zip(*fields)
    _same(_encode(text), list(paths), list(types))


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUE, FIELDS, st.data())
def test_mutated_json_reads_the_same(doc, fields, data):
    buf = bytearray(_encode(_ser(doc, data.draw)))
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if kind == "cut":
            del buf[data.draw(st.integers(0, len(buf))):]
        elif not buf or kind == "insert":
            buf.insert(data.draw(st.integers(0, len(buf))),
                       data.draw(st.sampled_from(b'{}[],:"\\0123456789.eE+-ntfuNI \x00\x1f\x80\xff')))
        else:
            i = data.draw(st.integers(0, len(buf) - 1))
            if kind == "flip":
                buf[i] ^= 1 << data.draw(st.integers(0, 7))
            elif kind == "set":
                buf[i] = data.draw(st.integers(0, 255))
            else:
                del buf[i]
    paths, types = zip(*fields)
    _same(bytes(buf), list(paths), list(types))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), FIELDS)
def test_random_bytes_read_the_same(value, fields):
    paths, types = zip(*fields)
    _same(value, list(paths), list(types))


DOCS = [
    b'{"a":1,"a":2}', b'{"a":{"a":3},"a":{"b":1}}', b'{"a":{"a":3},"a":5}', b'{"a":[1],"a":{"a":4}}',
    b'{"n":-0}', b'{"n":0}', b'{"n":-1}', b'{"n":1.0}', b'{"n":1e2}', b'{"n":1E+2}', b'{"n":1e}',
    b'{"n":1.}', b'{"n":.5}', b'{"n":01}', b'{"n":+1}', b'{"n":-}', b'{"n":NaN}', b'{"n":-Infinity}',
    b'{"n":Infinity}', b'{"n":-Inf}', b'{"n":nan}', b'{"n":true}', b'{"n":null}', b'{"n":"7"}',
    b'{"n":18446744073709551615}', b'{"n":18446744073709551616}', b'{"n":255}', b'{"n":256}',
    b'{"n":' + b"9" * 4300 + b"}", b'{"n":' + b"9" * 4301 + b"}", b'{"n":1,"x":' + b"1" * 5000 + b"}",
    b'{"a":"abc"}', b'{"a":"\\u0041\\u0062"}', b'{"a":"\\u00e9"}', b'{"a":"\\ud83d\\ude00"}',
    b'{"a":"\\ud800"}', b'{"a":"\\ud800\\u0041"}', b'{"a":"\\ud800\\uzzzz"}', b'{"a":"\\x"}',
    b'{"a":"\\/\\b\\f\\n\\r\\t\\"\\\\"}', b'{"a":"a\tb"}', b'{"a":"\x7f"}', b'{"\\u00e9":1}',
    b'{"\\u00E9":1}', b'{"\xc3\xa9":2}', b'{"a\\u0000":3}', b'{"\\ud83d\\ude00":4}',
    b'{"\xf0\x9f\x98\x80":5}', b'{"\\ud800":6}', b'{"\xed\xa0\x80":6}', b'\xef\xbb\xbf{"n":1}',
    '{"n":1}'.encode("utf-16"), '{"n":1}'.encode("utf-16-le"), '{"n":1}'.encode("utf-32"),
    b'{"n":1}\x00', b'\x00', b'', b' ', b'{"n":1}x', b'{"n":1} ', b' {"n":1}\n', b'{"n":1,}',
    b'[1,]', b'{"l":[5,6]}', b'{"l":[[5],6]}', b'[1,[2]]', b'["a"]', b'{,}', b'{"a" 1}',
    b'{"a":1 "b":2}', b'{a:1}', b"{'a':1}", b'{"a":1}}', b'[' * 70 + b']' * 70,
    b'{"a":' * 70 + b'1' + b'}' * 70, b'[' * 3000 + b']' * 3000, b'\xff', b'{"a":"\xff"}',
    b'{"n":1e999}', b'{"n":-0.0}', b'{"n":0e0}', b'{"n":00}', b'{"n":-01}', b'{"n":1.5e-3}',
]


@pytest.mark.parametrize("value", DOCS, ids=range(len(DOCS)))
def test_hand_picked_values(value):
    for fields in (["$.a", "$.n", "$.a.a", "$.l[1]", "$.l[0][0]"], ['$["é"]', '$["a\x00"]',
                   '$["😀"]', "$[1][0]", "$[0]", "$.a.b"]):
        for types in (["u64"] * len(fields), ["str8"] * len(fields), ["u8", "str1"] * 3):
            _same(value, fields, types[:len(fields)])


def test_json_nested_past_the_stack_is_a_miss_not_an_exception():
    fast, ref = _schemas(["$.a"], ["u8"])
    for s in (fast, ref):  # json.loads raised RecursionError out of the produce handler
        assert s.extract(None, b"[" * 5000 + b"]" * 5000, []) == [0] * 8
        assert s.misses == {"f0": 1}


def test_a_null_value_misses_like_the_reference():
    _same(None, ["$.a", "$.n"], ["u8", "str2"])


def test_steps_the_extension_cannot_hold_use_json_loads():
    big = parse_schema("f:u8=$[" + "9" * 30 + "]")
    assert big._json_paths is None
    assert big.extract(None, b"[1]", []) == [0] * 8


def test_values_other_than_bytes_use_json_loads():
    fast, ref = _schemas(["$.a"], ["u8"])
    for value in (bytearray(b'{"a":1}'), memoryview(b'{"a":2}').tobytes(), '{"a":3}'):
        assert fast.extract(None, value, []) == ref.extract(None, value, [])
