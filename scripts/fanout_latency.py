"""Publish latency on one topic with N unnamed subscribers on one broker (issue 26, fan-out).

    .venv/bin/python scripts/fanout_latency.py 1 1000

Starts its own ZooKeeper and a one-broker dev cluster; the subscribers are raw
tritonmq.v1 connections (at most 500 subscriptions each) that read and acknowledge
everything; a Client publishes one small record at a time and the script prints the
median and p99 acknowledgement latency for each N. A measurement, not a test."""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time

import websockets

from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

PER_CONN = 500
PUBLISHES = 300


async def _subscriber(url: str, first_sid: int, n: int, ready: asyncio.Event) -> None:
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None) as ws:  # type: ignore[list-item]
        await ws.send(codec.packb({"op": "hello"}))
        for sid in range(first_sid, first_sid + n):
            await ws.send(codec.packb({"op": "sub", "sid": sid, "topic": "hot", "from": "latest"}))
        oks = 0
        while True:
            frame = codec.decode_broker(await ws.recv())
            if frame["op"] == "subok":
                oks += 1
                if oks == n:
                    ready.set()
            elif frame["op"] == "deliver":
                ts = frame["records"][-1][0]
                await ws.send(codec.packb({"op": "ack", "sid": frame["sid"], "ts": ts}))


async def measure(n: int, zk_url: str, url: str) -> tuple[float, float]:
    tasks, readies = [], []
    for first in range(0, n, PER_CONN):
        ready = asyncio.Event()
        readies.append(ready)
        tasks.append(
            asyncio.create_task(_subscriber(url, first + 1, min(PER_CONN, n - first), ready))
        )
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 120)
    lat = []
    async with Client(zk_url) as c:
        for i in range(PUBLISHES):
            t0 = time.perf_counter()
            await c.publish("hot", b"x%d" % i)
            lat.append(time.perf_counter() - t0)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lat.sort()
    return statistics.median(lat) * 1000, lat[int(len(lat) * 0.99)] * 1000


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or [1, 1000]
    with tempfile.TemporaryDirectory() as tmp:
        settings = (
            f"[broker]\nreplicas = 1\nmin_insync = 1\nmax_subscriptions_per_conn = {PER_CONN}\n"
        )
        config = f"{tmp}/broker.toml"
        with open(config, "w") as f:
            f.write(settings)
        with DevCluster(1, 1, workdir=tmp, config=config) as cluster:
            cluster.wait_healthy()
            zk_url = f"zk://{cluster.zk_hosts}{cluster.chroot}"
            url = cluster.status()["groups"]["g1"]["primary_url"]
            for n in counts:
                med, p99 = asyncio.run(measure(n, zk_url, url))
                print(f"subscribers={n:6d} publish latency median={med:7.2f} ms p99={p99:7.2f} ms")


if __name__ == "__main__":
    main()
