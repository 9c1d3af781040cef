"""Issue 8, attacks 1-3, as an outsider with network access tries them on a real cluster:
each now fails with a clear error while a well-behaved producer keeps being acknowledged."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets
from kazoo.exceptions import NoAuthError
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.integration.conftest import group_info, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.coord import paths
from tritonmq.coord.zkclient import ENV_AUTH, ENV_AUTH_FILE, ZkCredential, new_client
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.wire import codec, repl
from tritonmq.wire.frames import REPL_SUBPROTOCOL, SUBPROTOCOL, Follow

pytestmark = pytest.mark.integration


class Producer:
    """Publishes one record after another and counts the acknowledgements."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.acked: list[bytes] = []
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        async with Client(self.url, timeout=30) as c:
            i = 0
            while True:
                value = f"good-{i}".encode()
                await c.publish("good", value)
                self.acked.append(value)
                i += 1
                await asyncio.sleep(0.005)

    async def more_acks(self, n: int = 20) -> None:
        """Wait (deadline 30 s) until ``n`` more records are acknowledged."""
        want = len(self.acked) + n
        await asyncio.to_thread(wait_for, lambda: len(self.acked) >= want, 30, f"{n} more acks")


@pytest.fixture
async def producer(cluster: DevCluster) -> AsyncIterator[Producer]:
    p = Producer(zk_url(cluster))
    p.task = asyncio.create_task(p._run())
    await p.more_acks(1)
    yield p
    p.task.cancel()
    await asyncio.gather(p.task, return_exceptions=True)


async def follow_as_outsider(repl_url: str, follow: Follow) -> list[dict[str, Any]]:
    """Open a replication link, answer the challenge with ``follow`` (no secret: its proof
    is whatever the outsider made up), and return every frame the broker sends until it
    closes the link."""
    got: list[dict[str, Any]] = []
    async with websockets.connect(repl_url, subprotocols=[REPL_SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        challenge = codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))
        assert challenge["op"] == "challenge" and len(challenge["nonce"]) >= 16
        await ws.send(repl.enc_follow(follow))
        try:
            while True:
                got.append(codec.decode_broker(await asyncio.wait_for(ws.recv(), 10)))
                if got[-1]["op"] in ("leader", "append"):  # the primary streams: the attack won
                    await ws.send(codec.packb({"op": "rack", "epoch": follow.epoch, "ts": 2**40}))
                    break
        except ConnectionClosed:
            pass
    return got


def member_of(c: DevCluster, bid: str) -> dict[str, Any]:
    m = c.member(bid)
    assert m is not None, f"{bid} is not registered"
    return m


async def test_follow_without_the_cluster_secret_is_refused_on_both_ports(
    cluster: DevCluster, producer: Producer
) -> None:
    info = await asyncio.to_thread(group_info, cluster)
    primary = member_of(cluster, info["primary"])
    assert primary["repl_url"] != primary["url"], "replication has a listener of its own"

    # The client port never speaks replication: the handshake itself fails.
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(primary["url"], subprotocols=[REPL_SUBPROTOCOL]):  # type: ignore[list-item]
            pass
    assert refused.value.response.status_code == 400
    # ...and the replication port never speaks the client protocol.
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(primary["repl_url"], subprotocols=[SUBPROTOCOL]):  # type: ignore[list-item]
            pass
    assert refused.value.response.status_code == 400

    # The replication port: a made-up id (attack 1), with no proof and with a forged one.
    for proof in (b"", os.urandom(32)):
        hello = Follow("g1", "outsider", "boot-x", info["epoch"], 0, [], proof)
        frames = await follow_as_outsider(primary["repl_url"], hello)
        assert [f["op"] for f in frames] == ["error"], f"the primary streamed: {frames}"
        assert frames[0]["code"] == "UNAUTHENTICATED"
        await producer.more_acks()
    assert "follow without a valid cluster proof" in cluster.log_tail(info["primary"], 50)


async def test_impersonating_every_backup_is_refused_and_acked_records_survive_the_primary(
    cluster: DevCluster, producer: Producer
) -> None:
    info = await asyncio.to_thread(group_info, cluster)
    old = info["primary"]
    primary = member_of(cluster, old)
    backups = [b for b in cluster.brokers if b != old]
    for b in backups:  # attack 2: the right id and boot, read from ZooKeeper, but no secret
        boot = member_of(cluster, b)["boot"]
        hello = Follow("g1", b, boot, info["epoch"], 2**40, [(info["epoch"], 1)])
        frames = await follow_as_outsider(primary["repl_url"], hello)
        assert [(f["op"], f.get("code")) for f in frames] == [("error", "UNAUTHENTICATED")]

    await producer.more_acks(50)
    assert sorted((await asyncio.to_thread(group_info, cluster))["isr"]) == sorted(cluster.brokers)
    producer.task.cancel()  # type: ignore[union-attr]
    await asyncio.gather(producer.task, return_exceptions=True)  # type: ignore[arg-type]
    acked = list(producer.acked)

    # The real backups kept their links: what the primary acknowledged, they hold.
    cluster.kill(old)
    await asyncio.to_thread(wait_new_primary, cluster, old)
    async with Client(zk_url(cluster), timeout=30) as c:
        async with c.subscribe("good", from_="earliest") as sub:
            got = [(await sub.get(timeout=10)).value for _ in range(len(acked))]
    assert got == acked


async def subscribed(c: DevCluster, topic: str, name: str) -> None:
    """A durable subscription ``name`` on ``topic`` whose znodes exist (so that an outsider's
    read of them can only fail for want of the credential, not for want of the znode)."""
    async with Client(zk_url(c)) as client:
        async with client.subscribe(topic, subscription=name, from_="earliest") as sub:
            await sub.get(timeout=10)
    zk = outsider_zk(c, c.zk_auth)
    try:
        for path in (
            paths.subscription(c.chroot, topic, name),
            paths.offset(c.chroot, topic, name),
        ):
            await asyncio.to_thread(wait_for, lambda p=path: zk.exists(p), 30, f"{path} to exist")
    finally:
        zk.stop()
        zk.close()


def outsider_zk(c: DevCluster, cred: ZkCredential | None = None) -> Any:
    zk = new_client(str(c.zk_hosts), auth=cred)
    zk.start(timeout=10)
    return zk


async def test_zookeeper_without_the_credential_can_neither_read_nor_write_the_cluster(
    cluster: DevCluster, producer: Producer
) -> None:
    await subscribed(cluster, "good", "billing")
    info = await asyncio.to_thread(group_info, cluster)
    ch = cluster.chroot
    forged = {"epoch": info["epoch"] + 1, "primary": "evil", "isr": ["evil"], "boots": {}}
    member = b'{"url": "ws://x:1", "boot": "x"}'
    ops: list[tuple[str, tuple[Any, ...]]] = [
        ("get", (paths.state(ch, "g1"),)),
        ("get_children", (paths.members(ch, "g1"),)),
        ("get", (paths.cluster(ch),)),
        ("get_children", (paths.subscriptions(ch),)),
        ("get", (paths.offset(ch, "good", "billing"),)),
        ("get", (paths.subscription(ch, "good", "billing"),)),
        # attack 3: a forged member, a forged primary, a jumped offset, a deleted member
        ("create", (paths.member(ch, "g1", "evil"), member)),
        ("set", (paths.state(ch, "g1"), json.dumps(forged).encode())),
        ("set", (paths.offset(ch, "good", "billing"), b'{"ts": 9007199254740991}')),
        ("delete", (paths.member(ch, "g1", info["primary"]),)),
    ]
    for cred in (None, ZkCredential("tritonmq", "guessed")):
        zk = outsider_zk(cluster, cred)
        try:
            for name, args in ops:
                with pytest.raises(NoAuthError):
                    getattr(zk, name)(*args)
        finally:
            zk.stop()
            zk.close()
    await producer.more_acks()
    after = await asyncio.to_thread(group_info, cluster)
    assert after["primary"] == info["primary"] and "evil" not in after["members"]


def test_the_cli_without_the_credential_says_so_and_the_dev_files_are_private(
    cluster: DevCluster,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in (ENV_AUTH, ENV_AUTH_FILE)}
    cmd = [sys.executable, "-m", "tritonmq", "status", "--zk", str(cluster.zk_hosts)]
    r = subprocess.run(
        [*cmd, "--chroot", cluster.chroot], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and "no or wrong credential" in r.stderr, r.stderr
    for path in (cluster.zk_auth_file, cluster.secret_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_broker_without_a_secret_refuses_to_start(tmp_path: Any) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRITONMQ_CLUSTER", "TRITONMQ_ZK"))
    }
    cmd = [sys.executable, "-m", "tritonmq", "broker", "--zk", "127.0.0.1:1"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "missing a cluster secret" in r.stderr and "insecure_cluster" in r.stderr


def test_init_closes_a_tree_left_open_and_refuses_one_another_credential_owns(
    zk_server: Any, zk_credential: str
) -> None:
    from tritonmq.coord.slots import init_cluster
    from tritonmq.coord.zkclient import read_credential
    from tritonmq.errors import CoordinationError

    chroot = f"/open-{os.urandom(4).hex()}"
    hosts = zk_server.hostport
    zk = new_client(hosts, auth=None)  # a cluster from before ACLs: everything world-open
    zk.start(timeout=10)
    try:
        zk.create(paths.offset(chroot, "t", "s"), b'{"ts": 5}', makepath=True)
        init_cluster(hosts, chroot, ["g1"], 4, auth=read_credential(zk_credential))
        for path in (chroot, paths.offsets(chroot), paths.offset(chroot, "t", "s")):
            with pytest.raises(NoAuthError):
                zk.get(path)
        with pytest.raises(CoordinationError, match="another credential"):
            init_cluster(hosts, chroot, ["g1"], 4, auth=ZkCredential("someone", "else"))
    finally:
        zk.stop()
        zk.close()
    owner = new_client(hosts, auth=read_credential(zk_credential))
    owner.start(timeout=10)
    try:
        assert json.loads(owner.get(paths.offset(chroot, "t", "s"))[0]) == {"ts": 5}
    finally:
        owner.stop()
        owner.close()


async def test_the_read_only_credential_routes_zk_clients_and_reads_no_offsets_nor_writes(
    cluster: DevCluster, producer: Producer
) -> None:
    from tritonmq.coord.zkclient import read_credential

    await subscribed(cluster, "good", "billing")
    ch, info = cluster.chroot, await asyncio.to_thread(group_info, cluster)
    zk = outsider_zk(cluster, read_credential(cluster.zk_reader_file))
    try:
        assert json.loads(zk.get(paths.state(ch, "g1"))[0])["primary"] == info["primary"]
        assert sorted(zk.get_children(paths.members(ch, "g1"))) == sorted(cluster.brokers)
        assert zk.get(paths.cluster(ch))[0]
        for name, args in [
            ("get_children", (paths.subscriptions(ch),)),
            ("get", (paths.offset(ch, "good", "billing"),)),
            ("set", (paths.state(ch, "g1"), b"{}")),
            ("create", (paths.member(ch, "g1", "evil"), b"{}")),
        ]:
            with pytest.raises(NoAuthError):
                getattr(zk, name)(*args)
    finally:
        zk.stop()
        zk.close()
    # A zk:// client given only the reader's file routes and publishes.
    env = dict(os.environ, **{ENV_AUTH_FILE: str(cluster.zk_reader_file)})
    cmd = [sys.executable, "-m", "tritonmq", "pub", "--url", zk_url(cluster), "good", "via-reader"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "ts=" in r.stdout, r.stderr
    await producer.more_acks()


def test_dev_generates_private_credentials_and_its_state_file_says_where(tmp_path: Any) -> None:
    """Local use stays one command: `tritonmq dev` in an environment without credentials."""
    bare = {
        k: v for k, v in os.environ.items() if not k.startswith(("TRITONMQ_CLUSTER", "TRITONMQ_ZK"))
    }
    state_file = tmp_path / "state.json"
    tm = [sys.executable, "-m", "tritonmq"]
    dev = subprocess.Popen(
        [*tm, "dev", "--port", "0", "--state-file", str(state_file)],
        env=bare,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(state_file.exists, 60, "the dev cluster's state file")
        state = json.loads(state_file.read_text())
        for key in ("zk_auth_file", "zk_reader_file"):
            assert stat.S_IMODE(os.stat(state[key]).st_mode) == 0o600
        status = [*tm, "status", "--zk", state["zk"], "--json"]
        # without the local context `dev` wrote, which names its credential
        bare["TRITONMQ_CONTEXT"] = str(tmp_path / "no-context.json")
        denied = subprocess.run(status, env=bare, capture_output=True, text=True, timeout=60)
        assert denied.returncode == 1 and "no or wrong credential" in denied.stderr
        for key in ("zk_auth_file", "zk_reader_file"):
            env = dict(bare, **{ENV_AUTH_FILE: state[key]})
            ok = subprocess.run(status, env=env, capture_output=True, text=True, timeout=60)
            assert ok.returncode == 0, ok.stderr
            assert json.loads(ok.stdout)["groups"]["g1"]["primary"] is not None
    finally:
        dev.terminate()
        assert dev.wait(timeout=60) == 0
