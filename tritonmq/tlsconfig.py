"""TLS contexts for brokers and clients, built in one place from files named in the config.

The broker's client listener and its replication listener(s) take the same
:func:`server_context`; a broker dialling its primary and every client take
:func:`client_context`, which verifies the peer's certificate and host name against
a CA file (or the system's trust store). Nothing here does cryptography by hand:
it is Python's :mod:`ssl` (OpenSSL) with TLS 1.2 as the floor.
"""

from __future__ import annotations

import functools
import ssl
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tritonmq.errors import ConfigError

if TYPE_CHECKING:
    from tritonmq.config import BrokerConfig

MIN_VERSION = ssl.TLSVersion.TLSv1_2


def tls_enabled(cfg: BrokerConfig) -> bool:
    """A broker serves ``wss://`` when its config names a certificate."""
    return bool(cfg.tls_cert)


def server_context(cfg: BrokerConfig) -> ssl.SSLContext | None:
    """The context a broker's listeners serve with; None when the config names no certificate.

    Raises :class:`ConfigError` naming the file when the certificate or key cannot be read
    or do not belong together, so a broker never starts half-configured.
    """
    if not cfg.tls_cert:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = MIN_VERSION
    try:
        ctx.load_cert_chain(cfg.tls_cert, cfg.tls_key or None)
    except FileNotFoundError as e:
        raise ConfigError(f"TLS certificate or key not found: {e.filename or cfg.tls_cert}") from e
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(
            f"cannot load TLS certificate {cfg.tls_cert} with key {cfg.tls_key}: {e}"
        ) from e
    return ctx


def client_context(ca_file: str | Path | None = None) -> ssl.SSLContext:
    """A verifying client context: the certificate must chain to ``ca_file`` (PEM) or, without
    one, to the system's trust store, and name the host dialled (DNS name or IP address)."""
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except FileNotFoundError as e:
        raise ConfigError(f"CA file not found: {ca_file}") from e
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"cannot read CA file {ca_file}: {e}") from e
    ctx.minimum_version = MIN_VERSION
    return ctx


def replication_context(cfg: BrokerConfig) -> ssl.SSLContext:
    """What a follower verifies its primary with: ``tls_ca``, else the system's trust store."""
    return client_context(cfg.tls_ca or None)


def for_url(url: str, ctx: ssl.SSLContext | None) -> ssl.SSLContext | None:
    """The ``ssl`` argument for connecting to ``url``: ``ctx`` for ``wss://``, None for ``ws://``.

    A ``wss://`` URL without a context gets a default verifying one, never an unverified one.
    """
    if urlsplit(url).scheme != "wss":
        return None
    return ctx if ctx is not None else _system_context()


@functools.cache
def _system_context() -> ssl.SSLContext:
    """Made once per process: loading the system's trust store takes ~60 ms."""
    return client_context()


def is_tls_failure(e: BaseException) -> bool:
    """Whether ``e`` is a TLS handshake failure (a certificate that does not verify, or a peer
    that does not speak TLS): retrying the same broker cannot fix it."""
    if isinstance(e, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLSyscallError):
        return False  # the connection ended mid-handshake (a broker killed): worth a retry
    return isinstance(e, ssl.SSLError)
