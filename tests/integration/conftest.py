"""Real clusters for integration tests: real ZooKeeper, real broker processes, real signals."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tritonmq.cluster import DevCluster, wait_for
from tritonmq.coord.zkserver import ZooKeeperServer


@pytest.fixture
def make_cluster(zk_server: ZooKeeperServer, tmp_path: Any) -> Iterator[Callable[..., DevCluster]]:
    """Start clusters on the session's ZooKeeper, each under its own chroot; stopped at teardown."""
    started: list[DevCluster] = []

    def make(
        groups: int = 1, replicas: int = 3, broker_args: list[str] | None = None
    ) -> DevCluster:
        c = DevCluster(
            groups,
            replicas,
            zk=zk_server.hostport,
            chroot=f"/t-{uuid.uuid4().hex[:8]}",
            workdir=tmp_path / f"cluster{len(started)}",
            broker_args=broker_args,
        )
        started.append(c)
        return c.start(timeout=60)

    yield make
    for c in started:
        c.stop()


@pytest.fixture
def cluster(make_cluster: Callable[..., DevCluster]) -> DevCluster:
    """A healthy 1 group x 3 replicas cluster."""
    return make_cluster()


def group_info(c: DevCluster, group: str = "g1") -> dict[str, Any]:
    return c.status()["groups"][group]


def wait_new_primary(c: DevCluster, old: str, timeout: float = 30.0, group: str = "g1") -> str:
    def changed() -> str | None:
        g = group_info(c, group)
        p = g["primary"]
        return p if p != old and p in g["members"] else None

    return str(wait_for(changed, timeout, f"a primary other than {old}"))


def wait_in_isr(c: DevCluster, bid: str, timeout: float = 30.0, group: str = "g1") -> None:
    wait_for(lambda: bid in group_info(c, group)["isr"], timeout, f"{bid} to be back in the ISR")


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def zk_url(c: DevCluster) -> str:
    return f"zk://{c.zk_hosts}{c.chroot}"
