"""camus.schema: parsing, extraction, zero values and miss counts."""

from __future__ import annotations

import json

import pytest

from shim.schema import SchemaError, parse_schema


def test_issue_example():
    s = parse_schema("stock:str8=$.stock,price:u32=$.price,side:str1=header:side")
    assert [(f.name, f.type, f.source, f.slot) for f in s.fields] == [
        ("stock", "str8", "json", 0), ("price", "u32", "json", 1), ("side", "str1", "header", 2)]
    value = json.dumps({"stock": "GOOGL", "price": 1234}).encode()
    slots = s.extract(None, value, [("side", b"B")])
    assert slots[:3] == [int.from_bytes(b"GOOGL   ", "big"), 1234, ord("B")]
    assert slots[3:] == [0] * 5
    assert s.misses == {}


def test_every_source_kind():
    s = parse_schema('a:u16=$.x.y[1],b:str4=key,c:u64=bytes:2:8,d:str2=bytes:0:2,'
                     'e:u8=header:n,f:u32=$["odd key"]')
    value = b"OK" + (2**40 + 7).to_bytes(8, "big")
    slots = s.extract(b"KEY", value, [("n", b"200")])
    assert slots[1:5] == [int.from_bytes(b"KEY ", "big"), 2**40 + 7,
                          int.from_bytes(b"OK", "big"), 200]
    doc = json.dumps({"x": {"y": [1, 65535]}, "odd key": 9}).encode()
    assert parse_schema('a:u16=$.x.y[1]').extract(None, doc, [])[0] == 65535
    assert parse_schema('f:u32=$["odd key"]').extract(None, doc, [])[0] == 9


@pytest.mark.parametrize("value,expected_miss", [
    (b'{"price": 4294967296}', True),   # does not fit u32
    (b'{"price": -1}', True),
    (b'{"price": "12"}', True),          # a string is not an integer
    (b'{"price": true}', True),
    (b'{"other": 1}', True),             # missing
    (b'not json', True),
    (None, True),                        # tombstone
    (b'{"price": 4294967295}', False),
])
def test_missing_or_unfit_values_get_zero_and_are_counted(value, expected_miss):
    s = parse_schema("price:u32=$.price,stock:str4=$.stock")
    slots = s.extract(None, value, [])
    assert s.misses.get("stock") == 1  # never given: spaces, counted
    assert slots[1] == int.from_bytes(b"    ", "big")
    if expected_miss:
        assert slots[0] == 0 and s.misses["price"] == 1
    else:
        assert slots[0] == 4294967295 and "price" not in s.misses


def test_strings_too_long_or_not_ascii_are_misses():
    s = parse_schema("s:str3=$.s")
    assert s.extract(None, b'{"s": "ABCD"}', [])[0] == int.from_bytes(b"   ", "big")
    assert s.extract(None, '{"s": "\u00e9"}'.encode(), [])[0] == int.from_bytes(b"   ", "big")
    assert s.misses["s"] == 2


@pytest.mark.parametrize("text,col,words", [
    ("", 1, "empty field"),
    ("price:u32=$.price,,", 19, "empty field"),
    ("price:i32=$.price", 1, "expected name:type=source"),
    ("price:str9=$.price", 1, "expected name:type=source"),
    ("a:u8=key,a:u8=key", 10, "declared twice"),
    ("a:u8=$", 6, "at least one step"),
    ("a:u8=$.x..y", 9, "bad JSON path"),
    ("a:u8=somewhere", 6, "bad source"),
    ("a:u16=bytes:0:3", 7, "does not fit"),
    (",".join(f"f{i}:u8=key" for i in range(9)), 81, "at most 8"),
])
def test_schema_errors_point_into_the_config_value(text, col, words):
    with pytest.raises(SchemaError) as info:
        parse_schema(text)
    assert info.value.column == col, str(info.value)
    assert words in info.value.message
