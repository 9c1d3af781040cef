"""One group of three real brokers on a real ZooKeeper, failed with real signals."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import pytest
import websockets

from tests.integration.conftest import group_info, wait_in_isr, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration


async def test_primary_sigkill_midway_loses_nothing_and_duplicates_nothing(
    cluster: DevCluster,
) -> None:
    n, producers = 10_000, 2
    delivered: list[tuple[int, bytes]] = []
    async with Client(zk_url(cluster), timeout=60) as sub_client:
        async with sub_client.subscribe("orders", from_="latest") as sub:

            async def consume() -> None:
                async for msg in sub:
                    delivered.append((msg.ts, msg.value))
                    await msg.ack()

            consumer = asyncio.create_task(consume())
            acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(producers)}

            async def produce(p: int) -> None:
                async with Client(zk_url(cluster), timeout=60) as c:
                    for i in range(n // producers // 100):
                        values = [f"{p}:{i * 100 + j}".encode() for j in range(100)]
                        acks = await c.publish_many("orders", values)
                        acked[p].extend(zip((a.ts for a in acks), values, strict=True))

            old = await asyncio.to_thread(cluster.primary)
            tasks = [asyncio.create_task(produce(p)) for p in range(producers)]
            await asyncio.to_thread(
                wait_for, lambda: sum(map(len, acked.values())) >= n // 2, 60, "half"
            )
            cluster.kill(old)
            await asyncio.gather(*tasks)
            new = await asyncio.to_thread(wait_new_primary, cluster, old)
            assert new != old
            # The backups saw the dead primary's port refuse them and did not wait for
            # ZooKeeper to expire its session (docs/replication.md, F1): the exactly-once
            # checks below hold with that fast path taken.
            assert any(
                "refuses connections" in cluster.log_tail(b, 50)
                for b in cluster.brokers
                if b != old
            )
            everything = {v for recs in acked.values() for _, v in recs}
            assert len(everything) == n
            await asyncio.to_thread(
                wait_for, lambda: {v for _, v in delivered} >= everything, 60, "every acked record"
            )
            consumer.cancel()

    values = [v for _, v in delivered]
    assert len(values) == len(set(values)), "a record reached the application twice"
    stamps = [ts for ts, _ in delivered]
    assert stamps == sorted(stamps), "delivery is not in ts order"
    for p, recs in acked.items():
        # Each producer's records keep their order, and the acked ts is the delivered ts.
        assert [ts for ts, _ in recs] == sorted(ts for ts, _ in recs)
        by_value = dict((v, ts) for ts, v in delivered)
        assert all(by_value[v] == ts for ts, v in recs), f"producer {p}: ts differs from the ack"


async def test_backup_sigkill_writes_continue_and_restart_rejoins_isr(cluster: DevCluster) -> None:
    primary = await asyncio.to_thread(cluster.primary)
    backup = next(b for b in cluster.brokers if b != primary)
    async with Client(zk_url(cluster), timeout=30) as c:
        await c.publish_many("t", [b"before"] * 500)
        cluster.kill(backup)
        await asyncio.to_thread(
            wait_for,
            lambda: backup not in group_info(cluster)["isr"],
            30,
            f"{backup} to leave the ISR",
        )
        acks = await c.publish_many("t", [b"during"] * 500)
        assert len({a.ts for a in acks}) == 500
        await asyncio.to_thread(cluster.restart, backup)
        await asyncio.to_thread(wait_in_isr, cluster, backup)
        more = await c.publish_many("t", [b"after"] * 500)
        assert min(a.ts for a in more) > max(a.ts for a in acks)
    info = group_info(cluster)
    assert info["primary"] == primary and sorted(info["isr"]) == sorted(cluster.brokers)

    # The restarted backup caught up everything: with the other two killed, it serves it all alone.
    for other in [b for b in cluster.brokers if b != backup]:
        cluster.kill(other)
    await asyncio.to_thread(
        wait_for, lambda: group_info(cluster)["primary"] == backup, 30, f"{backup} to lead"
    )
    async with Client(zk_url(cluster), timeout=30) as c:
        async with c.subscribe("t", from_="earliest") as sub:
            values = [(await sub.get(timeout=10)).value for _ in range(1500)]
    assert values == [b"before"] * 500 + [b"during"] * 500 + [b"after"] * 500


async def _raw_pub(
    url: str, pub_id: int, uuid: bytes, value: bytes, *more: bytes
) -> dict[str, object]:
    """Publish ``uuid`` (and ``more`` uuids) with ``value`` in one batch."""
    records = [[u, None, value, None] for u in (uuid, *more)]
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        await ws.send(
            codec.packb({"op": "pub", "id": pub_id, "topic": "retry", "records": records})
        )
        return codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))


async def test_retry_with_same_uuid_after_failover_returns_original_ts(cluster: DevCluster) -> None:
    uuid = os.urandom(16)
    info = await asyncio.to_thread(group_info, cluster)
    first = await _raw_pub(info["primary_url"], 1, uuid, b"once")
    assert first["op"] == "puback"
    cluster.kill(info["primary"])
    new = await asyncio.to_thread(wait_new_primary, cluster, info["primary"])
    new_url = group_info(cluster)["members"][new]

    async def retry() -> dict[str, object]:
        while (
            True
        ):  # the new primary may still be admitting its ISR; a retriable error means try again
            r = await _raw_pub(new_url, 2, uuid, b"once")
            if r["op"] == "puback" or not r.get("retriable"):
                return r
            await asyncio.sleep(0.1)

    again = await asyncio.wait_for(retry(), 30)
    assert again["op"] == "puback" and again["ts"] == first["ts"]
    async with Client(zk_url(cluster)) as c:
        async with c.subscribe("retry", from_="earliest") as sub:
            msg = await sub.get(timeout=10)
            assert (msg.value, msg.ts) == (b"once", first["ts"][0])  # type: ignore[index]
            marker = await c.publish("retry", b"marker")
            nxt = await sub.get(timeout=10)
            assert nxt.ts == marker.ts, "the retried record was delivered twice"


async def test_sigstopped_primary_is_fenced_and_rejoins_as_backup(cluster: DevCluster) -> None:
    info = await asyncio.to_thread(group_info, cluster)
    old, old_url, old_epoch = info["primary"], info["primary_url"], info["epoch"]
    async with websockets.connect(old_url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        os.kill(cluster.brokers[old].pid, signal.SIGSTOP)
        try:
            new = await asyncio.to_thread(wait_new_primary, cluster, old)
            # Sent while the old primary is frozen: it reads this only after SIGCONT.
            await ws.send(
                codec.packb(
                    {
                        "op": "pub",
                        "id": 7,
                        "topic": "fence",
                        "records": [[os.urandom(16), None, b"stale", None]],
                    }
                )
            )
        finally:
            os.kill(cluster.brokers[old].pid, signal.SIGCONT)
        reply = codec.decode_broker(await asyncio.wait_for(ws.recv(), 30))
        assert reply["op"] == "error", f"the fenced primary acknowledged a write: {reply}"
        assert reply["code"] in ("NOT_PRIMARY", "UNAVAILABLE")
    await asyncio.to_thread(wait_in_isr, cluster, old)
    info = group_info(cluster)
    assert info["primary"] == new and info["epoch"] > old_epoch
    async with Client(zk_url(cluster)) as c:
        async with c.subscribe("fence", from_="earliest") as sub:
            marker = await c.publish("fence", b"marker")
            msg = await sub.get(timeout=10)
            assert msg.ts == marker.ts and msg.value == b"marker", (
                "a write of the old epoch survived"
            )


async def test_sigterm_closes_the_session_so_failover_starts_at_once(cluster: DevCluster) -> None:
    info = await asyncio.to_thread(group_info, cluster)
    old = info["primary"]
    cluster.kill(old, signal.SIGTERM)  # returns once the process has exited
    # A crashed broker's member znode lingers for a session timeout; a clean stop removes it first.
    assert old not in group_info(cluster)["members"]
    assert cluster.brokers[old].proc is not None and cluster.brokers[old].proc.returncode == 0
    new = await asyncio.to_thread(wait_new_primary, cluster, old)
    async with Client(zk_url(cluster)) as c:
        ack = await c.publish("after-sigterm", b"x")
    assert ack.ts > 0 and group_info(cluster)["primary"] == new


async def test_sigterm_exits_promptly_with_a_frozen_peer_and_a_backup_takes_over(
    cluster: DevCluster,
) -> None:
    """Bug 9: a planned stop bounds every wait. A frozen backup never answers the close
    handshake of its replication link; the stopping primary must exit anyway."""
    info = await asyncio.to_thread(group_info, cluster)
    old = info["primary"]
    frozen = next(b for b in info["isr"] if b != old)
    cluster.kill(frozen, signal.SIGSTOP)
    try:
        proc = cluster.brokers[old].proc
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        # Generous: a prompt stop takes about a second; it used to wait out a 10 s close.
        await asyncio.to_thread(proc.wait, 6)
        assert proc.returncode == 0
        new = await asyncio.to_thread(wait_new_primary, cluster, old)
        assert new != frozen
    finally:
        cluster.kill(frozen, signal.SIGCONT)


async def _raw_meta(url: str) -> dict[str, object]:
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        await ws.send(codec.packb({"op": "hello", "client": "test"}))
        return codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))


async def test_a_backup_that_rejoined_by_reset_still_dedups_a_late_retry_once_elected(
    make_cluster: Callable[..., DevCluster],
) -> None:
    """Bug 4: the record is acknowledged and purged (nobody subscribes); backup y restarts
    and re-joins by reset, so the record never reaches it. Then y is the only survivor and
    is elected: the producer's late retry must get the original ts, not a second copy. The
    primary hands y its dedup state a uuid a frame (``dedup_page``), as it does 100,000 a
    frame when there are millions."""
    c = make_cluster(settings={"min_insync": 1, "ephemeral_grace": 0.5, "dedup_page": 1})
    uuid, *more = (os.urandom(16) for _ in range(3))
    info = await asyncio.to_thread(group_info, c)
    p = info["primary"]
    first = await _raw_pub(info["primary_url"], 1, uuid, b"once", *more)
    assert first["op"] == "puback"

    async def purged() -> bool:
        return (await _raw_meta(str(info["primary_url"])))["records"] == 0

    for _ in range(100):
        if await purged():
            break
        await asyncio.sleep(0.1)
    assert await purged(), "the record was never purged"
    y, x = [b for b in c.brokers if b != p]
    c.kill(y)
    await asyncio.to_thread(
        wait_for, lambda: y not in group_info(c)["isr"], 30, f"{y} to leave the ISR"
    )
    await asyncio.to_thread(c.restart, y)
    await asyncio.to_thread(wait_in_isr, c, y)
    c.kill(x)
    await asyncio.to_thread(
        wait_for, lambda: x not in group_info(c)["isr"], 30, f"{x} to leave the ISR"
    )
    c.kill(p)
    await asyncio.to_thread(wait_for, lambda: group_info(c)["primary"] == y, 30, f"{y} to lead")
    y_url = str(group_info(c)["members"][y])
    again: dict[str, object] = {}
    for _ in range(100):
        again = await _raw_pub(y_url, 2, uuid, b"once", *more)
        if again["op"] == "puback" or not again.get("retriable"):
            break
        await asyncio.sleep(0.1)
    assert again["op"] == "puback" and again["ts"] == first["ts"], "the retry was stored again"


async def test_a_broker_started_while_zookeeper_is_out_of_reach_waits_then_registers_and_serves(
    make_cluster: Callable[..., DevCluster],
) -> None:
    """Issue 26: a broker starting during a ZooKeeper outage exited (its connection timed
    out, or SessionExpiredError while registering). It says it waits, and registers,
    rejoins its group and serves once ZooKeeper answers."""
    c = make_cluster(isolated=True)
    primary = c.primary("g1")
    bid = next(b for b in c.brokers if b != primary)
    c.kill(bid)
    c.cut_zk(bid)
    b = c.respawn(bid)
    try:
        wait_for(
            lambda: "waiting for ZooKeeper" in c.log_tail(bid, 50) or not b.alive,
            60,
            "the broker to say it waits for ZooKeeper",
        )
        assert b.alive, c.log_tail(bid, 50)
    finally:
        c.heal_zk(bid)
    c.await_ready(bid, 60)
    wait_for(lambda: c.member(bid) is not None, 30, f"{bid} registered")
    async with Client(zk_url(c)) as client:
        ack = await client.publish("t", b"v")
    assert ack.group == "g1"
    wait_in_isr(c, bid, timeout=60)  # it replicates what the group writes
    async with websockets.connect(b.url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        await ws.send(codec.packb({"op": "hello", "client": "t"}))
        async with asyncio.timeout(10):
            meta = codec.decode_broker(await ws.recv())
    assert meta["op"] == "meta" and meta["group"] == "g1", meta
