"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tritonmq.devtools.zkserver import ZooKeeperServer


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    """One real standalone ZooKeeper for the session; tests that use it error if it cannot start."""
    with ZooKeeperServer() as server:
        yield server
