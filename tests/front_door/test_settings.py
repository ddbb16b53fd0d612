"""The cluster connection's settings as a Kafka client takes them: --kafka, --kafka-config
FILE (Java properties) and --kafka-option KEY=VALUE, each mistake named where it is."""

from __future__ import annotations

import pytest

from shim.cluster.connection import SettingsError, parse_bootstrap, read_properties, settings_from


def test_bootstrap_servers():
    assert parse_bootstrap("a:1,[::1]:9093, b.example:9094") == [("a", 1), ("::1", 9093),
                                                                ("b.example", 9094)]
    for bad in ("a", "a:", ":9092", "a:99999", "a:1,,b:2", "a:x"):
        with pytest.raises(SettingsError, match="not HOST:PORT"):
            parse_bootstrap(bad)


def test_a_client_properties_file(tmp_path):
    conf = tmp_path / "client.properties"
    conf.write_text(
        "# the cluster\n"
        "bootstrap.servers=k1:9092,k2:9092\n"
        "security.protocol = SASL_PLAINTEXT\n"
        "sasl.mechanism: SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        "    username=\"camus\" password=\"s3cr\\\"et\";\n"
        "! a comment too\n"
        "request.timeout.ms=5000\n")
    s = settings_from("k1:9092,k2:9092", [conf])
    assert (s.security_protocol, s.sasl_mechanism, s.sasl_username, s.sasl_password,
            s.request_timeout_ms) == ("SASL_PLAINTEXT", "SCRAM-SHA-512", "camus", 's3cr"et', 5000)
    assert "s3cr" not in s.describe()  # the password stays out of log lines
    # Options come after the files and win.
    s = settings_from("k1:9092,k2:9092", [conf], ["sasl.username=other", "sasl.password=pw"])
    assert (s.sasl_username, s.sasl_password) == ("other", "pw")


@pytest.mark.parametrize("text, message", [
    ("acks=all\n", r"client.properties:1:1: unknown connection setting 'acks' \(camus forwards each client's own"),
    ("\n  sasl.mechanism=GSSAPI\n", r":2:3: sasl.mechanism='GSSAPI': camus authenticates with PLAIN"),
    ("security.protocol=SASL\n", r":1:1: security.protocol='SASL': expected one of PLAINTEXT"),
    ("ssl.truststore.type=JKS\n", r":1:1: .*PEM files only"),
    ("bootstrap.servers=other:1\n", r":1:1: bootstrap.servers=other:1 disagrees with --kafka"),
    ("request.timeout.ms=soon\n", r":1:1: request.timeout.ms='soon': expected a positive number"),
    ("sasl.jaas.config=x required;\n", r":1:1: sasl.jaas.config: expected a login module"),
    ("justakey\n", r":1:1: expected key=value"),
])
def test_mistakes_name_their_file_line_and_column(tmp_path, text, message):
    conf = tmp_path / "client.properties"
    conf.write_text(text)
    with pytest.raises(SettingsError, match=message):
        settings_from("k1:9092", [conf])


@pytest.mark.parametrize("options, message", [
    (["security.protocol=SASL_SSL"], "needs sasl.username and sasl.password"),
    (["sasl.username=u", "sasl.password=p"], "does not authenticate with SASL"),
    (["ssl.ca.location=/nonexistent/ca.pem"], "does not use TLS"),
    (["security.protocol=SSL", "ssl.ca.location=/nonexistent/ca.pem"], "/nonexistent/ca.pem: no such file"),
    (["nokey"], "expected KEY=VALUE"),
])
def test_settings_that_cannot_work_together(options, message):
    with pytest.raises(SettingsError, match=message):
        settings_from("k1:9092", None, options)


def test_unreadable_tls_files_fail_at_startup(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate")
    with pytest.raises(SettingsError, match="TLS files: .*PEM"):
        settings_from("k1:9092", None, ["security.protocol=SSL", f"ssl.ca.location={ca}"])


def test_a_missing_file(tmp_path):
    with pytest.raises(SettingsError, match="--kafka-config .*missing.properties: No such file"):
        read_properties(tmp_path / "missing.properties")
