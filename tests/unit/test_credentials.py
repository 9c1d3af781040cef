"""A broker's cluster secret and ZooKeeper credential: from files or env, or a refusal to start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonmq.broker.credentials import (
    ENV_SECRET,
    ENV_SECRET_FILE,
    cluster_secret,
    load_credentials,
)
from tritonmq.config import BrokerConfig
from tritonmq.coord.zkclient import ENV_AUTH, ZkCredential
from tritonmq.errors import ConfigError

SECRET = "0123456789abcdef0123"


def test_the_secret_comes_from_the_setting_then_the_file_variable_then_the_variable(
    tmp_path: Path,
) -> None:
    f = tmp_path / "secret"
    f.write_text(SECRET + "\n")
    assert cluster_secret(BrokerConfig(cluster_secret_file=str(f)), {}) == SECRET.encode()
    assert cluster_secret(BrokerConfig(), {ENV_SECRET_FILE: str(f)}) == SECRET.encode()
    assert cluster_secret(BrokerConfig(), {ENV_SECRET: "x" * 16}) == b"x" * 16
    assert cluster_secret(BrokerConfig(), {}) is None


def test_a_short_or_unreadable_secret_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="shorter than 16"):
        cluster_secret(BrokerConfig(), {ENV_SECRET: "short"})
    with pytest.raises(ConfigError, match="cannot read"):
        cluster_secret(BrokerConfig(cluster_secret_file=str(tmp_path / "absent")), {})


def test_a_broker_missing_either_refuses_unless_insecure_cluster_says_so() -> None:
    with pytest.raises(ConfigError, match="missing a cluster secret .* and a ZooKeeper"):
        load_credentials(BrokerConfig(), {})
    with pytest.raises(ConfigError, match="missing a ZooKeeper credential"):
        load_credentials(BrokerConfig(), {ENV_SECRET: SECRET})
    creds = load_credentials(BrokerConfig(insecure_cluster=True), {})
    assert creds.secret is None and creds.zk is None
    full = load_credentials(BrokerConfig(), {ENV_SECRET: SECRET, ENV_AUTH: "u:p"})
    assert full.secret == SECRET.encode() and full.zk == ZkCredential("u", "p")
    assert SECRET not in repr(full) and "'p'" not in repr(full)
