"""The cluster connection's settings as camus's own Kafka clients (the materialiser's and the
catalog's) get them: one parser for `camus serve --kafka` and `camus cluster` (its mistakes
are tested in tests/front_door/test_settings.py), then librdkafka's configuration."""

from __future__ import annotations

import argparse

import pytest

from shim.cluster.connection import SettingsError
from shim.cluster.options import add_connection_options, settings_from_args
from tests.broker.security_helpers import make_pki


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_connection_options(p, required=True)
    return p.parse_args(list(argv))


def test_a_properties_file_and_options_become_a_librdkafka_configuration(tmp_path):
    make_pki(tmp_path)  # the CA is checked at startup: it must be a real certificate
    ca = tmp_path / "ca.pem"
    props = tmp_path / "client.properties"
    props.write_text("# the cluster's TLS and SASL\nsecurity.protocol=SASL_SSL\n"
                     f"ssl.ca.location = {ca}\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.username=u\nsasl.password=p\n")
    settings = settings_from_args(_args("--kafka", "k1:9093,[::1]:9094", "--kafka-config",
                                        str(props), "--kafka-option", "sasl.username=v"))
    assert settings.client_config(**{"group.id": "g"}) == {
        "bootstrap.servers": "k1:9093,[::1]:9094", "security.protocol": "SASL_SSL",
        "client.id": "camus", "socket.connection.setup.timeout.ms": 10000,
        "metadata.max.age.ms": 300000, "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "v", "sasl.password": "p",
        "ssl.endpoint.identification.algorithm": "https", "ssl.ca.location": str(ca),
        "group.id": "g"}
    # request.timeout.ms is a producer property to librdkafka: only a producer gets it.
    assert settings.client_config(True)["request.timeout.ms"] == 30000


def test_the_same_mistakes_are_refused_for_camus_cluster(tmp_path):
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SSL\n  linger.ms=5\n")
    with pytest.raises(SettingsError, match=r"bad.properties:2:3: unknown connection setting 'linger.ms'"):
        settings_from_args(_args("--kafka", "k1:9093", "--kafka-config", str(bad)))
    with pytest.raises(SettingsError, match="not HOST:PORT"):
        settings_from_args(_args("--kafka", "k1:9093,b"))
