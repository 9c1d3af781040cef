"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

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
