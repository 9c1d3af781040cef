"""Client tokens: JWTs (PyJWT) verified by brokers, minted for development.

A token's claims (docs/security.md): ``sub`` names the principal; ``pub`` and ``read``
are lists of topic patterns it may publish to / subscribe to and fetch; ``names`` the
subscription-name patterns it may use; ``admin`` (bool) allows the admin ops; ``exp``
(optional, seconds since the epoch) when it expires. Verifying the signature is crypto
and belongs to the shell; what the claims allow is decided by the core
(:mod:`tritonmq.core.auth`), which also judges ``exp`` against each frame's time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jwt

from tritonmq.config import BrokerConfig
from tritonmq.core.auth import Principal, TokenRejected
from tritonmq.errors import ConfigError

KEY_ENV = "TRITONMQ_AUTH_KEY"  # the verification key itself, when auth_key_file is empty
TOKEN_ENV = "TRITONMQ_TOKEN"  # a client's token, for the CLI


def read_key(path: str | Path) -> bytes:
    """A key file's bytes; an HMAC secret's surrounding whitespace (a trailing newline) is
    not part of it."""
    try:
        return Path(path).read_bytes().strip()
    except OSError as e:
        raise ConfigError(f"cannot read key file {path}: {e.strerror or e}") from e


def read_token_file(path: str | Path) -> str:
    """A client's token from a file (surrounding whitespace dropped); ConfigError if unreadable
    or empty."""
    try:
        token = Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read token file {path}: {e}") from e
    if not token:
        raise ConfigError(f"token file {path} is empty")
    return token


class TokenVerifier:
    """Checks a token's signature with the broker's key and reads its claims."""

    def __init__(self, key: bytes | None, algorithms: Sequence[str]) -> None:
        self.key = key
        self.algorithms = list(algorithms)

    @classmethod
    def from_config(cls, cfg: BrokerConfig) -> TokenVerifier:
        """The key from ``auth_key_file``, else ``$TRITONMQ_AUTH_KEY``; a broker that
        requires tokens needs one (ConfigError)."""
        key: bytes | None = None
        if cfg.auth_key_file:
            key = read_key(cfg.auth_key_file)
        elif os.environ.get(KEY_ENV):
            key = os.environ[KEY_ENV].encode().strip()
        if cfg.auth_required and not key:
            raise ConfigError(f"auth_required needs a key: set auth_key_file or ${KEY_ENV}")
        return cls(key or None, cfg.auth_algorithms)

    def verify(self, token: str) -> Principal | TokenRejected:
        """The principal a token names, its expiry not judged here (the core does that)."""
        if self.key is None:
            return TokenRejected("this broker has no key to verify tokens")
        try:
            claims = jwt.decode(
                token,
                self.key,
                algorithms=self.algorithms,
                options={"verify_exp": False, "require": ["sub"]},
            )
        except jwt.InvalidTokenError as e:
            return TokenRejected(f"{type(e).__name__}: {e}")
        except Exception as e:  # a hostile token must never take the connection down
            return TokenRejected(type(e).__name__)
        return principal_of(claims)


def _patterns(claims: dict[str, Any], key: str) -> tuple[str, ...] | None:
    raw = claims.get(key, ())
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list | tuple) or not all(isinstance(p, str) for p in raw):
        return None
    return tuple(raw)


def principal_of(claims: dict[str, Any]) -> Principal | TokenRejected:
    """Read the claims (validated: a malformed claim rejects the token)."""
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        return TokenRejected("'sub' must name the principal")
    pub, read, names = (_patterns(claims, k) for k in ("pub", "read", "names"))
    if pub is None or read is None or names is None:
        return TokenRejected("'pub', 'read' and 'names' must be lists of patterns")
    admin = claims.get("admin", False)
    if not isinstance(admin, bool):
        return TokenRejected("'admin' must be a boolean")
    exp = claims.get("exp")
    if exp is not None and (isinstance(exp, bool) or not isinstance(exp, int | float)):
        return TokenRejected("'exp' must be a number")
    return Principal(sub, pub, read, names, admin, None if exp is None else float(exp))


def mint(
    key: bytes,
    sub: str,
    *,
    pub: Sequence[str] = (),
    read: Sequence[str] = (),
    names: Sequence[str] = (),
    admin: bool = False,
    ttl: float | None = 3600.0,
    algorithm: str = "HS256",
) -> str:
    """A development token signed with ``key`` (HS256 by default); ``ttl`` None: no expiry."""
    claims: dict[str, Any] = {
        "sub": sub,
        "pub": list(pub),
        "read": list(read),
        "names": list(names),
        "iat": int(time.time()),
    }
    if admin:
        claims["admin"] = True
    if ttl is not None:
        claims["exp"] = int(time.time() + ttl)
    return jwt.encode(claims, key, algorithm=algorithm)
