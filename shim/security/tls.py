"""TLS for SSL and SASL_SSL listeners, with the standard library's `ssl`.

TLS 1.2 is the floor (Kafka's `ssl.enabled.protocols` default is TLSv1.2,TLSv1.3). With
`ssl.client.auth=required` a client without a certificate signed by the configured CA
fails the handshake; with `requested` it may go without one. On an SSL listener the
principal is the verified certificate's subject in RFC 2253 form (`User:CN=alice,O=acme`),
as Kafka's default principal builder names it; without a certificate it is User:ANONYMOUS.
SASL_SSL listeners ask for no certificate: SASL says who the client is.
"""

from __future__ import annotations

import ssl

from cryptography import x509

from .listeners import Security


def server_context(security: Security, sasl: bool = False) -> ssl.SSLContext:
    """The context of SSL listeners, or with `sasl` of SASL_SSL ones, which authenticate by
    SASL and ask for no certificate (Kafka applies ssl.client.auth to SSL listeners only)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(security.certfile), str(security.keyfile), security.key_password)
    if security.cafile:
        ctx.load_verify_locations(cafile=str(security.cafile))
    ctx.verify_mode = ssl.CERT_NONE if sasl else {
        "none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED}[security.client_auth]
    return ctx


def certificate_principal(ssl_object: ssl.SSLObject | None) -> str | None:
    """`User:<subject>` of the client's verified certificate, or None without one."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
