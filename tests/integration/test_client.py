"""The Python client against real brokers: bootstrap by ws://, redirects, replay, sync facade."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

import pytest
import websockets
from kazoo.exceptions import ConnectionLoss

from tests.integration.conftest import group_info, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.client import SyncClient
from tritonmq.client.types import Ack
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.errors import (
    ClientClosed,
    ConfigError,
    FrameTooLarge,
    InvalidName,
    ProtocolError,
    PublishTimeout,
    Purged,
)
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration


async def test_a_consumer_at_a_backup_is_told_where_the_primary_is(cluster: DevCluster) -> None:
    info = await asyncio.to_thread(group_info, cluster)
    backup_url = next(u for b, u in info["members"].items() if b != info["primary"])
    async with websockets.connect(backup_url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        await ws.send(codec.packb({"op": "sub", "sid": 3, "topic": "t"}))
        reply = codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))
    assert reply["op"] == "error" and reply["code"] == "NOT_PRIMARY" and reply["retriable"] is True
    assert reply["sid"] == 3 and reply["primary"] == info["primary_url"]

    # The client, bootstrapped from a backup's ws:// URL, follows that hint by itself.
    async with Client(backup_url) as c:
        async with c.subscribe("t") as sub:
            ack = await c.publish("t", b"via a backup", key=b"k", headers={"h": "v"})
            msg = await sub.get(timeout=10)
    assert (msg.ts, msg.value, msg.key, msg.headers) == (ack.ts, b"via a backup", b"k", {"h": "v"})
    assert ack.group == "g1" and len(msg.uuid) == 16


async def test_replay_from_earliest_and_from_a_ts(cluster: DevCluster) -> None:
    async with Client(zk_url(cluster)) as c:
        acks = await c.publish_many("replay", [str(i).encode() for i in range(100)])
        async with c.subscribe("replay", from_="earliest") as sub:
            got = [(await sub.get(timeout=10)).value for _ in range(100)]
        assert got == [str(i).encode() for i in range(100)]
        async with c.subscribe("replay", from_=acks[60].ts) as sub:
            msg = await sub.get(timeout=10)
        assert msg.value == b"60"
        async with c.subscribe("replay") as sub:  # latest: only what comes after
            new = await c.publish("replay", b"new")
            assert (await sub.get(timeout=10)).ts == new.ts


async def test_window_holds_back_an_unacking_consumer_only(cluster: DevCluster) -> None:
    async with Client(zk_url(cluster)) as c:
        async with c.subscribe("slow", window=10) as slow, c.subscribe("slow") as fast:
            await c.publish_many("slow", [b"x"] * 50)
            fast_got = [await fast.get(timeout=10) for _ in range(50)]
            assert len(fast_got) == 50
            slow_got = [await slow.get(timeout=10) for _ in range(10)]
            with pytest.raises(TimeoutError):
                await slow.get(timeout=0.5)  # window full until it acknowledges
            await slow_got[-1].ack()
            more = await slow.get(timeout=10)
            assert more.ts > slow_got[-1].ts


async def test_bad_requests_raise_typed_errors(cluster: DevCluster) -> None:
    with pytest.raises(ConfigError):
        Client("http://example")
    async with Client(zk_url(cluster)) as c:
        with pytest.raises(InvalidName):  # the one name rule, checked before sending
            await c.publish("t" * 300, b"topic name too long")
        with pytest.raises(TypeError):
            await c.publish("t", "not bytes")  # type: ignore[arg-type]
        assert (await c.publish("t", b"still fine")).ts > 0
    with pytest.raises(ClientClosed):
        await c.publish("t", b"after close")


def test_sync_facade(cluster: DevCluster) -> None:
    with SyncClient(zk_url(cluster)) as c:
        acks = c.publish_many("sync", [b"a", b"b"])
        one = c.publish("sync", b"c")
        assert [a.ts for a in acks] + [one.ts] == sorted({a.ts for a in acks} | {one.ts})
        values = []
        for msg in c.subscribe("sync", from_="earliest", timeout=5):
            values.append(msg.value)
            c.ack(msg)
            if len(values) == 3:
                break
    assert values == [b"a", b"b", b"c"]


def test_sync_facade_subscribe_as_the_first_call(cluster: DevCluster) -> None:
    """Issue 27: subscribe() as a SyncClient's first call raised "no running event loop"
    (the group's link was started on the caller's thread, not the facade's loop)."""
    with SyncClient(zk_url(cluster)) as producer:
        ack = producer.publish("sync-first", b"before")
    with SyncClient(zk_url(cluster)) as c:
        got = []
        for msg in c.subscribe("sync-first", from_="earliest", timeout=10):
            c.ack(msg)
            got.append((msg.ts, msg.value))
            break
    assert got == [(ack.ts, b"before")]


BIG = 9 * 1024 * 1024  # over the broker's max_frame_bytes (8 MiB, its default)


async def test_a_value_over_max_frame_bytes_is_refused_before_it_is_sent(
    cluster: DevCluster,
) -> None:
    """Issue 27: it went out, the broker closed the connection (1009) and every call of
    the client failed with CLIENT "client task failed: AttributeError(...)"."""
    async with Client(zk_url(cluster), timeout=10) as c:
        with pytest.raises(FrameTooLarge) as e:
            await c.publish("big", b"x" * BIG)
        assert e.value.code == "TOO_LARGE" and "max_frame_bytes" in str(e.value)
        with pytest.raises(FrameTooLarge):
            await c.publish_many("big", [b"small", b"x" * BIG])
        ack = await c.publish("big", b"still fine")
        async with c.subscribe("big", from_="earliest") as sub:
            first = await sub.get(timeout=10)
        assert (first.ts, first.value) == (ack.ts, b"still fine")  # nothing of the refused
    async with Client(zk_url(cluster), max_frame_bytes=4096) as small:  # the broker's setting
        with pytest.raises(ProtocolError) as e:
            await small.publish("big", b"x" * 5000)  # the broker would take it: not sent
        assert e.value.code == "TOO_LARGE"
    with SyncClient(zk_url(cluster)) as sc, pytest.raises(FrameTooLarge):
        sc.publish("big", b"x" * BIG)


async def test_a_client_told_a_larger_max_frame_bytes_than_the_brokers_times_out_and_goes_on(
    cluster: DevCluster,
) -> None:
    """The broker closes the connection (1009) at each resend: the publish times out naming
    why, and the client's other calls go on (closing the dropped connection raised inside
    websockets, and that failed every call of the client)."""
    async with Client(zk_url(cluster), timeout=3, max_frame_bytes=2 * BIG) as c:
        with pytest.raises(PublishTimeout) as e:
            await c.publish("big2", b"x" * BIG)
        assert "1009" in str(e.value)
        assert (await c.publish("big2", b"small")).ts > 0


async def test_a_failed_cluster_read_while_connecting_is_retried(cluster: DevCluster) -> None:
    """Bug 7: a kazoo exception from the cluster read used to end the link's task for
    good, and every publish to the group then timed out."""
    async with Client(zk_url(cluster), timeout=15) as c:
        real_refresh = c.refresh
        failures = 0

        async def flaky_refresh() -> None:
            nonlocal failures
            if failures == 0:
                failures += 1
                raise ConnectionLoss()
            await real_refresh()

        c.refresh = flaky_refresh  # type: ignore[method-assign]
        ack = await c.publish("flaky", b"after a failed read")
        assert failures == 1 and ack.ts > 0
        async with c.subscribe("flaky", from_=ack.ts) as sub:
            assert (await sub.get(timeout=10)).value == b"after a failed read"


# How long a frozen primary may hold the test before we call the clients stuck: more
# than session timeout (2 s) + election under load, less than the ~15 s the websocket
# keepalive needed before bug 8 was fixed (so the test fails without the fix).
FROZEN_FOR_AT_MOST = 12.0


@pytest.mark.parametrize("via", ["zk", "ws"])
async def test_a_frozen_primary_does_not_stall_its_producers(cluster: DevCluster, via: str) -> None:
    """Bug 8: SIGSTOP the primary while a producer publishes; acknowledgements resume
    from the new primary while the old one is still frozen; nothing acked is lost or doubled."""
    old = await asyncio.to_thread(cluster.primary)
    assert old is not None
    backup_url = next(b.url for bid, b in cluster.brokers.items() if bid != old)
    url = zk_url(cluster) if via == "zk" else backup_url
    acked: list[tuple[Ack, bytes]] = []
    stop = asyncio.Event()

    async with Client(url, timeout=60) as c:

        async def produce() -> None:
            i = 0
            while not stop.is_set():
                values = [f"{i}:{j}".encode() for j in range(10)]
                acks = await c.publish_many("frozen", values)
                acked.extend(zip(acks, values, strict=True))
                i += 1

        producer = asyncio.create_task(produce())
        try:
            await asyncio.to_thread(wait_for, lambda: len(acked) >= 200, 30, "acks before")
            cluster.kill(old, signal.SIGSTOP)
            try:
                at_freeze = len(acked)
                new = await asyncio.to_thread(wait_new_primary, cluster, old, FROZEN_FOR_AT_MOST)
                # The producer moved by itself: acks keep coming while `old` is still frozen.
                await asyncio.to_thread(
                    wait_for,
                    lambda: len(acked) >= at_freeze + 100,
                    FROZEN_FOR_AT_MOST,
                    "acknowledgements from the new primary while the old one is frozen",
                )
            finally:
                cluster.kill(old, signal.SIGCONT)
            assert new != old
            # more than a subscriber's window (window_records, 2000), so that reading them
            # back needs the reader's acks to reach the new primary
            await asyncio.to_thread(wait_for, lambda: len(acked) > 2500, 60, "2500 acks")
        finally:
            stop.set()
            await producer

        got = []
        async with c.subscribe("frozen", from_="earliest") as sub:
            for _ in range(len(acked)):  # acknowledged as read: the window holds back more
                got.append(m := await sub.get(timeout=20))
                await m.ack()
    by_value = {m.value: m.ts for m in got}
    assert len(by_value) == len(got), "a record reached the application twice"
    assert by_value == {v: a.ts for a, v in acked}, "an acknowledged record is missing or moved"
    stamps = [a.ts for a, _ in acked]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


async def test_fetch_reads_a_range_with_publish_times_and_commit_holds_it(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(replicas=2)  # retention 0: only the subscription keeps records
    async with Client(zk_url(c)) as client:
        offset, head = await client.commit("ranged", "reader", 0)  # registers, holds all
        assert offset == 0 and head >= 0
        before = int(time.time() * 1000)
        acks = await client.publish_many("ranged", [b"%d" % i for i in range(100)])
        after = int(time.time() * 1000)
        recs, nxt = await client.fetch("ranged", acks[10].ts, acks[19].ts)
        assert [r.value for r in recs] == [b"%d" % i for i in range(10, 20)]
        assert nxt == acks[19].ts + 1
        assert all(before <= (r.published or 0) <= after and len(r.uuid) == 16 for r in recs)

        # Acknowledge half without consuming: the broker purges it, and a reader that
        # still wants it is told instead of silently skipping.
        assert (await client.commit("ranged", "reader", acks[49].ts))[0] == acks[49].ts
        assert (await client.commit("ranged", "reader", 1))[0] == acks[49].ts  # never lowers

        async def purged() -> Purged:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    await client.fetch("ranged", acks[0].ts, acks[-1].ts)
                except Purged as e:
                    return e
                await asyncio.sleep(0.1)
            raise AssertionError("the acknowledged half was never purged")

        err = await purged()
        assert "ranged" in str(err) and "g1" in str(err)
        got = await client.fetch_raw("ranged", acks[0].ts, acks[-1].ts, skip_purged=True)
        assert got.purged == acks[49].ts and got.records[0][0] == acks[50].ts


async def test_a_ws_subscriber_leaves_a_frozen_primary_by_probing_not_by_keepalive(
    cluster: DevCluster, request: pytest.FixtureRequest
) -> None:
    """A client on ws:// (no ZooKeeper watch) that only subscribes: its primary is
    SIGSTOPped and stays frozen until the subscriber has a record from the new primary.
    It moved there because its hello went unanswered and the other brokers named a newer
    epoch (client rule C5), not because the WebSocket keepalive (~15 s) gave up."""
    info = await asyncio.to_thread(group_info, cluster)
    old = info["primary"]
    async with Client(zk_url(cluster)) as producer, Client(info["primary_url"]) as watcher:
        async with watcher.subscribe("frozen") as sub:
            await producer.publish("frozen", b"before")
            assert (await sub.get(timeout=10)).value == b"before"
            request.addfinalizer(lambda: cluster.kill(old, signal.SIGCONT))
            cluster.kill(old, signal.SIGSTOP)
            events = ["stopped"]
            new = await asyncio.to_thread(wait_new_primary, cluster, old)
            events.append("new primary")
            await producer.publish("frozen", b"after")
            msg = await sub.get(timeout=60)
            events.append(f"got {msg.value.decode()}")
            link = watcher._links["g1"]  # what made the subscriber leave the frozen primary
            why = link.protocol.last_error
            cluster.kill(old, signal.SIGCONT)
            events.append("thawed")
    assert events == ["stopped", "new primary", "got after", "thawed"]
    assert new != old and link.protocol.url == info["members"][new]
    assert "group moved to epoch" in why, f"left the frozen primary because: {why}"
