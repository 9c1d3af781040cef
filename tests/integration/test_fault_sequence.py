"""SIGKILL and SIGSTOP/SIGCONT of primaries and backups, in sequence and with restarts, under
concurrent producers on many topics of 2 groups: every durable subscription gets every
acknowledged record once, in order."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import defaultdict
from collections.abc import Callable

import pytest

from tests.integration.conftest import group_info, wait_in_isr, wait_new_primary, zk_url
from tests.integration.test_subscriptions import topics_in_both_groups
from tritonmq import Client
from tritonmq.client import Subscription
from tritonmq.devtools.cluster import DevCluster, wait_for

pytestmark = pytest.mark.integration
NAMES = ("audit", "mirror")


async def faults(c: DevCluster) -> list[str]:
    """Kill, freeze and restart brokers one after the other; returns what was done."""
    done: list[str] = []
    run = asyncio.to_thread

    p1 = group_info(c, "g1")["primary"]
    c.kill(p1)
    await run(wait_new_primary, c, p1, 30, "g1")
    await run(c.restart, p1)
    await run(wait_in_isr, c, p1, 30, "g1")
    done.append(f"SIGKILL+restart primary {p1}")

    p2 = group_info(c, "g2")["primary"]
    os.kill(c.brokers[p2].pid, signal.SIGSTOP)
    try:
        await run(wait_new_primary, c, p2, 30, "g2")
    finally:
        os.kill(c.brokers[p2].pid, signal.SIGCONT)
    await run(wait_in_isr, c, p2, 30, "g2")
    done.append(f"SIGSTOP/SIGCONT primary {p2}")

    info = group_info(c, "g1")
    b = next(m for m in info["isr"] if m != info["primary"])
    c.kill(b)
    await run(wait_for, lambda: b not in group_info(c, "g1")["isr"], 30, f"{b} out of the ISR")
    await run(c.restart, b)
    await run(wait_in_isr, c, b, 30, "g1")
    done.append(f"SIGKILL+restart backup {b}")
    return done


async def test_every_acknowledged_record_reaches_every_durable_subscription_once(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = make_cluster(groups=2)
    url = zk_url(c)
    topics = topics_in_both_groups(c, 4)
    received: dict[tuple[str, str], list[tuple[int, bytes]]] = defaultdict(list)
    acked: dict[int, list[tuple[str, int, bytes]]] = defaultdict(list)
    stop = asyncio.Event()

    async def consume(key: tuple[str, str], sub: Subscription) -> None:
        async for msg in sub:
            received[key].append((msg.ts, msg.value))
            await msg.ack()

    async def produce(p: int) -> None:
        async with Client(url, timeout=120) as pc:
            i = 0
            while not stop.is_set():
                topic = topics[i % len(topics)]
                values = [f"{p}:{i}:{j}".encode() for j in range(20)]
                acks = await pc.publish_many(topic, values)
                acked[p].extend((topic, a.ts, v) for a, v in zip(acks, values, strict=True))
                i += 1
                await asyncio.sleep(0.005)

    async with Client(url, timeout=120) as sc:
        subs = {(t, n): sc.subscribe(t, subscription=n) for t in topics for n in NAMES}
        for s in subs.values():
            await s.__aenter__()
        consumers = [asyncio.create_task(consume(k, s)) for k, s in subs.items()]
        producers = [asyncio.create_task(produce(p)) for p in range(3)]
        await asyncio.to_thread(wait_for, lambda: sum(map(len, acked.values())) > 500, 30, "load")
        done = await faults(c)
        stop.set()
        await asyncio.gather(*producers)

        by_topic: dict[str, set[bytes]] = defaultdict(set)
        for recs in acked.values():
            for topic, _, v in recs:
                by_topic[topic].add(v)

        def complete() -> bool:
            return all(by_topic[t] <= {v for _, v in received[(t, n)]} for t, n in subs)

        await asyncio.to_thread(wait_for, complete, 60, f"every record after {done}")
        for task in consumers:
            task.cancel()

    ts_of = {v: ts for recs in acked.values() for _, ts, v in recs}
    for key, recs in received.items():
        values = [v for _, v in recs]
        assert len(values) == len(set(values)), f"{key}: a record reached the application twice"
        stamps = [ts for ts, _ in recs]
        assert stamps == sorted(stamps), f"{key}: not in ts order"
        assert all(ts_of.get(v, ts) == ts for ts, v in recs), (
            f"{key}: delivered ts differs from ack"
        )
    for p, recs in acked.items():
        for topic in topics:
            mine = [ts for t, ts, _ in recs if t == topic]
            assert mine == sorted(mine), f"producer {p} lost its order on {topic}"
