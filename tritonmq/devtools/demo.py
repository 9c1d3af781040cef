"""`tritonmq demo`: a 1x3 cluster, a producer and a subscriber, the primary SIGKILLed midway.

It prints what was sent, acknowledged, delivered, lost and duplicated, and how
long publishing paused; it fails (exit 1) if any acknowledged record was lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console

from tritonmq.client import Client
from tritonmq.devtools.cluster import DevCluster, wait_for


@dataclass
class DemoReport:
    sent: int = 0
    acked: int = 0
    delivered: int = 0
    lost: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    pause_s: float = 0.0
    killed: str = ""
    new_primary: str = ""


async def _run(
    cluster: DevCluster,
    records: int,
    rate: int,
    console: Console,
    phase: Callable[[str], None] = lambda _what: None,
) -> DemoReport:
    """``phase``: told what the demo is doing (a status line on a terminal)."""
    rep = DemoReport()
    url = f"zk://{cluster.zk_hosts}{cluster.chroot}"
    acked: dict[bytes, int] = {}
    seen: dict[bytes, int] = {}
    order: list[int] = []
    ack_times: list[float] = []
    batch = 50
    async with Client(url, timeout=60) as pub, Client(url) as subc:
        async with subc.subscribe("demo.orders", from_="latest") as sub:

            async def consume() -> None:
                async for msg in sub:
                    seen[msg.value] = seen.get(msg.value, 0) + 1
                    order.append(msg.ts)
                    await msg.ack()

            consumer = asyncio.create_task(consume())
            killed = False
            t0 = time.perf_counter()
            for start in range(0, records, batch):
                values = [f"order-{i}".encode() for i in range(start, min(start + batch, records))]
                rep.sent += len(values)
                acks = await pub.publish_many("demo.orders", values)
                now = time.perf_counter()
                ack_times.append(now)
                acked.update((v, a.ts) for v, a in zip(values, acks, strict=True))
                phase(f"published {rep.sent:,} of {records:,} records")
                if not killed and rep.sent >= records // 2:
                    killed = True
                    rep.killed = str(await asyncio.to_thread(cluster.primary))
                    console.print(
                        f"[bold red]SIGKILL primary {rep.killed}[/] after {rep.sent} records"
                    )
                    cluster.kill(rep.killed)
                next_at = t0 + rep.sent / rate
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            rep.new_primary = str(await asyncio.to_thread(cluster.primary))
            console.print(f"new primary: {rep.new_primary}; restarting {rep.killed}")
            phase(f"{rep.killed} restarting, catching up and rejoining the ISR")
            await asyncio.to_thread(cluster.restart, rep.killed)
            await asyncio.to_thread(
                wait_for,
                lambda: rep.killed in cluster.status()["groups"]["g1"]["isr"],
                60,
                "rejoin",
            )
            console.print(f"{rep.killed} caught up and is back in the ISR")
            phase("waiting for every acknowledged record to be delivered")
            try:
                await asyncio.to_thread(wait_for, lambda: set(acked) <= set(seen), 30, "delivery")
            except TimeoutError:
                pass
            consumer.cancel()
    rep.acked = len(acked)
    rep.delivered = len(seen)
    rep.lost = len(set(acked) - set(seen))
    rep.duplicates = sum(n - 1 for n in seen.values())
    rep.out_of_order = sum(1 for a, b in zip(order, order[1:], strict=False) if b <= a)
    gaps = [b - a for a, b in zip(ack_times, ack_times[1:], strict=False)]
    rep.pause_s = max(gaps, default=0.0)
    return rep


def run_demo(records: int = 20_000, rate: int = 4000) -> int:
    console = Console()
    console.print("[bold]TritonMQ failover demo[/]: 1 group x 3 replicas on a local ZooKeeper")
    with DevCluster(1, 3) as cluster:
        console.print(f"zookeeper {cluster.zk_hosts}")
        console.print(
            f"watch it from another shell: TRITONMQ_ZK_AUTH_FILE={cluster.zk_auth_file} "
            f"tritonmq top --zk {cluster.zk_hosts} --chroot {cluster.chroot}",
            soft_wrap=True,  # one line to copy, however narrow the terminal
        )
        for b in cluster.brokers.values():
            console.print(f"  broker {b.id} {b.url} pid {b.pid}")
        console.print(f"primary: {cluster.primary()}; publishing {records} records at ~{rate}/s")
        # a status line on a terminal only (the same console: it stays below the log lines)
        with console.status("publishing") as status:
            rep = asyncio.run(_run(cluster, records, rate, console, status.update))
        st = cluster.status()["groups"]["g1"]
        console.print(f"group g1: epoch {st['epoch']}, primary {st['primary']}, isr {st['isr']}")
    ok = rep.lost == 0 and rep.duplicates == 0 and rep.out_of_order == 0
    console.print(
        f"sent {rep.sent}  acknowledged {rep.acked}  delivered {rep.delivered}  "
        f"lost {rep.lost}  duplicates {rep.duplicates}  out of order {rep.out_of_order}  "
        f"publishing paused {rep.pause_s:.2f}s"
    )
    console.print(
        "[bold green]OK: nothing acknowledged was lost[/]" if ok else "[bold red]FAILED[/]"
    )
    return 0 if ok else 1
