"""Durable subscribers of busy topics whose slots are swapped between two groups, on a real
2 groups x 3 cluster with purge at acknowledgement (retention 0): every acknowledged record
reaches each durable subscription exactly once (docs/replication.md M5, M9).

The shape of the outside check that lost acknowledged runs at a slot's first move: one
group holds most of the busy topics, so its ts runs well ahead of the other's; a durable
subscription's offset of the old group's era, taken as the new group's ts, skipped the
new era's first records and purge removed them for good."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.integration.conftest import zk_url
from tritonmq import Client
from tritonmq.coord.slots import fetch_slot_histories
from tritonmq.core.slots import slot_of
from tritonmq.devtools.cluster import DevCluster

pytestmark = pytest.mark.integration

TRITONMQ = [sys.executable, "-m", "tritonmq"]
SLOTS = 64


def move(c: DevCluster, slots: list[int], to: str) -> subprocess.CompletedProcess[str]:
    where = ["--zk", str(c.zk_hosts), "--chroot", c.chroot]
    args = [*TRITONMQ, "slots", "move", *map(str, slots), "--to", to, *where]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=os.environ.copy())


def busy_topics(owners: tuple[str, ...], per_group: dict[str, int]) -> list[str]:
    """Topics in distinct slots, ``per_group[g]`` of them in slots ``g`` owns."""
    want, used, out = dict(per_group), set(), []
    for i in range(100_000):
        t = f"busy-{i}"
        n = slot_of(t, SLOTS)
        if n not in used and want.get(owners[n], 0) > 0:
            want[owners[n]] -= 1
            used.add(n)
            out.append(t)
        if not any(want.values()):
            return out
    raise AssertionError("not enough slots")


class Publishing:
    """One producer per topic, one record every 5 ms, each publish awaited."""

    def __init__(self, c: DevCluster, topics: list[str]) -> None:
        self.c, self.topics = c, topics
        self.acked: dict[str, list[bytes]] = {t: [] for t in topics}
        self.errors: list[BaseException] = []
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Publishing:
        self.tasks = [asyncio.create_task(self._run(t)) for t in self.topics]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    async def _run(self, topic: str) -> None:
        async with Client(zk_url(self.c)) as client:
            n = 0
            while not self.stop.is_set():
                value = f"{topic}:{n}".encode()
                try:
                    await client.publish(topic, value)
                except Exception as e:  # the application would see it: the test fails
                    self.errors.append(e)
                    return
                self.acked[topic].append(value)
                n += 1
                await asyncio.sleep(0.005)

    def count(self) -> int:
        return sum(map(len, self.acked.values()))

    async def more(self, n: int, timeout: float = 60.0) -> None:
        want, deadline = self.count() + n, time.monotonic() + timeout
        while self.count() < want:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, f"{self.count()} of {want} acknowledged"
            await asyncio.sleep(0.05)


class DurableReaders:
    """A durable broadcast subscription per topic from earliest, acknowledging each record."""

    def __init__(self, c: DevCluster, topics: list[str]) -> None:
        self.c, self.topics = c, topics
        self.got: dict[str, list[bytes]] = {t: [] for t in topics}
        self.errors: list[BaseException] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.client: Client | None = None

    async def __aenter__(self) -> DurableReaders:
        self.client = await Client(zk_url(self.c)).connect()
        ready = [asyncio.Event() for _ in self.topics]
        self.tasks = [
            asyncio.create_task(self._read(t, e)) for t, e in zip(self.topics, ready, strict=True)
        ]
        async with asyncio.timeout(30):
            await asyncio.gather(*(e.wait() for e in ready))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.client is not None:
            await self.client.close()

    async def _read(self, topic: str, ready: asyncio.Event) -> None:
        assert self.client is not None
        try:
            async with self.client.subscribe(topic, "audit", from_="earliest") as sub:
                ready.set()
                async for msg in sub:
                    self.got[topic].append(msg.value)
                    await msg.ack()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the application would see it: the test fails
            self.errors.append(e)
            ready.set()

    async def caught_up(self, producers: Publishing, timeout: float = 90.0) -> None:
        """Until every acknowledged record reached the application; then each exactly once."""
        deadline = time.monotonic() + timeout
        while True:
            assert not self.errors, self.errors
            missing = {t: set(producers.acked[t]) - set(self.got[t]) for t in self.topics}
            if not any(missing.values()):
                break
            if time.monotonic() > deadline:
                lost = {
                    t: sorted(m, key=lambda v: int(v.split(b":")[1]))
                    for t, m in missing.items()
                    if m
                }
                raise AssertionError(
                    "acknowledged, never delivered: "
                    + "; ".join(f"{t}: {len(m)} ({m[0]!r}..{m[-1]!r})" for t, m in lost.items())
                )
            await asyncio.sleep(0.1)
        for t in self.topics:
            got = self.got[t]
            assert len(got) == len(set(got)), f"{t}: {len(got) - len(set(got))} delivered twice"


@pytest.fixture
def purging_at_ack(make_cluster: Any) -> DevCluster:
    # retention 0: a record every subscription acknowledged is purged at once, so a record
    # a subscription's offset jumped over is gone for good, not only late
    return make_cluster(groups=2, settings={"retention_s": 0.0})  # type: ignore[no-any-return]


async def test_durable_subscribers_of_busy_topics_get_every_record_once_across_three_swaps(
    purging_at_ack: DevCluster,
) -> None:
    c = purging_at_ack
    read = fetch_slot_histories(str(c.zk_hosts), c.chroot)
    assert read is not None
    owners = tuple(h.owner for h in read.slots)
    # g1 holds most busy topics: its ts runs ahead of g2's when its slots move there
    topics = busy_topics(owners, {"g1": 12, "g2": 4})
    mine = {g: sorted({slot_of(t, SLOTS) for t in topics if owners[slot_of(t, SLOTS)] == g})
            for g in ("g1", "g2")}  # fmt: skip
    async with DurableReaders(c, topics) as readers:
        async with Publishing(c, topics) as producers:
            await producers.more(1_000)
            for swap in range(3):
                there = ("g2", "g1") if swap % 2 == 0 else ("g1", "g2")
                moves = [
                    asyncio.to_thread(move, c, mine["g1"], there[0]),
                    asyncio.to_thread(move, c, mine["g2"], there[1]),
                ]
                for r in await asyncio.gather(*moves):
                    assert r.returncode == 0, (r.stdout, r.stderr)
                await producers.more(1_000)  # some seconds of publishing between swaps
        assert not producers.errors, producers.errors
        await readers.caught_up(producers)
