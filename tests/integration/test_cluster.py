"""DevCluster itself: brokers start and restart even when another process holds a port
the cluster could have picked for them (bug 9: EADDRINUSE at start)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import group_info, wait_in_isr, zk_url
from tritonmq import Client
from tritonmq.coord.zkclient import ENV_AUTH, ENV_AUTH_FILE
from tritonmq.core.slots import slot_of
from tritonmq.devtools import cluster as cluster_module
from tritonmq.devtools.cluster import DevCluster, wait_for

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


# --- growing a running cluster (issue 11, test 4) -------------------------------------------


def start_join(state: Path, groups: int) -> tuple[subprocess.Popen[str], list[str]]:
    """`tritonmq dev --groups N --join STATE`, up to its line saying which groups it added."""
    cmd = [sys.executable, "-m", "tritonmq", "dev", "--groups", str(groups), "--join", str(state)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith("added "):
            return proc, lines
    proc.kill()
    raise AssertionError(f"dev --join did not start: {lines} {proc.stderr.read()}")  # type: ignore[union-attr]


async def test_a_group_added_to_a_running_cluster_gets_slots_while_clients_keep_publishing(
    make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    """`tritonmq dev --groups 3 --join` adds g3 to a running 2-group cluster, `rebalance
    --execute` gives it a third of the slots, and producers that never restarted keep
    publishing through it: every acknowledged record stored once, in each producer's order."""
    from tests.integration.test_slot_moves import (
        Producers,
        check_stored_once_in_order,
        cli_rebalance,
        histories,
        stored,
        topics_in,
        wait_acked,
    )

    c = make_cluster(groups=2, settings={"retention_s": 300.0})
    state = tmp_path / "dev.json"
    c.write_state(state)
    topics = topics_in(range(0, 64, 4), 1)
    proc: subprocess.Popen[str] | None = None
    try:
        async with Producers(c, topics, n=3) as producers:
            await wait_acked(producers, 200)
            proc, lines = await asyncio.to_thread(start_join, state, 3)
            assert lines[-1].startswith("added g3;"), lines
            started = sorted(ln.split()[1] for ln in lines if ln.startswith("broker "))
            assert started == ["g3/g3b1", "g3/g3b2", "g3/g3b3"], lines
            await asyncio.to_thread(wait_for, lambda: c.status()["groups"].get("g3"), 30, "g3")
            r = await asyncio.to_thread(cli_rebalance, c, "--execute", "--json")
            assert r.returncode == 0, (r.stdout, r.stderr)
            assert json.loads(r.stdout)["after"] == {"g1": 22, "g2": 21, "g3": 21}
            await wait_acked(producers, 300)
        hs = histories(c)
        assert [h.owner for h in hs].count("g3") == 21
        at_g3 = [t for t in topics if hs[slot_of(t, 64)].owner == "g3"]
        assert at_g3 and await stored(c, "g3", at_g3[0]), "g3 stores what it now owns"
        await check_stored_once_in_order(c, producers, groups=("g1", "g2", "g3"))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                code = await asyncio.to_thread(proc.wait, 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert c.primary("g1") is not None, "stopping the joined group leaves the cluster's own"


def test_dev_join_refuses_a_cluster_that_has_the_groups_already(
    make_cluster: Callable[..., DevCluster], tmp_path: Path
) -> None:
    c = make_cluster(groups=2, replicas=1)
    state = tmp_path / "dev.json"
    c.write_state(state)
    cmd = [sys.executable, "-m", "tritonmq", "dev", "--groups", "2", "--join", str(state)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "has 2 group(s) already: nothing to add" in r.stderr, r.stderr
    state.write_text("{}")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not the state of a running dev cluster" in r.stderr, r.stderr
