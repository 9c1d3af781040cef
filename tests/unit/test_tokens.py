"""Client tokens (tritonmq/tokens.py): the broker's key, signature checks, claims read into a
Principal (expiry left to the core), and minted development tokens."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tritonmq.config import BrokerConfig
from tritonmq.core.auth import Principal, TokenRejected
from tritonmq.errors import ConfigError
from tritonmq.tokens import KEY_ENV, TokenVerifier, mint, principal_of, read_token_file

KEY = b"k" * 64  # long enough for HS512 too (RFC 7518 3.2), so PyJWT does not warn


def test_a_minted_token_verifies_into_its_principal_even_once_expired() -> None:
    tok = mint(KEY, "alice", pub=["chat.*"], read=["chat.*"], names=["alice.*"], ttl=-10)
    p = TokenVerifier(KEY, ["HS256"]).verify(tok)
    assert isinstance(p, Principal)
    assert (p.name, p.pub, p.read, p.names, p.admin) == (
        "alice",
        ("chat.*",),
        ("chat.*",),
        ("alice.*",),
        False,
    )
    assert p.exp is not None and p.exp < time.time(), "expiry is the core's to judge"


@pytest.mark.parametrize(
    "token",
    [
        mint(b"x" * 32, "alice"),  # another key
        mint(KEY, "alice", algorithm="HS512"),  # an algorithm not accepted
        jwt.encode({"sub": "alice"}, None, algorithm="none"),  # unsigned
        jwt.encode({"pub": ["*"]}, KEY, algorithm="HS256"),  # no sub
        jwt.encode({"sub": "a", "pub": "*", "read": 5}, KEY, algorithm="HS256"),
        jwt.encode({"sub": "a", "admin": "yes"}, KEY, algorithm="HS256"),
        "not.a.jwt",
        "",
    ],
)
def test_bad_tokens_are_rejected_with_a_reason(token: str) -> None:
    got = TokenVerifier(KEY, ["HS256"]).verify(token)
    assert isinstance(got, TokenRejected) and got.reason


def test_without_a_key_every_token_is_rejected() -> None:
    assert isinstance(TokenVerifier(None, ["HS256"]).verify(mint(KEY, "a")), TokenRejected)


@pytest.mark.parametrize("family", ["RS256", "ES256"])
def test_public_key_algorithms_verify_with_the_pem_public_key(family: str) -> None:
    private = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if family == "RS256"
        else ec.generate_private_key(ec.SECP256R1())
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    tok = jwt.encode({"sub": "svc", "pub": ["*"], "admin": True}, private, algorithm=family)
    p = TokenVerifier(public_pem, [family]).verify(tok)
    assert isinstance(p, Principal) and p.admin and p.pub == ("*",)
    # the public key is no HMAC secret: a token signed with it as one is refused
    forged = TokenVerifier(public_pem, ["HS256"]).verify(tok)
    assert isinstance(forged, TokenRejected)


def test_the_key_comes_from_the_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "key"
    f.write_bytes(KEY + b"\n")
    assert TokenVerifier.from_config(BrokerConfig(auth_key_file=str(f))).key == KEY
    monkeypatch.setenv(KEY_ENV, "from-env")
    assert TokenVerifier.from_config(BrokerConfig()).key == b"from-env"
    monkeypatch.delenv(KEY_ENV)
    assert TokenVerifier.from_config(BrokerConfig()).key is None
    with pytest.raises(ConfigError, match="auth_required needs a key"):
        TokenVerifier.from_config(BrokerConfig(auth_required=True))
    with pytest.raises(ConfigError, match="cannot read key file"):
        TokenVerifier.from_config(BrokerConfig(auth_key_file=str(tmp_path / "missing")))


def test_claims_default_to_nothing_allowed() -> None:
    assert principal_of({"sub": "a"}) == Principal("a")
    assert principal_of({"sub": "a", "pub": "t"}) == Principal("a", pub=("t",))
    assert isinstance(principal_of({"sub": "a", "exp": "soon"}), TokenRejected)


def test_not_yet_valid_tokens_and_audiences_are_refused() -> None:
    v = TokenVerifier(KEY, ["HS256"])
    later = jwt.encode({"sub": "a", "nbf": time.time() + 100}, KEY, algorithm="HS256")
    assert isinstance(v.verify(later), TokenRejected)
    aimed = jwt.encode({"sub": "a", "aud": "elsewhere"}, KEY, algorithm="HS256")
    assert isinstance(v.verify(aimed), TokenRejected)


def test_a_token_file_is_read_stripped_and_an_empty_or_missing_one_is_a_config_error(
    tmp_path: Path,
) -> None:
    f = tmp_path / "t"
    f.write_text("abc.def.ghi\n")
    assert read_token_file(f) == "abc.def.ghi"
    f.write_text("  \n")
    with pytest.raises(ConfigError, match="empty"):
        read_token_file(f)
    with pytest.raises(ConfigError, match="cannot read"):
        read_token_file(tmp_path / "missing")
