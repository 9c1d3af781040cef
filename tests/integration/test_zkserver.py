"""The ZooKeeper the tests and the demo run: standalone, ensemble failover, clean shutdown."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from tests.integration.conftest import process_gone
from tritonmq.devtools.zkensemble import ZooKeeperEnsemble
from tritonmq.devtools.zkserver import ZooKeeperServer, free_port, server_mode
from tritonmq.errors import CoordinationError

pytestmark = pytest.mark.integration


def wait_until(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def client(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=2.0)
    zk.start(timeout=10)
    return zk


@pytest.fixture
def kazoo(zk_server: ZooKeeperServer) -> Iterator[KazooClient]:
    zk = client(zk_server.hostport)
    yield zk
    zk.stop()
    zk.close()


def test_standalone_serves_znodes(zk_server: ZooKeeperServer, kazoo: KazooClient) -> None:
    assert zk_server.hostport == f"127.0.0.1:{zk_server.port}"
    assert zk_server.mode() == "standalone"
    path = f"/test/{uuid.uuid4().hex}"
    kazoo.create(path, b"hello", makepath=True)
    data, stat = kazoo.get(path)
    assert data == b"hello"
    assert stat.version == 0


def test_ephemeral_vanishes_when_its_client_stops(
    zk_server: ZooKeeperServer, kazoo: KazooClient
) -> None:
    owner = client(zk_server.hostport)
    path = f"/test/eph-{uuid.uuid4().hex}"
    owner.create(path, b"", ephemeral=True, makepath=True)
    assert kazoo.exists(path) is not None
    owner.stop()
    owner.close()
    wait_until(lambda: kazoo.exists(path) is None, 5.0, "the ephemeral node to vanish")


def test_stop_leaves_no_child_process() -> None:
    server = ZooKeeperServer()
    server.start()
    pid, data_dir = server.pid, server.data_dir
    assert pid is not None and data_dir.is_dir()
    assert server.log_path.stat().st_size > 0  # log4j is wired up
    server.stop()
    assert process_gone(pid)
    assert server.pid is None and not server.running
    assert not data_dir.exists()  # the temporary data dir is removed
    assert server_mode(server.port) is None
    server.stop()  # idempotent


def test_start_failure_raises_with_the_log() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = ZooKeeperServer(port=busy.getsockname()[1])
        try:
            with pytest.raises(CoordinationError, match="(?i)address already in use"):
                server.start(timeout=20)
        finally:
            server.stop()


def test_ensemble_survives_a_follower_and_then_the_leader_dying() -> None:
    with ZooKeeperEnsemble(3) as ensemble:
        pids = [m.pid for m in ensemble.members]  # every JVM this test starts
        assert ensemble.hostport.count(",") == 2 and None not in pids
        zk = client(ensemble.hostport)
        try:
            zk.create("/failover", b"0")
            zk.create("/failover/session", b"", ephemeral=True)
            session = zk.client_id

            def write(value: bytes) -> None:
                def ok() -> bool:
                    try:
                        zk.set("/failover", value)  # idempotent, so a retry is harmless
                    except KazooException:
                        return False
                    return True

                wait_until(ok, 10.0, f"a write of {value!r}")
                assert zk.get("/failover")[0] == value

            leader = ensemble.wait_leader()
            follower = next(i for i in range(3) if i != leader)
            ensemble.kill(follower)
            assert ensemble.members[follower].pid is None
            write(b"1")

            ensemble.restart(follower)
            pids.append(ensemble.members[follower].pid)
            assert ensemble.members[follower].mode() == "follower"
            ensemble.kill(leader)
            wait_until(lambda: ensemble.leader_index() not in (None, leader), 10.0, "a new leader")
            write(b"2")

            assert zk.client_id == session  # the session survived both failures
            assert zk.exists("/failover/session") is not None
        finally:
            zk.stop()
            zk.close()
    assert all(pid is not None and process_gone(pid) for pid in pids)


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
