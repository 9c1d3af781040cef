"""DevCluster itself: brokers start and restart even when another process holds a port
the cluster could have picked for them (bug 9: EADDRINUSE at start)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import group_info, wait_in_isr, zk_url
from tritonmq import Client
from tritonmq.coord.zkclient import ENV_AUTH, ENV_AUTH_FILE
from tritonmq.devtools import cluster as cluster_module
from tritonmq.devtools.cluster import DevCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def squatter() -> Iterator[socket.socket]:
    """Another process's listening socket on a loopback port (here: the test's own)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        yield s


def test_brokers_start_when_a_picked_port_is_taken_before_they_bind(
    make_cluster: Callable[..., DevCluster],
    squatter: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The race of bug 9 made certain: any port the cluster picks ahead of the broker's own
    # bind is already held by someone else by the time the broker binds it.
    taken = squatter.getsockname()[1]
    monkeypatch.setattr(cluster_module, "free_port", lambda: taken, raising=False)
    c = make_cluster(groups=1)
    ports = {b.port for b in c.brokers.values()}
    assert taken not in ports and 0 not in ports and len(ports) == 3
    members = group_info(c)["members"]
    assert {bid: f"ws://127.0.0.1:{b.port}" for bid, b in c.brokers.items()} == members


async def test_a_restart_whose_old_port_was_taken_binds_a_fresh_one(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(groups=1)
    info = group_info(c)
    backup = next(m for m in info["isr"] if m != info["primary"])
    old_port = c.brokers[backup].port
    c.kill(backup)
    # While it is down, someone else takes its port.
    with socket.create_server(("127.0.0.1", old_port)):
        b = c.restart(backup)
        assert b.alive and b.port != old_port
        assert b.url == f"ws://127.0.0.1:{b.port}"
        wait_in_isr(c, backup)
        assert group_info(c)["members"][backup] == b.url
    async with Client(zk_url(c)) as client:
        assert (await client.publish("after-restart", b"x")).ts > 0


async def test_a_one_replica_dev_group_takes_writes(
    make_cluster: Callable[..., DevCluster],
) -> None:
    # `tritonmq dev --replicas 1`: its brokers must know the group has one replica, or they
    # wait for a second in-sync replica that never comes and refuse every publish.
    c = make_cluster(groups=1, replicas=1)
    async with Client(zk_url(c), timeout=15) as client:
        ack = await client.publish("solo", b"x")
    assert ack.ts > 0


def test_a_cluster_started_after_another_was_stopped_makes_its_own_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first cluster puts its ZooKeeper credential file in the environment and removes the
    # file when it stops; a second cluster in the same process must not look for that file.
    monkeypatch.delenv(ENV_AUTH_FILE, raising=False)
    monkeypatch.delenv(ENV_AUTH, raising=False)
    with DevCluster(1, 1):
        assert os.environ.get(ENV_AUTH_FILE)
    assert ENV_AUTH_FILE not in os.environ
    with DevCluster(1, 1) as second:
        assert group_info(second)["primary"]
