"""A local certificate authority and broker certificates for `tritonmq dev --tls` and tests.

Made with the ``cryptography`` package: an ECDSA P-256 CA and one broker certificate
signed by it, whose subject alternative names are every host a client or a peer dials
(``localhost``, ``127.0.0.1``, ``::1`` and any others asked for), so host-name checking
stays on. The files are PEM; the private keys are written readable by their owner only.
Not for production: an operator's certificates come from the operator's own CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_DAYS = 30
_BACKDATE = datetime.timedelta(minutes=5)  # a peer's clock a little behind still accepts it


@dataclass(frozen=True, slots=True)
class DevCerts:
    """Where the files are: give ``ca`` to clients (``--ca-file``) and to brokers (``tls_ca``)."""

    ca: Path
    cert: Path
    key: Path


def san_entries(hosts: Iterable[str]) -> list[x509.GeneralName]:
    """IP literals as ``IPAddress`` names (what a client dialling an IP checks), others as DNS."""
    out: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def make_dev_certs(
    directory: str | Path,
    hosts: Iterable[str] = DEFAULT_HOSTS,
    *,
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> DevCerts:
    """Write ``ca.pem``, ``broker.pem`` and ``broker-key.pem`` into ``directory``.

    The CA's own key is not kept: nothing else is ever signed with it.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    start = (now or datetime.datetime.now(datetime.UTC)) - _BACKDATE
    end = start + _BACKDATE + datetime.timedelta(days=days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "TritonMQ dev CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tritonmq broker")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(san_entries(hosts)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    out = DevCerts(d / "ca.pem", d / "broker.pem", d / "broker-key.pem")
    out.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(out.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem_key)
    return out


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )
