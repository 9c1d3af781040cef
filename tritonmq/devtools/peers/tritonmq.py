"""TritonMQ in the peers' harness: a dev cluster of 1 group x 3 replicas, in memory, and
the project's client as an application uses it (a publish returns once every in-sync
replica holds the record)."""

from __future__ import annotations

import asyncio
import platform
from collections.abc import Awaitable, Callable

from tritonmq.client import Client
from tritonmq.devtools.cluster import DevCluster

ACK_EVERY = 500  # a subscriber acknowledges every 500th record, as `tritonmq bench` does


class TritonConn:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def create(self, topic: str) -> None:
        return None  # topics need no creating

    async def drop(self, topic: str) -> None:
        return None  # records nobody subscribes to are purged as they commit

    async def publish(self, topic: str, value: bytes) -> None:
        await self.client.publish(topic, value)

    async def publish_batch(self, topic: str, values: list[bytes]) -> None:
        await self.client.publish_many(topic, values)

    async def subscribe(
        self,
        topic: str,
        on_records: Callable[[int], None],
        on_error: Callable[[BaseException], None],
    ) -> Callable[[], Awaitable[None]]:
        sub = self.client.subscribe(topic, from_="latest")
        await sub.__aenter__()

        async def consume() -> None:
            got = 0
            try:
                async for msg in sub:
                    got += 1
                    if got % ACK_EVERY == 0:
                        await msg.ack()
                    on_records(1)
            except Exception as e:
                on_error(e)

        task = asyncio.create_task(consume())

        async def stop() -> None:
            sub.close()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        return stop

    async def close(self) -> None:
        await self.client.close()


class TritonMQ:
    key = "tritonmq"
    title = "TritonMQ 1x3"

    def __init__(self) -> None:
        self.cluster: DevCluster | None = None
        self.url = ""

    def missing(self) -> list[str]:
        return []  # ZooKeeper is checked when the cluster starts (scripts/bootstrap)

    def start(self) -> None:
        self.cluster = DevCluster(1, 3).start()
        self.url = f"zk://{self.cluster.zk_hosts}{self.cluster.chroot}"

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None

    async def connect(self) -> TritonConn:
        return TritonConn(await Client(self.url).connect())

    def describe(self) -> str:
        return (
            f"TritonMQ: 1 group x 3 broker processes in memory, ZooKeeper, client defaults "
            f"(Python {platform.python_version()})"
        )
