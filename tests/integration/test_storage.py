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
from tritonmq.errors import RequestRejected

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


def primary_of(c: DevCluster) -> str:
    return str(wait_for(lambda: group_info(c, "g1")["primary"], 30, "a primary"))


def backup_of(c: DevCluster) -> str:
    p = primary_of(c)
    return next(b for b in c.brokers if b != p)


def replicated(c: DevCluster, bid: str) -> float:
    from tests.integration.test_http_metrics import metric, scrape  # noqa: PLC0415

    return metric(scrape(c, bid), "tritonmq_replicated_entries_total")


def in_isr(c: DevCluster, bid: str, n: int = 3) -> None:
    def back() -> bool:
        g = group_info(c, "g1")
        return bid in g["isr"] and len(g["isr"]) == n

    wait_for(back, 60, f"{bid} back in the ISR")


def boot_of(c: DevCluster, bid: str) -> str:
    return (c.data_dir(bid) / "boot").read_text().strip()


async def publish(c: DevCluster, n: int, tag: str) -> list[bytes]:
    values = [f"{tag}:{i}".encode() for i in range(n)]
    async with Client(zk_url(c), timeout=60.0) as client:
        for i in range(0, n, 100):
            await client.publish_many(TOPIC, values[i : i + 100])
    return values


async def test_a_backup_restarted_from_its_files_copies_only_what_it_lacks(
    make_cluster: Any,
) -> None:
    c = make_cluster(data=True, settings={"retention_s": 300.0})
    await publish(c, 2_000, "before")
    b = backup_of(c)
    c.kill(b)
    await publish(c, 100, "while-down")
    c.restart(b)
    in_isr(c, b)
    copied = replicated(c, b)
    # without its files it copies all 2,100 again; with them, the 100 it missed (and the
    # handful of entries a new epoch or a heartbeat may bring)
    assert 100 <= copied < 1_000, copied
    async with Client(zk_url(c)) as client:
        assert len(await fetch_values(client)) == 2_100


def flip_a_byte_in_the_middle(c: DevCluster, bid: str) -> None:
    seg = sorted((c.data_dir(bid) / "log").glob("*.seg"))[0]
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x10
    seg.write_bytes(bytes(data))


async def test_a_flipped_byte_in_a_backups_segment_is_repaired_and_never_delivered(
    make_cluster: Any,
) -> None:
    c = make_cluster(data=True, settings={"retention_s": 300.0})
    acked = await publish(c, 1_000, "v")
    b = backup_of(c)
    boot = boot_of(c, b)
    c.kill(b)
    flip_a_byte_in_the_middle(c, b)
    c.restart(b)
    assert "crc mismatch" in c.log_tail(b, 200) or "frame" in c.log_tail(b, 200)
    assert boot_of(c, b) != boot, "damaged files: back as a new incarnation"
    in_isr(c, b)  # it copied what it lost from the primary and is in sync again
    # the repaired backup now leads: what it serves is the primary's copy, not the damage
    c.kill(primary_of(c))
    got: list[bytes] = []
    await read_all_fresh(c, set(acked), got, timeout=60)
    assert sorted(got) == sorted(acked), "every record once, none altered"


async def read_all_fresh(c: DevCluster, want: set[bytes], got: list[bytes], timeout: float) -> None:
    async with Client(zk_url(c), timeout=60.0) as client:
        async with client.subscribe(TOPIC, from_="earliest") as sub:
            deadline = time.monotonic() + timeout
            async for msg in sub:
                got.append(msg.value)
                if want <= set(got):
                    return
                assert time.monotonic() < deadline, f"{len(want - set(got))} never delivered"


async def test_a_damaged_replica_back_first_after_a_whole_group_stop_is_not_elected(
    make_cluster: Any,
) -> None:
    c = make_cluster(data=True, settings={"retention_s": 300.0})
    acked = await publish(c, 1_000, "v")
    epoch = group_info(c, "g1")["epoch"]
    kill_all_at_once(c)
    damaged = "g1b2"
    flip_a_byte_in_the_middle(c, damaged)
    c.restart(damaged)
    wait_for(
        lambda: "unclean_election is off" in c.log_tail(damaged, 50),
        30,
        f"{damaged} to wait for an in-sync replica",
    )
    assert group_info(c, "g1")["epoch"] == epoch, "it claimed nothing"
    for bid in ("g1b1", "g1b3"):
        c.restart(bid)
    assert primary_of(c) != damaged
    in_isr(c, damaged)
    got: list[bytes] = []
    await read_all_fresh(c, set(acked), got, timeout=60)
    assert sorted(got) == sorted(acked)


async def test_a_torn_tail_restarts_cleanly_as_the_same_incarnation(make_cluster: Any) -> None:
    c = make_cluster(data=True, settings={"retention_s": 300.0})
    acked = await publish(c, 500, "v")
    b = backup_of(c)
    boot = boot_of(c, b)
    c.kill(b)
    seg = sorted((c.data_dir(b) / "log").glob("*.seg"))[-1]
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 5)  # the last write cut short
    c.restart(b)
    assert "torn tail" in c.log_tail(b, 200)
    assert boot_of(c, b) == boot
    in_isr(c, b)
    async with Client(zk_url(c)) as client:
        assert sorted(await fetch_values(client)) == sorted(acked)


async def test_a_synced_publish_is_acknowledged_once_fsynced_and_refused_without_files(
    make_cluster: Any,
) -> None:
    c = make_cluster(data=True, settings={"retention_s": 300.0, "fsync_interval_s": 30.0})
    async with Client(zk_url(c), timeout=20.0) as client:
        # with fsyncs 30 s apart on their own, an acknowledgement within the client's 20 s
        # is one the primary and every backup fsynced on demand
        acks = await client.publish_many(TOPIC, [b"a", b"b"], durability="synced")
        assert [a.ts for a in acks] == [1, 2]
        await client.publish(TOPIC, b"c", durability="written")
    plain = make_cluster()
    async with Client(zk_url(plain), timeout=20.0) as client:
        with pytest.raises(RequestRejected) as e:
            await client.publish(TOPIC, b"x", durability="synced")
        assert e.value.code == "BAD_REQUEST" and "data_dir" in str(e.value)
        assert (await client.publish(TOPIC, b"y")).ts >= 1, "memory, the default there"
