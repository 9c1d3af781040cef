"""What one connection can cost a broker: a client that asks and never reads, and frames
that are cheap to send and dear to decode, are refused while a producer keeps its acks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.broker.outbound import CLOSE_OUTBOUND_FULL
from tritonmq.devtools.cluster import DevCluster
from tritonmq.devtools.zkserver import ZooKeeperServer, four_letter_word
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


def _kib(pid: int, field: str) -> int:
    """A memory line of /proc/PID/status (VmRSS now, VmHWM the peak), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for pid {pid}")


def _primary(cluster: DevCluster) -> tuple[str, int]:
    info = group_info(cluster)
    return info["primary_url"], cluster.brokers[info["primary"]].pid


async def _raw(url: str, **kwargs: Any) -> websockets.ClientConnection:
    """A raw connection that said hello (as every client does: before it, a message is at
    most max_hello_bytes, and the bounds tested here are those of the rest)."""
    ws = await websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None, **kwargs)  # type: ignore[list-item]
    await ws.send(codec.packb({"op": "hello"}))
    assert codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))["op"] == "meta"
    return ws


async def _keeps_acking(good: Client, topic: str, n: int) -> None:
    for i in range(n):
        ack = await asyncio.wait_for(good.publish(topic, b"ok %d" % i), 20)
        assert ack.ts > 0


async def test_fetch_and_never_read_is_closed_and_the_broker_stays_small(
    cluster: DevCluster,
) -> None:
    url, pid = await asyncio.to_thread(_primary, cluster)
    async with Client(zk_url(cluster)) as good:
        # ~4 MiB of retained records: every fetch of the topic is answered with ~4 MiB.
        await good.publish_many("big", [bytes([i]) * (64 * 1024) for i in range(64)])
        await _keeps_acking(good, "ok", 3)
        before = _kib(pid, "VmRSS")

        # A client that sends 200 fetches (about 12 KB) and reads nothing: its library
        # stops reading the socket after one queued message, as a stalled client would.
        attacker = await _raw(url, max_queue=1)
        fetch = {"op": "fetch", "topic": "big", "from": 1, "to": 10**9, "max": 10_000}
        for i in range(200):
            await attacker.send(codec.packb({**fetch, "id": i + 1}))
        await _keeps_acking(good, "ok", 20)  # served meanwhile, and after the attack
        grown = _kib(pid, "VmHWM") - before

        # Unbounded, the broker queued every answer: 200 x 4 MiB, 800 MiB. Bounded, it holds
        # max_outbound_bytes (16 MiB) and one answer in flight, plus allocator slack.
        assert grown < 150 * MIB, f"broker grew by {grown / MIB:.0f} MiB"

        # The attacker's connection was closed with the documented code (it finds the
        # close frame behind what the broker had queued, once it reads).
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(attacker.recv(), 20)
        assert closed.value.rcvd is not None, closed.value
        assert closed.value.rcvd.code == CLOSE_OUTBOUND_FULL
        assert closed.value.rcvd.reason == "outbound buffer full"

        await _keeps_acking(good, "ok", 3)


async def test_element_bombs_are_refused_and_others_are_served(cluster: DevCluster) -> None:
    url, _ = await asyncio.to_thread(_primary, cluster)
    async with Client(zk_url(cluster)) as good:
        async with good.subscribe("ok") as sub:
            bad = await _raw(url)
            try:
                bombs = [
                    # 8 M tiny values in one array: refused from the array's header
                    {"op": "pub", "id": 5, "topic": "t", "records": [0] * 8_000_000},
                    # 100 arrays of 80,000: each within msgpack's limit, 8 M together
                    {"op": "pub", "id": 6, "topic": "t", "x": [[0] * 80_000] * 100},
                    # an unknown field of 1.5 M empty maps
                    {
                        "op": "fetch",
                        "id": 7,
                        "topic": "t",
                        "from": 1,
                        "to": 2,
                        "x": [[{}] * 50_000] * 30,
                    },
                ]
                for bomb in bombs:
                    data = codec.packb(bomb)
                    assert len(data) < 8 * MIB  # within max_frame_bytes: only the work is refused
                    await bad.send(data)
                    reply = codec.decode_broker(await asyncio.wait_for(bad.recv(), 20))
                    assert reply["op"] == "error" and reply["code"] == "TOO_LARGE", reply
                    assert reply["id"] == bomb["id"]
                    ack = await asyncio.wait_for(good.publish("ok", b"still served"), 20)
                    assert (await sub.get(timeout=20)).ts == ack.ts
                # the bomber's connection stays usable for well-formed requests
                await bad.send(codec.packb({"op": "meta", "id": 8}))
                reply = codec.decode_broker(await asyncio.wait_for(bad.recv(), 20))
                assert reply["op"] == "meta" and reply["id"] == 8
            finally:
                await bad.close()


@pytest.mark.parametrize("mode", ["broadcast", "shared"])
async def test_a_subscriber_that_stops_reading_is_held_by_its_window_not_closed(
    cluster: DevCluster, mode: str
) -> None:
    """25 MiB are published while a subscriber reads nothing: its window (4 MiB, for shared
    members too) stops delivery long before the outbound cap, and once it reads it gets
    every record on the same connection."""
    url, _ = await asyncio.to_thread(_primary, cluster)
    topic = f"slow-{mode}"
    sub: dict[str, Any] = {"op": "sub", "sid": 1, "topic": topic, "from": "earliest"}
    if mode == "shared":
        sub |= {"subscription": "slow", "mode": "shared"}
    reader = await _raw(url, max_queue=1)
    try:
        await reader.send(codec.packb(sub))
        first = codec.decode_broker(await asyncio.wait_for(reader.recv(), 20))
        assert first["op"] == "subok", first
        expected: list[int] = []
        async with Client(zk_url(cluster)) as producer:
            for i in range(8):  # 8 batches of 50 x 64 KiB, each under max_frame_bytes
                values = [bytes([i, j]) * (32 * 1024) for j in range(50)]
                expected += [a.ts for a in await producer.publish_many(topic, values)]
        got: list[int] = []
        while len(got) < len(expected):
            frame = codec.decode_broker(await asyncio.wait_for(reader.recv(), 20))
            assert frame["op"] == "deliver", frame
            ts = [r[0] for r in frame["records"]]
            got += ts
            ack = ts[-1] if mode == "broadcast" else ts
            await reader.send(codec.packb({"op": "ack", "sid": 1, "ts": ack}))
        assert sorted(got) == expected
        await reader.send(codec.packb({"op": "meta", "id": 1}))  # still open and served
        assert codec.decode_broker(await asyncio.wait_for(reader.recv(), 20))["op"] == "meta"
    finally:
        await reader.close()


def _zk_packets(zk: ZooKeeperServer) -> int:
    """Requests the ZooKeeper server has received so far (its ``mntr`` counter)."""
    for line in four_letter_word(int(zk.hostport.rsplit(":", 1)[1]), "mntr").splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[1])
    raise AssertionError("no zk_packets_received in mntr")


async def test_a_flood_of_meta_requests_shares_zookeeper_reads(
    cluster: DevCluster, zk_server: ZooKeeperServer
) -> None:
    """Each `meta` with the cluster view used to cost its own ZooKeeper reads (about six round
    trips on the broker's thread pool): 2000 of them (30 KB) queued up past the 3 s deadline,
    so `meta`s were answered without `groups`. Now `meta`s waiting at the same time share
    one read (16 ZooKeeper requests for the 2000 here)."""
    url, _ = await asyncio.to_thread(_primary, cluster)
    n = 2000
    flood = await _raw(url)
    try:
        before = await asyncio.to_thread(_zk_packets, zk_server)
        for i in range(n):
            await flood.send(codec.packb({"op": "meta", "id": i + 1}))
        answered = set()
        while len(answered) < n:
            reply = codec.decode_broker(await asyncio.wait_for(flood.recv(), 20))
            assert reply["op"] == "meta" and "groups" in reply, reply
            answered.add(reply["id"])
        spent = await asyncio.to_thread(_zk_packets, zk_server) - before
    finally:
        await flood.close()
    assert answered == set(range(1, n + 1))
    assert spent < n, f"{spent} ZooKeeper requests for {n} meta requests"
