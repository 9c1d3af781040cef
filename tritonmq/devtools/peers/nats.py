"""NATS JetStream R3 in the peers' harness: three ``nats-server`` processes (Debian's) in one
cluster with JetStream on loopback, one memory stream with 3 replicas per topic, and
nats-py as its documentation shows it: ``js.publish`` (confirmed by the stream's PubAck,
which JetStream sends once a majority of the replicas hold the message), a batch as
``publish_async`` futures gathered, and an ordered push consumer per subscriber."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tritonmq.devtools.peers import (
    Children,
    await_port,
    missing_parts,
    pkg_version,
    run_async,
    version_of,
)
from tritonmq.devtools.zkserver import free_ports

SERVERS = 3
REPLICAS = 3
MAX_PENDING = 20_000  # publish_async's own cap (default 4,000): above the load's 5,000


def stream_of(topic: str) -> str:
    """A topic's stream: stream names may not hold dots."""
    return "bench_" + topic.replace(".", "_")


def _config(name: str, port: int, cport: int, routes: list[int], store: Path) -> str:
    route_urls = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
    return f"""\
server_name: {name}
listen: 127.0.0.1:{port}
jetstream {{
  store_dir: "{store}"
}}
cluster {{
  name: bench
  listen: 127.0.0.1:{cport}
  routes: [{route_urls}]
}}
"""


async def _quiet(_e: Exception) -> None:
    return None  # reconnects are the client's business; a failed call raises anyway


class NatsConn:
    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.js = nc.jetstream(publish_async_max_pending=MAX_PENDING)

    async def create(self, topic: str) -> None:
        from nats.js.api import StorageType

        await self.js.add_stream(
            name=stream_of(topic),
            subjects=[topic],
            storage=StorageType.MEMORY,
            num_replicas=REPLICAS,
        )

    async def drop(self, topic: str) -> None:
        await self.js.delete_stream(stream_of(topic))

    async def publish(self, topic: str, value: bytes) -> None:
        await self.js.publish(topic, value)

    async def publish_batch(self, topic: str, values: list[bytes]) -> None:
        futs = [await self.js.publish_async(topic, v) for v in values]
        await asyncio.gather(*futs)

    async def subscribe(
        self,
        topic: str,
        on_records: Callable[[int], None],
        on_error: Callable[[BaseException], None],
    ) -> Callable[[], Awaitable[None]]:
        # an ordered consumer recreates itself after a gap; its failures reach the
        # connection's error callback, and a stalled subscriber ends in the shape's timeout
        async def cb(_msg: Any) -> None:
            on_records(1)

        sub = await self.js.subscribe(topic, stream=stream_of(topic), cb=cb, ordered_consumer=True)

        async def stop() -> None:
            await sub.unsubscribe()

        return stop

    async def close(self) -> None:
        await self.nc.close()


class NatsJetStream:
    key = "nats"
    title = "NATS JetStream R3"

    def __init__(self) -> None:
        self.children = Children()
        self.dir: Path | None = None
        self.ports: list[int] = []

    def missing(self) -> list[str]:
        return missing_parts("nats-server", ["nats"], "nats-py")

    def start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tritonmq-bench-nats-"))
        ports = free_ports(2 * SERVERS)
        self.ports, cports = ports[:SERVERS], ports[SERVERS:]
        for i in range(SERVERS):
            name = f"n{i + 1}"
            conf = self.dir / f"{name}.conf"
            others = [p for j, p in enumerate(cports) if j != i]
            conf.write_text(_config(name, self.ports[i], cports[i], others, self.dir / name))
            self.children.spawn(["nats-server", "-c", str(conf)], self.dir / f"{name}.log")
        try:
            for port in self.ports:
                await_port(port, 30, self.children.check)
            run_async(self._await_jetstream(60))
        except BaseException:
            self.stop()
            raise

    async def _await_jetstream(self, timeout: float) -> None:
        """Until the cluster has a JetStream meta leader and takes an R3 stream."""
        conn = await self.connect()
        try:
            deadline = time.monotonic() + timeout
            while True:
                self.children.check()
                try:
                    await conn.create("bench.ready")
                    await conn.drop("bench.ready")
                    return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.25)
        finally:
            await conn.close()

    def stop(self) -> None:
        self.children.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    async def connect(self) -> NatsConn:
        import nats

        nc = await nats.connect(
            [f"nats://127.0.0.1:{p}" for p in self.ports],
            dont_randomize=True,
            error_cb=_quiet,
        )
        return NatsConn(nc)

    def describe(self) -> str:
        v = version_of(["nats-server", "--version"])
        return (
            f"NATS: {v}, {SERVERS} servers in one cluster with JetStream, "
            f"a memory stream with {REPLICAS} replicas per topic, nats-py {pkg_version('nats-py')}"
        )
