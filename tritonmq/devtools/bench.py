"""`tritonmq bench`: throughput and latency on a real local cluster, 100-byte records.

Measures, each with fresh topics:
* acknowledged publish: records/s from the first send to the last ``puback``
  (every record on all three replicas before it counts);
* end to end: records/s from the first send until a subscriber has them all;
* latency at a fixed rate: publish-to-delivery p50/p99 while publishing at ``rate``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tritonmq.client import Client


@dataclass
class BenchResult:
    records: int
    size: int
    publish_acked_msgs_per_s: float
    e2e_msgs_per_s: float
    latency_rate: int
    latency_p50_us: float
    latency_p99_us: float
    latency_samples: int


async def _publish(client: Client, topic: str, n: int, size: int, chunk: int) -> None:
    payload = b"x" * size
    pending: list[asyncio.Future[Any]] = []
    for start in range(0, n, chunk):
        pending.append(
            asyncio.ensure_future(client.publish_many(topic, [payload] * min(chunk, n - start)))
        )
        if len(pending) >= 16:
            await pending.pop(0)
    await asyncio.gather(*pending)


async def _acked(url: str, n: int, size: int) -> float:
    async with Client(url, max_in_flight=32) as c:
        await _publish(c, "bench.warmup", min(n, 20_000), size, 1000)
        t0 = time.perf_counter()
        await _publish(c, "bench.acked", n, size, 1000)
        return n / (time.perf_counter() - t0)


async def _e2e(url: str, n: int, size: int) -> float:
    async with Client(url) as pub, Client(url) as subc:
        async with subc.subscribe("bench.e2e", from_="latest") as sub:
            done = asyncio.get_running_loop().create_future()

            async def consume() -> None:
                got = 0
                async for msg in sub:
                    got += 1
                    if got % 500 == 0 or got == n:
                        await msg.ack()
                    if got == n:
                        done.set_result(time.perf_counter())
                        return

            task = asyncio.create_task(consume())
            t0 = time.perf_counter()
            await _publish(pub, "bench.e2e", n, size, 1000)
            async with asyncio.timeout(120):
                t1 = await done
            task.cancel()
            return n / (t1 - t0)


async def _latency(url: str, rate: int, seconds: float, size: int) -> list[float]:
    tick = 0.005
    per_tick = max(1, round(rate * tick))
    samples: list[float] = []
    async with Client(url) as pub, Client(url) as subc:
        async with subc.subscribe("bench.latency", from_="latest") as sub:
            total = int(rate * seconds)
            stop = asyncio.Event()

            async def consume() -> None:
                async for msg in sub:
                    sent = int.from_bytes(msg.value[:8], "big")
                    samples.append((time.perf_counter_ns() - sent) / 1000)
                    await msg.ack()
                    if len(samples) >= total:
                        stop.set()
                        return

            task = asyncio.create_task(consume())
            pad = b"x" * max(0, size - 8)
            next_at = time.perf_counter()
            sent = 0
            while sent < total:
                for _ in range(min(per_tick, total - sent)):
                    asyncio.ensure_future(
                        pub.publish(
                            "bench.latency", time.perf_counter_ns().to_bytes(8, "big") + pad
                        )
                    )
                    sent += 1
                next_at += tick
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            async with asyncio.timeout(30):
                await stop.wait()
            task.cancel()
    return samples


def _pct(data: list[float], q: float) -> float:
    if not data:
        return float("nan")
    return (
        statistics.quantiles(data, n=100, method="inclusive")[int(q) - 1]
        if len(data) > 1
        else data[0]
    )


async def run_bench(
    url: str,
    records: int,
    size: int,
    rate: int,
    seconds: float,
    on_phase: Callable[[str], None] | None = None,
) -> BenchResult:
    """``on_phase``: told what is being measured as each run starts (a progress display)."""
    # The load generator holds hundreds of thousands of acks and futures; keep its
    # own full collections out of the latency it measures (the brokers do the same).
    from tritonmq.broker.main import tune_gc

    phase = on_phase or (lambda _what: None)
    tune_gc()
    phase(f"bench: acknowledged publish of {records:,} records")
    acked = await _acked(url, records, size)
    phase(f"bench: end to end, {records:,} records")
    e2e = await _e2e(url, records, size)
    phase(f"bench: latency at {rate:,} msg/s for {seconds:g}s")
    lat = await _latency(url, rate, seconds, size)
    lat = lat[len(lat) // 10 :]  # drop the first tenth: connection and JIT-free warm-up
    return BenchResult(records, size, acked, e2e, rate, _pct(lat, 50), _pct(lat, 99), len(lat))


def write_json(result: BenchResult, path: str, extra: dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump({**asdict(result), **extra}, f, indent=2)
