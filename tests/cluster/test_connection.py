"""The cluster connection's settings, checked before anything connects (no cluster needed)."""

from __future__ import annotations

import pytest

from shim.cluster.connection import ConnectionSettingsError, connection, parse_bootstrap


def test_bootstrap_lists_are_checked_with_the_column_of_the_bad_entry():
    assert parse_bootstrap("a:9092,10.0.0.1:19092") == "a:9092,10.0.0.1:19092"
    with pytest.raises(ConnectionSettingsError, match="column 8: expected HOST:PORT, got 'b'"):
        parse_bootstrap("a:9092,b")
    with pytest.raises(ConnectionSettingsError, match="column 1"):
        parse_bootstrap("a:99999")


def test_options_and_properties_file(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# the cluster's TLS\nsecurity.protocol=SSL\n\nssl.ca.location = /ca.pem\n"
                     "! old comment style\nsasl.username=u\n")
    conn = connection("k1:9093", ["sasl.username=v", "linger.ms=5"], props)
    assert conn.client(**{"group.id": "g"}) == {
        "bootstrap.servers": "k1:9093", "security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
        "sasl.username": "v", "linger.ms": "5", "group.id": "g"}
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SSL\nnot a setting\n")
    with pytest.raises(ConnectionSettingsError, match=r"bad.properties:2: expected KEY=VALUE"):
        connection("k1:9093", [], bad)
    with pytest.raises(ConnectionSettingsError, match="expected KEY=VALUE"):
        connection("k1:9093", ["=x"])
