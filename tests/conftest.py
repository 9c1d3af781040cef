"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tritonmq.coord.zkclient import ENV_AUTH, ENV_AUTH_FILE
from tritonmq.devtools.zkserver import ZooKeeperServer

# Property tests assert what holds, never how fast: hypothesis's per-example deadline and
# its too-slow check would make a busy CI machine fail tests that are correct.
settings.register_profile("tritonmq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tritonmq")


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    """One real standalone ZooKeeper for the session; tests that use it error if it cannot start."""
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def zk_credential(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One ZooKeeper credential for the session, in the environment: every DevCluster, broker,
    zk:// client and CLI run of the suite uses it, as an operator's would (issue 8)."""
    saved = {k: os.environ.get(k) for k in (ENV_AUTH, ENV_AUTH_FILE)}
    path = tmp_path_factory.mktemp("zkauth") / "zk.auth"
    path.write_text(f"tests:{secrets.token_urlsafe(24)}\n")
    path.chmod(0o600)
    os.environ.pop(ENV_AUTH, None)
    os.environ[ENV_AUTH_FILE] = str(path)
    yield str(path)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session", autouse=True)
def local_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The local context `tritonmq dev` writes (tritonmq/context.py) goes to a file of the
    session's, never the user's; no cluster named by the environment leaks in."""
    from tritonmq.context import ENV_CONTEXT, ENV_URL, ENV_ZK

    saved = {k: os.environ.get(k) for k in (ENV_CONTEXT, ENV_URL, ENV_ZK)}
    path = tmp_path_factory.mktemp("context") / "context.json"
    os.environ.pop(ENV_URL, None)
    os.environ.pop(ENV_ZK, None)
    os.environ[ENV_CONTEXT] = str(path)
    yield str(path)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
