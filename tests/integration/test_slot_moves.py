"""Slot moves for producers on a real 2 groups x 3 cluster (docs/replication.md M2, M7, M8):
`tritonmq slots move` as an operator runs it, producers that keep publishing across it,
and primaries SIGKILLed in the middle of it. What a user checks: every acknowledged record
is stored exactly once, in the group that held its era, and each producer's order holds
across the eras."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
import websockets

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.coord.slots import apply_slot_step, fetch_slot_histories, read_slot_histories
from tritonmq.coord.zkclient import new_client
from tritonmq.core.slothistory import SlotHistory, SlotState, begin_move
from tritonmq.core.slots import slot_of
from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration

TRITONMQ = [sys.executable, "-m", "tritonmq"]
SLOTS = 64


@pytest.fixture
def two_groups(make_cluster: Any) -> DevCluster:
    # records stay 5 minutes, so each group's share of a moved topic can be read back
    return make_cluster(groups=2, settings={"retention_s": 300.0})  # type: ignore[no-any-return]


@pytest.fixture
def two_groups_paging(make_cluster: Any) -> DevCluster:
    """As ``two_groups``, with a handover two uuids a page: a slot of a few records is
    handed over in several pages, as a hot slot's millions are (replication.md M2.3)."""
    settings = {"retention_s": 300.0, "dedup_page": 2}
    return make_cluster(groups=2, settings=settings)  # type: ignore[no-any-return]


def cli(c: DevCluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    where = ["--zk", str(c.zk_hosts), "--chroot", c.chroot]
    return subprocess.run(
        [*TRITONMQ, "slots", *args, *where],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
    )


def cli_rebalance(c: DevCluster, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--zk", str(c.zk_hosts), "--chroot", c.chroot]
    return subprocess.run(
        [*TRITONMQ, "rebalance", *args, *where], capture_output=True, text=True, timeout=300
    )


def histories(c: DevCluster) -> tuple[SlotHistory, ...]:
    read = fetch_slot_histories(str(c.zk_hosts), c.chroot)
    assert read is not None
    return read.slots


def topics_in(slots: Iterable[int], per_slot: int) -> list[str]:
    want = {n: per_slot for n in slots}
    out = []
    for i in range(100_000):
        t = f"m-{i}"
        n = slot_of(t, SLOTS)
        if want.get(n, 0) > 0:
            want[n] -= 1
            out.append(t)
        if not any(want.values()):
            return out
    raise AssertionError("not enough topics")


TLS_CA: dict[str, Any] = {}  # wss:// clusters: the CA to trust (set by the TLS test)


async def ask(url: str, frame: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    ssl = None
    if url.startswith("wss://"):
        import ssl as ssl_

        ssl = ssl_.create_default_context(cafile=TLS_CA["file"])
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL], ssl=ssl) as ws:  # type: ignore[list-item]
        await ws.send(codec.packb(frame))
        return codec.decode_broker(await asyncio.wait_for(ws.recv(), timeout))


async def stored(c: DevCluster, group: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    """(ts, uuid, value) of every record of ``topic`` ``group``'s primary retains."""
    out: list[tuple[int, bytes, bytes]] = []
    start = 1
    while True:
        url = group_info(c, group)["primary_url"]
        got = await ask(
            url,
            {"op": "fetch", "id": 1, "topic": topic, "from": start, "to": 2**53 - 1, "max": 10_000},
        )
        if got["op"] == "error":
            if got["code"] in ("NOT_PRIMARY", "UNAVAILABLE"):
                await asyncio.sleep(0.2)
                continue
            raise AssertionError(f"fetch of {topic} at {group}: {got}")
        recs = got["records"]
        out += [(r[0], r[1], r[3]) for r in recs]
        if not recs:
            return out
        start = recs[-1][0] + 1


async def everything(
    c: DevCluster, topic: str, hs: tuple[SlotHistory, ...], groups: Iterable[str] = ("g1", "g2")
) -> list[tuple[int, int, str, bytes, bytes]]:
    """Every stored record of ``topic`` in both groups, as (era, ts, group, uuid, value),
    in the slot's order: by era, then by ts within the era's group (M3)."""
    h = hs[slot_of(topic, SLOTS)]
    held = {h.owner, *(e.group for e in h.history)}  # only they hold records of it
    out = []
    for g in sorted(held & set(groups)):
        for ts, uuid, value in await stored(c, g, topic):
            era = h.era_of(g, ts)
            assert era is not None, f"{topic}: {g} holds ts {ts}, which no era of the slot covers"
            out.append((era, ts, g, uuid, value))
    return sorted(out)


def begin_moves(c: DevCluster, slots: Iterable[int], to: str) -> None:
    """``begin_move`` by CAS, as `tritonmq slots move --no-wait` does it."""
    zk = new_client(str(c.zk_hosts), timeout=2.0, auth=c.zk_auth)
    zk.start(timeout=10)
    try:
        for n in slots:
            apply_slot_step(zk, c.chroot, n, lambda h: begin_move(h, to))
    finally:
        zk.stop()
        zk.close()


def wait_normal(
    c: DevCluster, slots: Iterable[int], timeout: float = 60.0
) -> tuple[SlotHistory, ...]:
    chosen = list(slots)

    def done() -> tuple[SlotHistory, ...] | None:
        hs = histories(c)
        return hs if all(hs[n].state is SlotState.NORMAL for n in chosen) else None

    return wait_for(done, timeout, f"slots {chosen} to be normal again")  # type: ignore[no-any-return]


# --- issue 11, test 3 --------------------------------------------------------------------------


async def test_a_producer_retry_that_straddles_the_seal_is_stored_once(
    two_groups_paging: DevCluster,
) -> None:
    c = two_groups_paging
    [topic] = topics_in([next(n for n, h in enumerate(histories(c)) if h.owner == "g1")], 1)
    n = slot_of(topic, SLOTS)
    old = group_info(c, "g1")["primary_url"]
    first = [[f"a{i}".encode().ljust(16, b"."), None, f"a{i}".encode(), None] for i in range(3)]
    second = [[f"b{i}".encode().ljust(16, b"."), None, f"b{i}".encode(), None] for i in range(3)]
    acked = await ask(old, {"op": "pub", "id": 1, "topic": topic, "records": first})
    assert acked["op"] == "puback" and "eras" not in acked, acked

    # the move begins; the old group refuses the next batch, naming the new group
    r = cli(c, "move", str(n), "--to", "g2", "--no-wait")
    assert r.returncode == 0, r.stderr

    async def old_saw_the_move() -> bool:
        # else `second` can reach it first, be stored in era 0 (legitimately: the move had
        # not begun there) and be answered from dedup with that ts on every resend
        meta = await ask(old, {"op": "meta", "id": 9})
        return str(n) in ((meta.get("slots") or {}).get("moved") or {})

    deadline = time.monotonic() + 30
    while not await old_saw_the_move():
        assert time.monotonic() < deadline, "the old primary never saw the move begin"
        await asyncio.sleep(0.05)
    refused: dict[str, Any] = {}

    async def refused_by_old() -> bool:
        nonlocal refused
        refused = await ask(old, {"op": "pub", "id": 2, "topic": topic, "records": second})
        return refused.get("code") == "WRONG_GROUP"

    deadline = time.monotonic() + 30
    while not await refused_by_old():
        assert time.monotonic() < deadline, refused
        await asyncio.sleep(0.05)
    assert refused["group"] == "g2" and refused["retriable"] is True

    # resent with the same uuids to the new group: refused retriably until it completes
    new_url = group_info(c, "g2")["primary_url"]
    deadline = time.monotonic() + 30
    while True:
        got = await ask(new_url, {"op": "pub", "id": 2, "topic": topic, "records": second})
        if got["op"] == "puback":
            break
        assert got["code"] == "UNAVAILABLE" and got["retriable"], got
        assert time.monotonic() < deadline, got
        await asyncio.sleep(0.05)
    [h] = [histories(c)[n]]
    assert (h.owner, h.era, h.state) == ("g2", 1, SlotState.NORMAL)

    # retries of either batch, to either group, are answered with the original positions
    again = await ask(new_url, {"op": "pub", "id": 3, "topic": topic, "records": second})
    assert again["ts"] == got["ts"] and "eras" not in again
    old_again = await ask(new_url, {"op": "pub", "id": 4, "topic": topic, "records": first})
    assert old_again["ts"] == acked["ts"] and old_again["eras"] == (0, 0, 0), old_again
    at_old = await ask(old, {"op": "pub", "id": 5, "topic": topic, "records": first})
    assert at_old["ts"] == acked["ts"] and at_old["eras"] == (0, 0, 0), at_old

    async with Client(zk_url(c)) as client:  # the Python client says where they are
        acks = await client.publish_batch(topic, [(r[0], r[2], None, None) for r in first])
    assert [(a.ts, a.era, a.group) for a in acks] == [(t, 0, "g2") for t in acked["ts"]]

    records = await everything(c, topic, histories(c))
    assert [(e, g, v) for e, _, g, _, v in records] == [
        (0, "g1", b"a0"),
        (0, "g1", b"a1"),
        (0, "g1", b"a2"),
        (1, "g2", b"b0"),
        (1, "g2", b"b1"),
        (1, "g2", b"b2"),
    ]
    assert [ts for _, ts, g, _, _ in records if g == "g1"] == list(acked["ts"])
    assert [ts for _, ts, g, _, _ in records if g == "g2"] == list(got["ts"])


# --- producers across moves (issue 11, tests 1 and 2, the producers' half) ---------------------


class Producers:
    """``n`` clients, each publishing numbered records round the topics one small batch at a
    time (awaiting each: a producer's order is its program order), until stopped."""

    def __init__(self, c: DevCluster, topics: list[str], n: int = 4) -> None:
        self.c, self.topics, self.n = c, topics, n
        self.ca_file = c.ca_file if c.tls else None
        self.acked: dict[str, set[bytes]] = {t: set() for t in topics}
        self.errors: list[BaseException] = []
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Producers:
        self.tasks = [asyncio.create_task(self._run(p)) for p in range(self.n)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    async def _run(self, p: int) -> None:
        seq = 0
        async with Client(zk_url(self.c), ca_file=self.ca_file) as client:
            while not self.stop.is_set():
                for t in self.topics:
                    values = [f"p{p}:{seq + i}".encode() for i in range(3)]
                    seq += 3
                    try:
                        await client.publish_many(t, values)
                    except Exception as e:  # the application would see it: the test fails
                        self.errors.append(e)
                        return
                    self.acked[t].update(values)
                await asyncio.sleep(0.005)

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())


async def wait_acked(producers: Producers, more: int, timeout: float = 30.0) -> None:
    """Until ``more`` records more than now are acknowledged (the producers are live)."""
    want = producers.count() + more
    deadline = time.monotonic() + timeout
    while producers.count() < want:
        assert not producers.errors, producers.errors
        assert time.monotonic() < deadline, f"{producers.count()} of {want} acknowledged"
        await asyncio.sleep(0.05)


async def check_stored_once_in_order(
    c: DevCluster, producers: Producers, groups: Iterable[str] = ("g1", "g2")
) -> int:
    """Every acknowledged record is stored exactly once (in the group of its era), nothing
    is stored twice, and each producer's records follow its order across the eras."""
    assert not producers.errors, producers.errors
    hs = histories(c)
    total = 0
    for t in producers.topics:
        records = await everything(c, t, hs, groups)
        values = [v for *_, v in records]
        dups = {v for v in values if values.count(v) > 1}
        assert not dups, f"{t}: stored twice: {sorted(dups)[:5]}"
        lost = producers.acked[t] - set(values)
        assert not lost, f"{t}: acknowledged, not stored: {sorted(lost)[:5]}"
        last: dict[bytes, int] = {}
        for v in values:  # in the slot's order: era, then ts
            p, n = v.split(b":")
            assert int(n) > last.get(p, -1), f"{t}: {v!r} after {p!r}:{last[p]}"
            last[p] = int(n)
        total += len(values)
    return total


async def test_producers_on_many_topics_lose_nothing_while_slots_move_back_and_forth(
    two_groups: DevCluster,
) -> None:
    c = two_groups
    hs = histories(c)
    g1_slots = [n for n, h in enumerate(hs) if h.owner == "g1"][:2]
    g2_slots = [n for n, h in enumerate(hs) if h.owner == "g2"][:2]
    topics = topics_in(g1_slots + g2_slots, 3)
    async with Producers(c, topics) as producers:
        await wait_acked(producers, 200)
        for round_ in range(2):  # g1's slots to g2 and g2's to g1, then back
            for slots_, to in ((g1_slots, "g2"), (g2_slots, "g1")):
                to = to if round_ == 0 else ("g1" if to == "g2" else "g2")
                r = await asyncio.to_thread(cli, c, "move", *map(str, slots_), "--to", to)
                assert r.returncode == 0, (r.stdout, r.stderr)
                assert r.stdout.splitlines() == [f"slot {n}: moved (owner {to})" for n in slots_]
                await wait_acked(producers, 100)
    hs = histories(c)
    assert all(hs[n].era == 2 and hs[n].owner == "g1" for n in g1_slots), hs
    assert all(hs[n].era == 2 and hs[n].owner == "g2" for n in g2_slots), hs
    assert await check_stored_once_in_order(c, producers) >= producers.count()
    # each topic has records of several eras, in both groups
    records = await everything(c, topics[0], hs)
    assert {e for e, *_ in records} == {0, 1, 2}


@pytest.mark.parametrize("victim", ["old", "new"])
async def test_a_primary_killed_mid_move_loses_and_duplicates_nothing(
    two_groups: DevCluster, victim: str
) -> None:
    """SIGKILL of the old group's primary before it sealed the slots, or of the new group's
    before it took them over: the next primary of that group picks the move up (M7), the
    move completes, and every acknowledged record is stored exactly once, in order. The
    victim is frozen (SIGSTOP) before the move begins, so that it dies before its step
    whatever the timing; its successor's log shows it took the step."""
    c = two_groups
    hs = histories(c)
    moved = [n for n, h in enumerate(hs) if h.owner == "g1"][:3]
    topics = topics_in(moved, 3)
    async with Producers(c, topics) as producers:
        await wait_acked(producers, 200)
        killed = c.primary("g1" if victim == "old" else "g2")
        assert killed is not None
        c.kill(killed, signal.SIGSTOP)  # from here on it takes no step of the move
        await asyncio.to_thread(begin_moves, c, moved, "g2")
        await asyncio.sleep(0.3)  # the other group takes its step meanwhile (new: the seal)
        await asyncio.to_thread(c.kill, killed)
        hs = await asyncio.to_thread(wait_normal, c, moved)
        await wait_acked(producers, 200)
    assert all(hs[n].owner == "g2" and hs[n].era == 1 for n in moved), hs
    # the victim's successor took the step it could not
    heir = c.primary("g1" if victim == "old" else "g2")
    assert heir is not None and heir != killed
    step = "sealing slot" if victim == "old" else "completing the move of slot"
    assert step in c.log_tail(heir, 500), c.log_tail(heir, 40)
    await check_stored_once_in_order(c, producers)


# --- rebalance (issue 11, test 4: a group drained, then given its share again) ---------------


async def test_rebalance_drains_a_group_then_spreads_the_slots_while_producers_run(
    make_cluster: Any,
) -> None:
    """3 groups: `rebalance --groups g1,g2 --execute` empties g3 (as before removing it),
    `rebalance --execute` gives it its share back, as it would a group just added. The
    producers' clients follow every move without a restart."""
    c = make_cluster(groups=3, settings={"retention_s": 300.0})
    topics = topics_in(range(0, SLOTS, 4), 1)
    async with Producers(c, topics, n=3) as producers:
        await wait_acked(producers, 200)
        r = await asyncio.to_thread(cli_rebalance, c, "--groups", "g1,g2", "--execute")
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert r.stdout.splitlines()[-1] == "21 slot(s) moved; then g1 32, g2 32, g3 0", r.stdout
        assert {h.owner for h in histories(c)} == {"g1", "g2"}
        await wait_acked(producers, 100)
        r = await asyncio.to_thread(cli_rebalance, c, "--execute", "--json")
        assert r.returncode == 0, (r.stdout, r.stderr)
        out = json.loads(r.stdout)
        assert out["after"] == {"g1": 22, "g2": 21, "g3": 21}
        assert {o["outcome"] for o in out["outcomes"]} == {"moved"}
        await wait_acked(producers, 100)
    hs = histories(c)
    assert sorted(h.owner for h in hs).count("g3") == 21
    await check_stored_once_in_order(c, producers, groups=("g1", "g2", "g3"))


async def test_a_move_between_groups_that_speak_tls_hands_over_on_the_tls_replication_wire(
    make_cluster: Any,
) -> None:
    """wss:// everywhere: the new primary asks the old group over TLS (verified with the
    cluster's CA), with the cluster proof, and the move completes under producers."""
    c = make_cluster(groups=2, settings={"retention_s": 300.0}, tls=True)
    TLS_CA["file"] = c.ca_file
    moved = [n for n, h in enumerate(histories(c)) if h.owner == "g1"][:2]
    async with Producers(c, topics_in(moved, 2), n=2) as producers:
        await wait_acked(producers, 100)
        r = await asyncio.to_thread(cli, c, "move", *map(str, moved), "--to", "g2")
        assert r.returncode == 0, (r.stdout, r.stderr)
        await wait_acked(producers, 100)
    await check_stored_once_in_order(c, producers)


def rates_seen(c: DevCluster, slots: list[int]) -> bool:
    """Every one of ``slots`` shows a publish rate: a primary's rate is over its closed
    one-second samples, so right after the producers began it may still be 0, and a plan by
    rate then moves nothing (seen in a fresh-clone CI run whose producers were quick)."""
    r = cli(c, "--json")
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows = {row["slot"]: row for row in json.loads(r.stdout)["slots"]}
    return all((rows[n]["rate"] or 0) > 0 for n in slots)


async def test_rebalance_by_rate_moves_a_hot_slot_to_the_idle_group(two_groups: DevCluster) -> None:
    c = two_groups
    hot = [n for n, h in enumerate(histories(c)) if h.owner == "g1"][:2]
    async with Producers(c, topics_in(hot, 1), n=2) as producers:
        await wait_acked(producers, 300)
        await asyncio.to_thread(wait_for, lambda: rates_seen(c, hot), 30, "both hot slots' rates")
        r = await asyncio.to_thread(cli_rebalance, c, "--by", "rate", "--json")
        assert r.returncode == 0, (r.stdout, r.stderr)
        out = json.loads(r.stdout)
        [move] = out["moves"]
        assert move["slot"] in hot and (move["from"], move["to"]) == ("g1", "g2"), out
        assert out["rate_after"]["g2"] > 0 and out["executed"] is False
        r = await asyncio.to_thread(cli_rebalance, c, "--by", "rate", "--execute", "--json")
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert [o["outcome"] for o in json.loads(r.stdout)["outcomes"]] == ["moved"]
        await wait_acked(producers, 100)
    assert sorted(histories(c)[n].owner for n in hot) == ["g1", "g2"]
    await check_stored_once_in_order(c, producers)


# --- readers across moves (issue 11, tests 1 and 2, the readers' half) ---------------------


class Readers:
    """One client with a subscription from the start of each topic (unnamed, or ``name``
    in ``mode`` with ``members`` members per topic), keeping every value in the order the
    application got it, acknowledging each."""

    def __init__(
        self,
        c: DevCluster,
        topics: list[str],
        name: str | None = None,
        mode: str = "broadcast",
        members: int = 1,
    ) -> None:
        self.c, self.topics = c, topics
        self.name, self.mode, self.members = name, mode, members
        self.got: dict[str, list[bytes]] = {t: [] for t in topics}
        self.errors: list[BaseException] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.client: Client | None = None

    async def __aenter__(self) -> Readers:
        self.client = await Client(zk_url(self.c)).connect()
        each = [t for t in self.topics for _ in range(self.members)]
        ready = [asyncio.Event() for _ in each]
        self.tasks = [
            asyncio.create_task(self._read(t, e)) for t, e in zip(each, ready, strict=True)
        ]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 30)
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
            sub_ = self.client.subscribe(topic, self.name, from_="earliest", mode=self.mode)
            async with sub_ as sub:
                ready.set()
                async for msg in sub:
                    self.got[topic].append(msg.value)
                    await msg.ack()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the application would see it: the test fails
            self.errors.append(e)
            ready.set()

    async def caught_up(self, producers: Producers, timeout: float = 60.0) -> None:
        """Until every record the producers had acknowledged reached the application."""
        deadline = time.monotonic() + timeout
        while True:
            assert not self.errors, self.errors
            missing = {t: producers.acked[t] - set(self.got[t]) for t in self.topics}
            if not any(missing.values()):
                return
            left = sum(map(len, missing.values()))
            assert time.monotonic() < deadline, (
                f"{self.name or 'unnamed'}: {left} acknowledged records never delivered: "
                f"{ {t: (len(m), len(self.got[t])) for t, m in missing.items()} }"
            )
            await asyncio.sleep(0.05)


async def check_read_once_in_order(c: DevCluster, readers: Readers) -> None:
    """Each topic's reader got exactly the slot's records, in the slot's order (era, then
    ts): no gap, nothing twice."""
    hs = histories(c)
    for t in readers.topics:
        stored_values = [v for *_, v in await everything(c, t, hs)]
        got = readers.got[t]
        assert len(got) == len(set(got)), f"{t}: delivered twice: {len(got) - len(set(got))}"
        assert got == stored_values, f"{t}: {len(got)} delivered, {len(stored_values)} stored"


async def test_an_unnamed_subscriber_reads_every_record_once_in_order_across_moves(
    two_groups: DevCluster,
) -> None:
    c = two_groups
    hs = histories(c)
    g1_slot = next(n for n, h in enumerate(hs) if h.owner == "g1")
    g2_slot = next(n for n, h in enumerate(hs) if h.owner == "g2")
    topics = topics_in([g1_slot, g2_slot], 2)
    async with Readers(c, topics) as readers:
        async with Producers(c, topics, n=3) as producers:
            await wait_acked(producers, 100)
            for to1, to2 in (("g2", "g1"), ("g1", "g2")):
                for n, to in ((g1_slot, to1), (g2_slot, to2)):
                    r = await asyncio.to_thread(cli, c, "move", str(n), "--to", to)
                    assert r.returncode == 0, (r.stdout, r.stderr)
                    await wait_acked(producers, 60)
        await readers.caught_up(producers)
        await check_stored_once_in_order(c, producers)
        await check_read_once_in_order(c, readers)
    assert histories(c)[g1_slot].era == 2


def check_shared_once(readers: Readers, producers: Producers) -> None:
    """Every acknowledged record reached one member of the shared subscription, once."""
    for t in readers.topics:
        got = readers.got[t]
        twice = {v for v in got if got.count(v) > 1}
        assert not twice, f"{t}: {len(twice)} record(s) reached members twice: {sorted(twice)[:3]}"
        assert producers.acked[t] <= set(got)


@contextlib.asynccontextmanager
async def three_readers(
    c: DevCluster, topics: list[str]
) -> AsyncIterator[tuple[Readers, Readers, Readers]]:
    """An unnamed, a durable broadcast ("audit") and a durable shared ("work", two
    members) subscription of ``topics``."""
    async with (
        Readers(c, topics) as unnamed,
        Readers(c, topics, "audit") as durable,
        Readers(c, topics, "work", "shared", members=2) as shared,
    ):
        yield unnamed, durable, shared


async def check_readers(
    c: DevCluster, producers: Producers, readers: tuple[Readers, Readers, Readers]
) -> None:
    """Each acknowledged record stored once in its producer's order, read once in order by
    the unnamed and the broadcast subscription, and once by one shared member."""
    unnamed, durable, shared = readers
    for r in readers:
        await r.caught_up(producers)
    await check_stored_once_in_order(c, producers)
    await check_read_once_in_order(c, unnamed)
    await check_read_once_in_order(c, durable)
    check_shared_once(shared, producers)


async def test_durable_broadcast_and_shared_subscriptions_get_every_record_once_across_moves(
    two_groups: DevCluster,
) -> None:
    """Issue 11, test 1 (readers): an unnamed, a durable broadcast and a durable shared
    subscription (two members) on moved topics while producers publish and slots move
    back and forth: the unnamed and the broadcast one get the slot's records exactly once
    in its order, the shared one each record once at one member."""
    c = two_groups
    hs = histories(c)
    g1_slot = next(n for n, h in enumerate(hs) if h.owner == "g1")
    g2_slot = next(n for n, h in enumerate(hs) if h.owner == "g2")
    topics = topics_in([g1_slot, g2_slot], 2)
    async with three_readers(c, topics) as readers:
        async with Producers(c, topics, n=3) as producers:
            await wait_acked(producers, 100)
            for to1, to2 in (("g2", "g1"), ("g1", "g2")):
                for n, to in ((g1_slot, to1), (g2_slot, to2)):
                    r = await asyncio.to_thread(cli, c, "move", str(n), "--to", to)
                    assert r.returncode == 0, (r.stdout, r.stderr)
                    await wait_acked(producers, 60)
        await check_readers(c, producers, readers)
    assert histories(c)[g1_slot].era == 2


def kill_once_sealed(
    c: DevCluster, slots: Iterable[int], victim: str, timeout: float = 60.0
) -> None:
    """SIGKILL ``victim`` (the new group's frozen primary) as soon as the old group sealed
    a slot of ``slots``, so that it dies between the old group's step and its own, well
    before its session ends and a successor could take its step (the old group seals one
    slot at a time). A slot that completed first fails the test: the kill would not have
    landed in the move."""
    chosen = list(slots)
    zk = new_client(str(c.zk_hosts), timeout=2.0, auth=c.zk_auth)
    zk.start(timeout=10)
    try:
        deadline = time.monotonic() + timeout
        while True:
            read = read_slot_histories(zk, c.chroot)
            assert read is not None
            states = {n: read.slots[n].state for n in chosen}
            done = [n for n, s in states.items() if s is SlotState.NORMAL]
            assert not done, f"slots {done} completed before the new primary was killed"
            if SlotState.SEALED in states.values():
                c.kill(victim)
                return
            assert time.monotonic() < deadline, f"no slot sealed: {states}"
            time.sleep(0.01)
    finally:
        zk.stop()
        zk.close()


def outcome(h: SlotHistory, old: str, new: str) -> str:
    """What became of a move from ``old`` (era 0) to ``new``, in words for a message."""
    if (h.owner, h.era, h.state) == (new, 1, SlotState.NORMAL):
        return "completed"
    if (h.owner, h.era, h.state) == (old, 0, SlotState.NORMAL):
        return "rolled back"
    return f"neither: owner {h.owner}, era {h.era}, {h.state.value}"


@pytest.mark.parametrize("victim", ["old", "new"])
async def test_readers_get_every_record_once_when_a_primary_is_killed_mid_move(
    two_groups: DevCluster, victim: str
) -> None:
    """Issue 11, test 2 (readers): a primary is frozen before the slots begin to move,
    so it takes no step of the move, and SIGKILLed in it: the old group's before it
    sealed, or the new group's once the old group sealed a slot, before any completed. Its
    successor takes the step (M7), the move completes, and the unnamed, durable
    broadcast and shared subscriptions still get every record once."""
    c = two_groups
    moved = [n for n, h in enumerate(histories(c)) if h.owner == "g1"][:2]
    topics = topics_in(moved, 2)
    group = "g1" if victim == "old" else "g2"
    async with three_readers(c, topics) as readers:
        async with Producers(c, topics, n=3) as producers:
            await wait_acked(producers, 150)
            killed = c.primary(group)
            assert killed is not None
            c.kill(killed, signal.SIGSTOP)  # from here on it takes no step of the move
            await asyncio.to_thread(begin_moves, c, moved, "g2")
            if victim == "new":  # killed between the old group's step and its own
                await asyncio.to_thread(kill_once_sealed, c, moved, killed)
            else:  # killed before its own step, the first of the move
                await asyncio.to_thread(c.kill, killed)
            hs = await asyncio.to_thread(wait_normal, c, moved)
            await wait_acked(producers, 150)
        outcomes = {n: outcome(hs[n], "g1", "g2") for n in moved}
        assert set(outcomes.values()) == {"completed"}, f"the moves: {outcomes}"
        heir = c.primary(group)
        assert heir is not None and heir != killed
        step = "sealing slot" if victim == "old" else "completing the move of slot"
        assert step in c.log_tail(heir, 500), c.log_tail(heir, 40)
        await check_readers(c, producers, readers)


# --- "earliest" on a moved slot: the oldest record still retained, in any group (M4) -------


async def test_a_new_earliest_subscriber_reads_every_era_still_retained_once_in_order(
    two_groups: DevCluster,
) -> None:
    """Records published, the slot moved to the other group and back (eras 0 and 2 in g1,
    1 in g2), more published each time; a subscriber that arrives afterwards with
    ``from_="earliest"`` gets every record of every era once, in the slot's order: not only
    the current era's."""
    c = two_groups
    n = next(i for i, h in enumerate(histories(c)) if h.owner == "g1")
    topics = topics_in([n], 2)
    async with Producers(c, topics, n=2) as producers:
        await wait_acked(producers, 60)
        for to in ("g2", "g1"):
            r = await asyncio.to_thread(cli, c, "move", str(n), "--to", to)
            assert r.returncode == 0, (r.stdout, r.stderr)
            await wait_acked(producers, 60)
    hs = histories(c)
    assert (hs[n].owner, hs[n].era) == ("g1", 2)
    for t in topics:  # every era holds records of each topic
        assert {e for e, *_ in await everything(c, t, hs)} == {0, 1, 2}, t
    async with Readers(c, topics) as late:
        await late.caught_up(producers)
        await check_read_once_in_order(c, late)


async def fetch_retained(c: DevCluster, group: str, topic: str) -> list[int]:
    """The ts of ``topic`` that ``group``'s primary still retains (skipping what is purged)."""
    url = group_info(c, group)["primary_url"]
    frame = {"op": "fetch", "id": 1, "topic": topic, "from": 1, "to": 2**53 - 1}
    got = await ask(url, {**frame, "max": 10_000, "skip_purged": True})
    assert got["op"] == "fetched", got
    return [r[0] for r in got["records"]]


async def test_earliest_passes_an_era_whose_records_are_all_purged_without_a_purged_error(
    make_cluster: Any,
) -> None:
    """Nothing holds era 0's records (no retention), so the old group purges them after the
    move; a durable subscription created at the new group holds era 1's. A new ``earliest``
    subscriber is sent to era 0's group, finds nothing left there and goes on to era 1: it
    gets era 1's records, and no PURGED (nothing it was handed is missing)."""
    c = make_cluster(groups=2, settings={"ephemeral_grace": 1.0})
    n = next(i for i, h in enumerate(histories(c)) if h.owner == "g1")
    [topic] = topics_in([n], 1)
    async with Client(zk_url(c)) as client:
        await client.publish_many(topic, [f"old-{i}".encode() for i in range(20)])
        r = await asyncio.to_thread(cli, c, "move", str(n), "--to", "g2")
        assert r.returncode == 0, (r.stdout, r.stderr)
        async with client.subscribe(topic, "keep"):  # holds era 1's records at g2
            new = [f"new-{i}".encode() for i in range(20)]
            await client.publish_many(topic, new)
            deadline = time.monotonic() + 30
            while await fetch_retained(c, "g1", topic):  # era 0 is purged: nobody needs it
                assert time.monotonic() < deadline, "g1 kept era 0's records"
                await asyncio.sleep(0.1)
            got: list[bytes] = []

            async def read_earliest() -> None:
                async with client.subscribe(topic, from_="earliest") as sub:
                    async for msg in sub:
                        got.append(msg.value)
                        if len(got) == len(new):
                            return

            await asyncio.wait_for(read_earliest(), 30)
            assert got == new
