"""TLS contexts: a broker serves with its files, a client verifies the certificate chain and
the host name; bad files are a ConfigError. Real TLS handshakes over loopback, no processes."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from pathlib import Path

import pytest

from tritonmq.config import BrokerConfig
from tritonmq.devtools.certs import DevCerts, make_dev_certs
from tritonmq.errors import ConfigError
from tritonmq.tlsconfig import (
    client_context,
    for_url,
    is_tls_failure,
    replication_context,
    server_context,
)


@pytest.fixture
def certs(tmp_path: Path) -> DevCerts:
    return make_dev_certs(tmp_path / "tls")


def _cfg(c: DevCerts) -> BrokerConfig:
    return BrokerConfig(tls_cert=str(c.cert), tls_key=str(c.key), tls_ca=str(c.ca))


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> None:
    """One TLS handshake with a server on 127.0.0.1, dialled by the name ``host``."""

    async def serve(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = srv.sockets[0].getsockname()[1]
    try:
        _, w = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname=host, ssl_handshake_timeout=5
        )
        w.close()
    finally:
        srv.close()
        await srv.wait_closed()


def test_no_certificate_means_no_tls() -> None:
    assert server_context(BrokerConfig()) is None


async def test_a_client_with_the_ca_verifies_the_broker_by_ip_and_name(certs: DevCerts) -> None:
    server = server_context(_cfg(certs))
    assert server is not None
    for host in ("127.0.0.1", "localhost"):
        await _handshake(server, client_context(certs.ca), host)
    await _handshake(server, replication_context(_cfg(certs)), "127.0.0.1")


async def test_without_the_ca_the_certificate_does_not_verify(certs: DevCerts) -> None:
    server = server_context(_cfg(certs))
    assert server is not None
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        await _handshake(server, client_context(), "127.0.0.1")
    assert is_tls_failure(e.value)


async def test_a_host_not_in_the_certificate_does_not_verify(certs: DevCerts) -> None:
    server = server_context(_cfg(certs))
    assert server is not None
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|match"):
        await _handshake(server, client_context(certs.ca), "elsewhere.example")


async def test_an_expired_certificate_does_not_verify(tmp_path: Path) -> None:
    old = make_dev_certs(tmp_path, days=1, now=datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC))
    server = server_context(_cfg(old))
    assert server is not None
    with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
        await _handshake(server, client_context(old.ca), "127.0.0.1")


def test_missing_or_mismatched_files_are_config_errors(certs: DevCerts, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        server_context(BrokerConfig(tls_cert=str(tmp_path / "no.pem"), tls_key=str(certs.key)))
    other = make_dev_certs(tmp_path / "other")
    with pytest.raises(ConfigError, match="cannot load"):
        server_context(BrokerConfig(tls_cert=str(certs.cert), tls_key=str(other.key)))
    with pytest.raises(ConfigError, match="CA file not found"):
        client_context(tmp_path / "no-ca.pem")
    with pytest.raises(ConfigError, match="cannot read CA file"):
        client_context(certs.key)


def test_wss_urls_always_get_a_verifying_context(certs: DevCerts) -> None:
    ctx = client_context(certs.ca)
    assert for_url("ws://127.0.0.1:1", ctx) is None
    assert for_url("wss://127.0.0.1:1", ctx) is ctx
    default = for_url("wss://127.0.0.1:1", None)
    assert default is not None
    assert default.verify_mode is ssl.CERT_REQUIRED and default.check_hostname


def test_a_connection_cut_mid_handshake_is_worth_a_retry() -> None:
    assert not is_tls_failure(ssl.SSLEOFError())
    assert not is_tls_failure(ConnectionResetError())
    assert is_tls_failure(ssl.SSLCertVerificationError())
