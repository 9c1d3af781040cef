"""Segment files on real brokers (docs/replication.md D1-D3): a group whose every broker is
SIGKILLed at once comes back from its files, without unclean election, with every
acknowledged record, each stored once, and its durable subscriber gets each once in order."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster, wait_for

pytestmark = pytest.mark.integration
TOPIC = "kept"


class Producing:
    """``n`` producers publishing numbered batches of 5, each awaited; a batch whose
    publish fails (the group down longer than the client's timeout) is sent again with a
    new call, as an application retries, so only acknowledged values count."""

    def __init__(self, c: DevCluster, n: int = 3) -> None:
        self.c, self.n = c, n
        self.acked: list[list[bytes]] = [[] for _ in range(n)]
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Producing:
        self.tasks = [asyncio.create_task(self._run(p)) for p in range(self.n)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    async def _run(self, p: int) -> None:
        async with Client(zk_url(self.c), timeout=60.0) as client:
            seq = 0
            while not self.stop.is_set():
                values = [f"p{p}:{seq + i}".encode() for i in range(5)]
                try:
                    await client.publish_many(TOPIC, values)
                except Exception:  # noqa: S112 - not acknowledged: the next batch goes on
                    continue
                seq += 5
                self.acked[p].extend(values)
                await asyncio.sleep(0.01)

    def count(self) -> int:
        return sum(map(len, self.acked))

    async def more(self, n: int, timeout: float = 60.0) -> None:
        want, deadline = self.count() + n, time.monotonic() + timeout
        while self.count() < want:
            assert time.monotonic() < deadline, f"{self.count()} of {want} acknowledged"
            await asyncio.sleep(0.05)


async def read_all(c: DevCluster, want: set[bytes], got: list[bytes], timeout: float) -> None:
    async with Client(zk_url(c), timeout=60.0) as client:
        async with client.subscribe(TOPIC, "audit", from_="earliest") as sub:
            deadline = time.monotonic() + timeout
            async for msg in sub:
                got.append(msg.value)
                await msg.ack()
                if want <= set(got):
                    return
                assert time.monotonic() < deadline, f"{len(want - set(got))} never delivered"


def kill_all_at_once(c: DevCluster, group: str = "g1") -> None:
    procs = [b.proc for b in c.brokers.values() if b.group == group and b.proc is not None]
    for proc in procs:
        os.kill(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait(timeout=30)


@pytest.mark.parametrize("replicas", [3, 2])
async def test_a_group_killed_whole_comes_back_from_its_files_with_every_acknowledged_record(
    make_cluster: Any, replicas: int
) -> None:
    # records kept 5 minutes, so that what each replica stores can be read back whole
    c = make_cluster(replicas=replicas, data=True, settings={"retention_s": 300.0})
    async with Client(zk_url(c)) as client:  # the durable subscription, before any record
        async with client.subscribe(TOPIC, "audit", from_="earliest"):
            pass
    async with Producing(c) as producers:
        await producers.more(300)
        kill_all_at_once(c)
        before = producers.count()
        for bid in list(c.brokers):
            c.restart(bid)
        await producers.more(300, timeout=90)  # acknowledged again, by the group back

    def whole() -> dict[str, Any] | None:
        g = group_info(c, "g1")
        return g if len(g["isr"]) == replicas else None

    info = wait_for(whole, 60, "every replica back in the ISR")
    assert info["primary"], "a primary elected from the ISR it had, no unclean election"
    acked = [v for vs in producers.acked for v in vs]
    assert before > 0 and len(acked) == len(set(acked))
    got: list[bytes] = []
    await read_all(c, set(acked), got, timeout=60)
    assert len(got) == len(set(got)), "nothing delivered twice to the durable subscriber"
    for p in range(producers.n):  # each producer's records in its order
        mine = [int(v.split(b":")[1]) for v in got if v.startswith(f"p{p}:".encode())]
        assert mine == sorted(mine)
    async with Client(zk_url(c)) as client:  # what the group stores: each record once
        stored = await fetch_values(client)
    assert set(acked) <= set(stored) and len(stored) == len(set(stored))


async def fetch_values(client: Client) -> list[bytes]:
    out: list[bytes] = []
    start = 1
    while True:
        records, start = await client.fetch(TOPIC, start, 2**53 - 1)
        if not records:
            return out
        out += [r.value for r in records]
