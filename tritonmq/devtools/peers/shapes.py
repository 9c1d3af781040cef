"""The load shapes of `tritonmq bench --against`, written once for every system.

Each shape uses fresh topics and only the primitives of :class:`~tritonmq.devtools.peers.Conn`:

* ``single``: one publisher issues single ``publish()`` calls at a fixed rate (a burst every
  5 ms), each timed from the call until the system confirms it replicated: p50/p99/p999,
  the first tenth dropped;
* ``batches``: one publisher, batches of 100 records, at most 5,000 records unconfirmed
  (50 batches), from the first send to the last confirmation: msg/s;
* ``e2e``: the same publisher while one subscriber (its own connection) receives, until it
  has the last record: msg/s;
* ``fanout``: the same with ten subscribers, each its own connection, until all ten have
  every record: deliveries/s;
* ``concurrent``: 256 tasks sharing one connection, each awaiting one ``publish()`` after
  another for a fixed time: msg/s and p99.

Systems run one after the other, each on its own fresh servers, round after round
(TritonMQ, NATS, Redis, then again); the table shows each system's median over the rounds
and the ratio TritonMQ / peer.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from tritonmq.devtools.peers import Conn, System

TICK = 0.005  # the fixed-rate publisher's burst interval


@dataclass(frozen=True)
class Sizes:
    size: int = 100  # bytes per record
    rate: int = 5000  # single publishes per second
    seconds: float = 5.0  # of single publishes at that rate, and of concurrent publishers
    records: int = 200_000  # for batches; end to end takes half, fan-out a tenth
    batch: int = 100
    unconfirmed: int = 5000  # records in batches not yet confirmed, at most
    subscribers: int = 10  # fan-out
    publishers: int = 256  # concurrent
    rounds: int = 2

    @property
    def e2e_records(self) -> int:
        return max(self.batch, self.records // 2)

    @property
    def fanout_records(self) -> int:
        return max(self.batch, self.records // 10)


# --quick: every shape for about a second: keeps the harness working (a CI test), measures nothing
QUICK = Sizes(rate=1000, seconds=1.0, records=5000, rounds=1)


def quick(sizes: Sizes) -> Sizes:
    return replace(QUICK, size=sizes.size)


# (key, label) per row; a shape's rows start with its name
def rows(s: Sizes) -> list[tuple[str, str]]:
    return [
        ("single_p50_ms", f"single publish at {s.rate:,} msg/s, p50 ms"),
        ("single_p99_ms", f"single publish at {s.rate:,} msg/s, p99 ms"),
        ("single_p999_ms", f"single publish at {s.rate:,} msg/s, p99.9 ms"),
        (
            "batches_msgs_per_s",
            f"batches of {s.batch}, <= {s.unconfirmed:,} unconfirmed, msg/s",
        ),
        ("e2e_msgs_per_s", "end to end 1->1, msg/s"),
        ("fanout_deliveries_per_s", f"fan-out 1->{s.subscribers}, deliveries/s"),
        ("concurrent_msgs_per_s", f"{s.publishers} concurrent publishers, msg/s"),
        ("concurrent_p99_ms", f"{s.publishers} concurrent publishers, p99 ms"),
    ]


HIGHER_IS_BETTER = {
    "batches_msgs_per_s",
    "e2e_msgs_per_s",
    "fanout_deliveries_per_s",
    "concurrent_msgs_per_s",
}


def pct(data: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``data``."""
    if not data:
        return float("nan")
    s = sorted(data)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


class Topics:
    """Fresh topic names for one system's round; each created before use, dropped after."""

    def __init__(self, admin: Conn, prefix: str) -> None:
        self.admin = admin
        self.prefix = prefix
        self.made: list[str] = []
        self.count = 0

    async def new(self, shape: str) -> str:
        self.count += 1
        topic = f"{self.prefix}.{shape}.{self.count}"
        await self.admin.create(topic)
        self.made.append(topic)
        return topic

    async def drop_all(self) -> None:
        """Drop what the shape made, so the next one starts on servers holding nothing."""
        while self.made:
            await self.admin.drop(self.made.pop())


async def _pipeline(conn: Conn, topic: str, n: int, s: Sizes) -> None:
    """``n`` records in batches of ``s.batch``, at most ``s.unconfirmed`` unconfirmed."""
    payload = b"x" * s.size
    pending: deque[asyncio.Future[None]] = deque()
    most = max(1, s.unconfirmed // s.batch)
    for start in range(0, n, s.batch):
        if len(pending) >= most:
            await pending.popleft()
        values = [payload] * min(s.batch, n - start)
        pending.append(asyncio.ensure_future(conn.publish_batch(topic, values)))
    await asyncio.gather(*pending)


async def single(conn: Conn, topics: Topics, s: Sizes) -> dict[str, float]:
    topic = await topics.new("single")
    payload = b"x" * s.size
    for _ in range(10):  # warm-up
        await conn.publish(topic, payload)
    total = max(10, int(s.rate * s.seconds))
    per_tick = max(1, round(s.rate * TICK))
    lat = [0.0] * total

    async def one(i: int, t0: float) -> None:
        await conn.publish(topic, payload)
        lat[i] = time.perf_counter() - t0

    tasks = []
    next_at = time.perf_counter()
    i = 0
    while i < total:
        for _ in range(min(per_tick, total - i)):
            tasks.append(asyncio.ensure_future(one(i, time.perf_counter())))
            i += 1
        next_at += TICK
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    await asyncio.gather(*tasks)
    kept = [x * 1000 for x in lat[total // 10 :]]
    return {
        "single_p50_ms": pct(kept, 50),
        "single_p99_ms": pct(kept, 99),
        "single_p999_ms": pct(kept, 99.9),
    }


async def batches(conn: Conn, topics: Topics, s: Sizes) -> dict[str, float]:
    await _pipeline(conn, await topics.new("warm"), min(s.records, 5 * s.unconfirmed), s)
    topic = await topics.new("batches")
    t0 = time.perf_counter()
    await _pipeline(conn, topic, s.records, s)
    return {"batches_msgs_per_s": s.records / (time.perf_counter() - t0)}


async def _delivered(
    system: System, pub: Conn, topics: Topics, s: Sizes, shape: str, subscribers: int, n: int
) -> float:
    """Seconds from the first publish until each of ``subscribers`` has ``n`` records."""
    topic = await topics.new(shape)
    subs = [await system.connect() for _ in range(subscribers)]
    stops: list[Callable[[], Awaitable[None]]] = []
    loop = asyncio.get_running_loop()
    left = [subscribers]
    done: asyncio.Future[float] = loop.create_future()

    def failed(e: BaseException) -> None:
        if not done.done():
            done.set_exception(e)

    try:
        for sub in subs:
            got = [0]

            def counted(k: int, got: list[int] = got) -> None:
                got[0] += k
                if got[0] >= n and got[0] - k < n:
                    left[0] -= 1
                    if not left[0] and not done.done():
                        done.set_result(time.perf_counter())

            stops.append(await sub.subscribe(topic, counted, failed))
        t0 = time.perf_counter()
        await _pipeline(pub, topic, n, s)
        return await done - t0
    finally:
        for stop in stops:
            await stop()
        for sub in subs:
            await sub.close()


async def e2e(system: System, conn: Conn, topics: Topics, s: Sizes) -> dict[str, float]:
    await _pipeline(conn, await topics.new("warm"), min(s.records, 5 * s.unconfirmed), s)
    n = s.e2e_records
    seconds = await _delivered(system, conn, topics, s, "e2e", 1, n)
    return {"e2e_msgs_per_s": n / seconds}


async def fanout(system: System, conn: Conn, topics: Topics, s: Sizes) -> dict[str, float]:
    n = s.fanout_records
    seconds = await _delivered(system, conn, topics, s, "fanout", s.subscribers, n)
    return {"fanout_deliveries_per_s": s.subscribers * n / seconds}


async def concurrent(conn: Conn, topics: Topics, s: Sizes) -> dict[str, float]:
    topic = await topics.new("concurrent")
    payload = b"x" * s.size
    # warm-up: each publisher once (a pooled client opens its connections here)
    await asyncio.gather(*(conn.publish(topic, payload) for _ in range(s.publishers)))
    lat: list[float] = []
    stop_at = time.perf_counter() + s.seconds

    async def publisher() -> None:
        while (t := time.perf_counter()) < stop_at:
            await conn.publish(topic, payload)
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(publisher() for _ in range(s.publishers)))
    elapsed = time.perf_counter() - t0
    return {
        "concurrent_msgs_per_s": len(lat) / elapsed,
        "concurrent_p99_ms": pct([x * 1000 for x in lat], 99),
    }


SHAPES = ("single", "batches", "e2e", "fanout", "concurrent")


async def measure(
    system: System, s: Sizes, round_no: int, phase: Callable[[str], None]
) -> dict[str, float]:
    """Every shape once against ``system``'s running servers."""
    out: dict[str, float] = {}
    admin = await system.connect()
    conn = await system.connect()
    topics = Topics(admin, f"bench.r{round_no}")
    limit = 60 + 20 * s.seconds + s.records / 1000  # seconds a shape may take, at most
    try:
        for shape in SHAPES:
            phase(f"bench: round {round_no}/{s.rounds}: {system.title}: {shape}")
            async with asyncio.timeout(limit):
                if shape == "single":
                    out |= await single(conn, topics, s)
                elif shape == "batches":
                    out |= await batches(conn, topics, s)
                elif shape == "e2e":
                    out |= await e2e(system, conn, topics, s)
                elif shape == "fanout":
                    out |= await fanout(system, conn, topics, s)
                else:
                    out |= await concurrent(conn, topics, s)
            await topics.drop_all()
    finally:
        await conn.close()
        await admin.close()
    return out
