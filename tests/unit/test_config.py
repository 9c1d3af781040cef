"""Broker settings: defaults, TOML file, flag overrides, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonmq.config import BrokerConfig, load_config
from tritonmq.errors import ConfigError

EXAMPLE = Path(__file__).parents[2] / "config" / "broker.toml"


def test_the_annotated_example_loads_and_names_every_setting() -> None:
    cfg = load_config(EXAMPLE)
    assert cfg == BrokerConfig()
    text = EXAMPLE.read_text()
    for name in BrokerConfig.__dataclass_fields__:
        documented = f"\n{name} =" in text or f"\n[broker.{name}]" in text
        assert documented, f"config/broker.toml does not document {name}"


def test_flags_override_the_file_and_none_means_not_given(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text('[broker]\ngroup = "g7"\nsession_timeout = 3\nreplicas = 5\n')
    cfg = load_config(f, group=None, replicas=3, id="b9")
    assert (cfg.group, cfg.replicas, cfg.id, cfg.session_timeout) == ("g7", 3, "b9", 3.0)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("replicas = 'three'", "replicas"),
        ("replicas = true", "replicas"),
        ("no_such_setting = 1", "no_such_setting"),
        ("session_timeout = 0.1", "session_timeout"),
        ("min_insync = 0", "min_insync"),
        ("this is not toml", "TOML"),
        ("repl_listen = '7001'", "repl_listen"),
        ("insecure_cluster = 'yes'", "insecure_cluster"),
        ("tls_cert = 'b.pem'", "tls_key"),
        ("tls_key = 'b-key.pem'", "tls_cert"),
        ("tls_cert = 'b.pem'\ntls_key = 'k.pem'\nadvertise_repl = 'ws://h:1'", "wss://"),
        ("max_outbound_bytes = 4194304", "max_outbound_bytes"),
        ("window_bytes = 33554432", "max_outbound_bytes"),
        ("max_outbound_total_bytes = 8388608", "max_outbound_total_bytes"),
        ("max_queue = 0", "max_queue"),
        ("max_frame_elements = 0", "max_frame_elements"),
        ("max_batch_records = 300000", "max_frame_elements"),
        ("max_hello_bytes = 1024", "max_hello_bytes"),
        ("max_hello_bytes = 16777216", "max_hello_bytes"),
        ("max_inbound_bytes = 1048576", "max_inbound_bytes"),
        ("hello_timeout = 0", "hello_timeout"),
        ("repl_auth_timeout = -1", "repl_auth_timeout"),
        ("max_unauthenticated = 0", "max_unauthenticated"),
        ("max_repl_pending = 0", "max_repl_pending"),
    ],
)
def test_bad_settings_raise_config_error_naming_them(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "b.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=words):
        load_config(f)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_min_insync_never_exceeds_the_group() -> None:
    assert BrokerConfig(replicas=1, min_insync=2).effective_min_insync == 1
    assert BrokerConfig(replicas=3, min_insync=2).effective_min_insync == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("auth_algorithms = ['none']", "auth_algorithms"),
        ("auth_algorithms = []", "auth_algorithms"),
        ("auth_algorithms = ['HS256', 'RS256']", "mix"),
        ("allowed_origins = [5]", "allowed_origins"),
        ("allowed_origins = 'https://a'", "allowed_origins"),
    ],
)
def test_client_security_settings_are_checked(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "b.toml"
    f.write_text(text + "\n")
    with pytest.raises(ConfigError, match=words):
        load_config(f)


def test_a_broker_requiring_tokens_needs_a_readable_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITONMQ_AUTH_KEY", raising=False)
    with pytest.raises(ConfigError, match="auth_required needs a key"):
        load_config(None, auth_required=True)
    with pytest.raises(ConfigError, match="auth_key_file"):
        load_config(None, auth_key_file=str(tmp_path / "missing"))
    key = tmp_path / "key"
    key.write_text("secret\n")
    assert load_config(None, auth_required=True, auth_key_file=str(key)).auth_required
    monkeypatch.setenv("TRITONMQ_AUTH_KEY", "secret")
    assert load_config(None, auth_required=True).auth_required
