"""Helpers for the security tests: a throwaway CA with server and client certificates (made
with `cryptography`), users added with `camus user add`, and `camus serve` with several
listeners, whose ports are read from the lines it prints."""

from __future__ import annotations

import datetime
import ipaddress
import re
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.broker.conftest import REPO

NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(cn: str, org: str = "camus-test") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, key, cert) -> None:
    path.with_suffix(".key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def make_pki(d: Path) -> dict[str, Path]:
    """ca.pem, server.{pem,key} (for 127.0.0.1) and alice.{pem,key} (client), in `d`."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("camus test CA")).issuer_name(_name("camus test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(NOW - datetime.timedelta(days=1)).not_valid_after(NOW + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    _write(d / "ca", ca_key, ca)
    for who, san in (("server", True), ("alice", False), ("mallory", False)):
        key = ec.generate_private_key(ec.SECP256R1())
        issuer = _name("rogue CA") if who == "mallory" else ca.subject
        b = (x509.CertificateBuilder().subject_name(_name(who)).issuer_name(issuer)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(NOW - datetime.timedelta(days=1)).not_valid_after(NOW + datetime.timedelta(days=2)))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        if who == "mallory":  # signed by a CA the broker does not trust
            other = ec.generate_private_key(ec.SECP256R1())
            cert = b.sign(other, hashes.SHA256())
        else:
            cert = b.sign(ca_key, hashes.SHA256())
        _write(d / who, key, cert)
    return {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key"}


def add_user(data_dir: Path, name: str, password: str, *mechanisms: str,
             iterations: int | None = None) -> None:
    args = [sys.executable, "-m", "camus.cli", "user", "add", name, "--data-dir", str(data_dir)]
    for m in mechanisms:
        args += ["--mechanism", m]
    if iterations is not None:
        args += ["--iterations", str(iterations)]
    out = subprocess.run(args, input=password + "\n", capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr


def listener_ports(server, count: int) -> dict[str, int]:
    """Protocol -> port of the listeners after the first (the first is conftest's PLAINTEXT)."""
    ports = {"PLAINTEXT": server.port}
    for _ in range(count):
        line = server.proc.stdout.readline()
        m = re.search(r"listening on (\w+)://[\d.]+:(\d+)", line)
        assert m, line
        ports[m.group(1)] = int(m.group(2))
    return ports
