"""Durable and shared subscriptions, offsets in ZooKeeper, purge and the memory limit,
on 2 groups x 3 real brokers."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
import websockets

from tests.integration.conftest import wait_in_isr, wait_new_primary, zk_url
from tritonmq import Client
from tritonmq.coord.zkclient import new_client
from tritonmq.core.slots import SlotMap
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.errors import Full
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration


@pytest.fixture
def two_groups(make_cluster: Callable[..., DevCluster]) -> DevCluster:
    """2 groups x 3 replicas with the issue's defaults: retention 0, purge on."""
    return make_cluster(groups=2)


def topics_in_both_groups(c: DevCluster, n: int = 4) -> list[str]:
    smap = SlotMap.from_dict(c.status()["slots"])
    by_group: dict[str, list[str]] = {"g1": [], "g2": []}
    for t in (f"topic-{i}" for i in range(200)):
        by_group[smap.group_of(t)].append(t)
    return by_group["g1"][: n // 2] + by_group["g2"][: n // 2]


def stored_offset(c: DevCluster, topic: str, name: str) -> int | None:
    zk = new_client(str(c.zk_hosts), auth=c.zk_auth)  # offsets are the cluster's alone
    zk.start(timeout=10)
    try:
        raw, _ = zk.get(f"{c.chroot}/offsets/{topic}/{name}")
        return int(json.loads(raw)["ts"])
    except Exception:
        return None
    finally:
        zk.stop()
        zk.close()


async def broker_meta(url: str) -> dict[str, Any]:
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        await ws.send(codec.packb({"op": "hello"}))
        return codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))


async def test_a_durable_subscriber_reconnects_from_its_last_ack_without_gap_or_duplicate(
    two_groups: DevCluster,
) -> None:
    url = zk_url(two_groups)
    topics = topics_in_both_groups(two_groups)
    for topic in topics:
        async with Client(url) as c:
            async with c.subscribe(topic, subscription="billing") as sub:  # registers it
                acks = await c.publish_many(topic, [f"a{i}".encode() for i in range(300)])
                last_acked = 0
                for _ in range(120):
                    msg = await sub.get(timeout=10)
                    await msg.ack()
                    last_acked = msg.ts
        # Nobody is subscribed now; the subscription still holds what it has not acknowledged.
        async with Client(url) as p:
            more = await p.publish_many(topic, [f"b{i}".encode() for i in range(200)])
        expected = [a.ts for a in acks + more if a.ts > last_acked]
        await asyncio.to_thread(
            wait_for,
            lambda t=topic, at=last_acked: stored_offset(two_groups, t, "billing") == at,
            10,
            "offset",
        )
        async with Client(url) as c2:
            async with c2.subscribe(topic, subscription="billing") as sub2:
                got = [(await sub2.get(timeout=10)).ts for _ in expected]
                with pytest.raises(TimeoutError):
                    await sub2.get(timeout=0.3)
        assert got == expected, f"{topic}: resumed with a gap or a duplicate"


async def test_purge_returns_memory_and_backups_purge_in_step(two_groups: DevCluster) -> None:
    topic = topics_in_both_groups(two_groups, 2)[0]
    group = SlotMap.from_dict(two_groups.status()["slots"]).group_of(topic)
    urls = list(two_groups.status()["groups"][group]["members"].values())
    baseline = [(await broker_meta(u))["bytes"] for u in urls]
    async with Client(zk_url(two_groups)) as c:
        async with c.subscribe(topic, subscription="drain") as sub:
            acks = await c.publish_many(topic, [b"x" * 1000 for _ in range(500)])
            grown = [(await broker_meta(u))["bytes"] for u in urls]
            assert all(g >= b + 500_000 for g, b in zip(grown, baseline, strict=True)), grown
            for _ in acks:
                msg = await sub.get(timeout=10)
            await msg.ack()

            async def drained() -> bool:
                return [(await broker_meta(u))["bytes"] for u in urls] == baseline

            for _ in range(100):  # a condition with a deadline: offsets are stored, then purged
                if await drained():
                    break
                await asyncio.sleep(0.1)
            assert await drained(), "retained bytes did not return to baseline on every replica"


async def test_memory_limit_pushes_back_and_never_drops_acknowledged_records(
    make_cluster: Callable[..., DevCluster],
) -> None:
    # max_bytes counts ~400 bytes of bookkeeping per record (docs/security.md): a batch of
    # 1000 small records costs ~500 KB.
    c = make_cluster(groups=2, settings={"max_bytes": 1_000_000})
    topic = topics_in_both_groups(c, 2)[0]
    async with Client(zk_url(c), timeout=60) as pub, Client(zk_url(c)) as subc:
        async with subc.subscribe(topic, subscription="slow") as sub:
            # Fill the group: the broker refuses with the retriable FULL error.
            async with Client(zk_url(c), timeout=2, retries=0) as impatient:
                with pytest.raises(Full):
                    for _ in range(100):
                        await impatient.publish_many(topic, [b"y" * 1000] * 100)
            received: list[bytes] = []

            async def consume() -> None:
                while True:
                    msg = await sub.get(timeout=30)
                    received.append(msg.value)
                    await msg.ack()

            consumer = asyncio.create_task(consume())
            # A patient producer is pushed back (FULL, back-off, retry) until the consumer frees room.
            values = [f"z{i:06}".encode() * 10 for i in range(2000)]  # 1000-record batches fit
            acks = await pub.publish_many(topic, values)
            assert len(acks) == 2000
            await asyncio.to_thread(
                wait_for, lambda: set(values) <= set(received), 60, "every record"
            )
            consumer.cancel()


class SharedConsumer:
    """A `tritonmq sub --mode shared` process whose output is drained as it comes (a full
    pipe would block it mid-print, and a blocked consumer acknowledges nothing)."""

    def __init__(self, c: DevCluster, topic: str) -> None:
        cmd = [sys.executable, "-m", "tritonmq", "sub", topic, "--url", zk_url(c)]
        cmd += ["--subscription", "workers", "--mode", "shared", "--json"]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.values: list[str] = []
        self.started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.values.append(json.loads(line)["value"])
                self.started.set()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)


async def test_shared_subscription_survives_a_sigkilled_member(two_groups: DevCluster) -> None:
    topic = topics_in_both_groups(two_groups, 2)[0]
    jobs = {f"job-{i}-{j}" for i in range(20) for j in range(100)}
    async with Client(zk_url(two_groups)) as c:
        async with c.subscribe(topic, subscription="workers", mode="shared"):
            pass  # the subscription exists from here on: nothing published later is missed
        members = [SharedConsumer(two_groups, topic) for _ in range(3)]
        try:
            # Until every member is attached, the first one takes all there is (its window
            # holds every job): warm up one record at a time until each has printed one.
            n = 0
            while not all(m.started.is_set() for m in members):
                assert n < 600, "the three members never all took a record"
                await c.publish(topic, f"warm-{n}".encode())
                n += 1
                await asyncio.sleep(0.1)
            members[0].started.clear()
            acks: list[Any] = []

            async def produce() -> None:
                for i in range(20):
                    values = [f"job-{i}-{j}".encode() for j in range(100)]
                    acks.extend(await c.publish_many(topic, values))
                    await asyncio.sleep(0.05)

            producer = asyncio.create_task(produce())
            # Kill a member mid-stream: once it has taken (and printed) a job.
            assert await asyncio.to_thread(members[0].started.wait, 60)
            members[0].proc.send_signal(signal.SIGKILL)
            await producer
            last = max(a.ts for a in acks)
            await asyncio.to_thread(
                wait_for,
                lambda: (stored_offset(two_groups, topic, "workers") or 0) >= last,
                60,
                "every job acknowledged by some member",
            )
        finally:
            for m in members:
                m.kill()
    seen = {v for m in members for v in m.values}
    assert members[0].values, "the killed member was consuming when it died"
    assert jobs <= seen, f"{len(jobs - seen)} jobs were lost"


@pytest.mark.parametrize("fault", ["sigkill", "sigstop", "zk-cut", "sigstop-sigkill"])
async def test_each_record_reaches_a_shared_subscription_once_across_a_primary_failure(
    make_cluster: Callable[..., DevCluster], fault: str, request: pytest.FixtureRequest
) -> None:
    """Two members of one shared subscription; mid-stream the primary is SIGKILLed,
    SIGSTOPped (thawed once a new primary serves, or SIGKILLed frozen) or cut off from
    ZooKeeper (healed once a new primary serves). Which member holds what and the acks
    above the stored offset the primary replicated to its backups; the members tell the new
    primary too (docs/replication.md, S7). Each record reaches exactly one member, once.
    offset_interval 1 s keeps many acks above the stored offset."""
    c = make_cluster(settings={"offset_interval": 1.0}, isolated=fault == "zk-cut")
    topic, n = "jobs", 4000
    got: list[tuple[int, bytes]] = []  # (member, value), in the order the members saw them
    async with contextlib.AsyncExitStack() as stack:
        producer = await stack.enter_async_context(Client(zk_url(c), timeout=60))
        consumers = []
        for member in range(2):
            client = await stack.enter_async_context(Client(zk_url(c), timeout=60))
            sub = await stack.enter_async_context(
                client.subscribe(topic, subscription="workers", mode="shared")
            )

            async def consume(member: int = member, sub: Any = sub) -> None:
                async for msg in sub:
                    got.append((member, msg.value))
                    await msg.ack()

            consumers.append(asyncio.create_task(consume()))
        values = [f"job-{i}".encode() for i in range(n)]
        old = await asyncio.to_thread(c.primary)
        assert old is not None
        if fault.startswith("sigstop"):  # never leave it frozen, whatever fails
            request.addfinalizer(lambda: c.kill(old, signal.SIGCONT))
        for i in range(0, n, 100):
            await producer.publish_many(topic, values[i : i + 100])
            if i == n // 2:
                await asyncio.to_thread(wait_for, lambda: len(got) >= n // 4, 60, "consuming")
                if fault == "zk-cut":
                    c.cut_zk(old)
                else:
                    c.kill(old, signal.SIGKILL if fault == "sigkill" else signal.SIGSTOP)
        if fault == "sigstop-sigkill":  # frozen past its session: killed without a thaw
            assert await asyncio.to_thread(wait_new_primary, c, old) != old
            c.kill(old, signal.SIGKILL)
        await asyncio.to_thread(wait_for, lambda: {v for _, v in got} >= set(values), 60, "all")
        assert await asyncio.to_thread(wait_new_primary, c, old) != old
        if fault in ("sigstop", "zk-cut"):  # back, the old primary steps down, hands out nothing
            if fault == "sigstop":
                c.kill(old, signal.SIGCONT)
            else:
                c.heal_zk(old)
            await asyncio.to_thread(wait_in_isr, c, old)
        last = (await producer.publish(topic, b"end")).ts
        await asyncio.to_thread(
            wait_for,
            lambda: (stored_offset(c, topic, "workers") or 0) >= last,
            60,
            "every record acknowledged at the new primary",
        )
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
    assert {m for m, _ in got} == {0, 1}, "both members took records"
    counts = collections.Counter(v for _, v in got)
    twice = sorted(v for v, k in counts.items() if k > 1)
    assert not twice, f"{len(twice)} records reached the subscription twice, e.g. {twice[:5]}"


async def test_a_shared_member_frozen_across_a_failover_past_the_old_hold_gets_no_duplicate(
    make_cluster: Callable[..., DevCluster], request: pytest.FixtureRequest
) -> None:
    """Member A (a `tritonmq sub` process) is SIGSTOPped holding records; the primary is
    SIGKILLed; A stays frozen until the new primary has served member B for longer than
    `shared_resume_hold_s` (1 s). The chaos run's case (an 8.9 s pause): the new primary
    knew from the replication stream what A held and acknowledged and kept it for A
    (docs/replication.md S7). Each record reaches one member, once."""
    c = make_cluster(settings={"offset_interval": 1.0})
    topic, n = "jobs", 3000
    values = [f"job-{i}" for i in range(n)]
    got_b: list[str] = []
    async with Client(zk_url(c), timeout=60) as producer:
        async with producer.subscribe(topic, subscription="workers", mode="shared"):
            pass  # the subscription exists before anything is published
        a = SharedConsumer(c, topic)
        request.addfinalizer(lambda: a.proc.poll() is None and a.proc.send_signal(signal.SIGCONT))
        try:
            async with Client(zk_url(c), timeout=60) as cb:
                async with cb.subscribe(topic, subscription="workers", mode="shared") as sub:

                    async def consume() -> None:
                        async for msg in sub:
                            got_b.append(msg.value.decode())
                            await msg.ack()

                    task = asyncio.create_task(consume())
                    k = 0
                    while not a.started.is_set():  # A attached: batches alternate A, B
                        assert k < 600, "member A never took a record"
                        await producer.publish(topic, f"warm-{k}".encode())
                        k += 1
                        await asyncio.sleep(0.1)
                    for i in range(0, n // 2, 100):
                        await producer.publish_many(
                            topic, [v.encode() for v in values[i : i + 100]]
                        )
                    await asyncio.to_thread(
                        wait_for, lambda: len(a.values) > 50 and len(got_b) > 50, 60, "both"
                    )
                    a.proc.send_signal(signal.SIGSTOP)
                    old = await asyncio.to_thread(c.primary)
                    assert old is not None
                    c.kill(old, signal.SIGKILL)
                    new = await asyncio.to_thread(wait_new_primary, c, old)
                    elected = asyncio.get_running_loop().time()
                    for i in range(n // 2, n, 100):
                        await producer.publish_many(
                            topic, [v.encode() for v in values[i : i + 100]]
                        )
                    # the frozen member stays away longer than the old 1 s hold, B serves on
                    await asyncio.to_thread(
                        wait_for, lambda: "job-2999" in got_b or len(got_b) > n // 2, 60, "B"
                    )
                    while asyncio.get_running_loop().time() < elected + 3.0:
                        await asyncio.sleep(0.1)  # the fault's duration, not a wait for a result
                    a.proc.send_signal(signal.SIGCONT)
                    last = (await producer.publish(topic, b"end")).ts
                    await asyncio.to_thread(
                        wait_for,
                        lambda: set(values) <= set(a.values) | set(got_b),
                        60,
                        "every job at some member",
                    )
                    await asyncio.to_thread(
                        wait_for,
                        lambda: (stored_offset(c, topic, "workers") or 0) >= last,
                        60,
                        "every record acknowledged at the new primary",
                    )
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
        finally:
            a.proc.send_signal(signal.SIGCONT)
            a.kill()
    assert new != old and a.values and got_b
    counts = collections.Counter(v for v in [*a.values, *got_b] if v.startswith("job-"))
    twice = sorted(v for v, k in counts.items() if k > 1)
    assert not twice, f"{len(twice)} records reached the subscription twice, e.g. {twice[:5]}"
