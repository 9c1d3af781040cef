"""Dev certificates: names a client checks (SANs), validity window, chain to the dev CA."""

from __future__ import annotations

import datetime
import ipaddress
import stat
from pathlib import Path

from cryptography import x509

from tritonmq.devtools.certs import DEFAULT_HOSTS, make_dev_certs


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_broker_certificate_names_every_host_as_ip_or_dns(tmp_path: Path) -> None:
    certs = make_dev_certs(tmp_path, [*DEFAULT_HOSTS, "127.0.0.11", "broker.example"])
    san = _load(certs.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
        ipaddress.ip_address("127.0.0.11"),
    }
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "broker.example"}


def test_validity_window_is_the_days_asked_for(tmp_path: Path) -> None:
    now = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    certs = make_dev_certs(tmp_path, days=7, now=now)
    for path in (certs.ca, certs.cert):
        c = _load(path)
        assert c.not_valid_before_utc <= now < c.not_valid_after_utc
        assert c.not_valid_after_utc - now == datetime.timedelta(days=7)


def test_broker_certificate_is_signed_by_the_ca_and_is_not_a_ca(tmp_path: Path) -> None:
    certs = make_dev_certs(tmp_path)
    ca, cert = _load(certs.ca), _load(certs.cert)
    cert.verify_directly_issued_by(ca)  # raises if not
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in eku


def test_private_key_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    certs = make_dev_certs(tmp_path)
    assert stat.S_IMODE(certs.key.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in certs.key.read_bytes()
