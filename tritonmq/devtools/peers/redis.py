"""Redis with two replicas in the peers' harness: a ``redis-server`` primary (Debian's) and two
``replicaof`` replicas on loopback, in memory (no RDB, no AOF), and redis-py with hiredis as
its documentation shows it: a topic is a stream, a publish is ``XADD`` followed by
``WAIT 2`` in one pipeline (confirmed once both replicas acknowledged the write), a batch is
one pipeline of ``XADD``\\ s and one ``WAIT 2``, and a subscriber reads with ``XREAD BLOCK``."""

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

REPLICAS = 2
WAIT_MS = 10_000  # WAIT's timeout: it returns how many replicas acknowledged by then
# redis-py's pool opens a connection per concurrent call, up to 100 by default (then
# raises): room for the 256 concurrent publishers, as an application that many would set
POOL = 512
READ_COUNT = 1000  # entries per XREAD
BLOCK_MS = 200  # how long an XREAD waits for entries: a stopped subscriber ends within it


class NotReplicated(RuntimeError):
    """WAIT returned before both replicas acknowledged."""


class RedisConn:
    def __init__(self, r: Any) -> None:
        self.r = r

    async def create(self, topic: str) -> None:
        return None  # XADD makes the stream

    async def drop(self, topic: str) -> None:
        await self.r.delete(topic)

    async def _confirmed(self, topic: str, values: list[bytes]) -> None:
        async with self.r.pipeline(transaction=False) as p:
            for v in values:
                p.xadd(topic, {b"v": v})
            p.wait(REPLICAS, WAIT_MS)
            got = await p.execute()
        if got[-1] < REPLICAS:
            raise NotReplicated(f"WAIT {REPLICAS}: only {got[-1]} replicas acknowledged")

    async def publish(self, topic: str, value: bytes) -> None:
        await self._confirmed(topic, [value])

    async def publish_batch(self, topic: str, values: list[bytes]) -> None:
        await self._confirmed(topic, values)

    async def subscribe(
        self,
        topic: str,
        on_records: Callable[[int], None],
        on_error: Callable[[BaseException], None],
    ) -> Callable[[], Awaitable[None]]:
        r = self.r  # XREAD BLOCK takes a connection of the pool while it waits
        last = b"0-0"  # every topic is a fresh stream: from its start is from now on
        stopping = False

        async def consume() -> None:
            nonlocal last
            try:
                while not stopping:
                    got = await r.xread({topic: last}, count=READ_COUNT, block=BLOCK_MS)
                    for _name, entries in got:
                        if entries:
                            last = entries[-1][0]
                            on_records(len(entries))
            except Exception as e:
                on_error(e)

        task = asyncio.create_task(consume())

        async def stop() -> None:
            # not task.cancel(): redis-py does not give up a blocked XREAD on a cancel
            nonlocal stopping
            stopping = True
            await task

        return stop

    async def close(self) -> None:
        await self.r.aclose()


class RedisReplicated:
    key = "redis"
    title = "Redis + 2 replicas"

    def __init__(self) -> None:
        self.children = Children()
        self.dir: Path | None = None
        self.port = 0

    def missing(self) -> list[str]:
        return missing_parts("redis-server", ["redis", "hiredis"], "redis[hiredis]")

    def start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tritonmq-bench-redis-"))
        ports = free_ports(1 + REPLICAS)
        self.port = ports[0]
        for i, port in enumerate(ports):
            d = self.dir / f"r{i}"
            d.mkdir()
            argv = [
                "redis-server",
                "--bind", "127.0.0.1",
                "--port", str(port),
                "--dir", str(d),
                "--save", "",
                "--appendonly", "no",
                "--daemonize", "no",
                "--repl-diskless-sync", "yes",
                "--repl-diskless-sync-delay", "0",
            ]  # fmt: skip
            if i:
                argv += ["--replicaof", "127.0.0.1", str(self.port)]
            self.children.spawn(argv, self.dir / f"r{i}.log")
        try:
            for port in ports:
                await_port(port, 30, self.children.check)
            run_async(self._await_replicas(60))
        except BaseException:
            self.stop()
            raise

    async def _await_replicas(self, timeout: float) -> None:
        """Until the primary has both replicas online."""
        conn = await self.connect()
        try:
            deadline = time.monotonic() + timeout
            while True:
                self.children.check()
                info = await conn.r.info("replication")
                online = [
                    k for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                    and v.get("state") == "online"
                ]  # fmt: skip
                if len(online) >= REPLICAS:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Redis replicas online: {len(online)} of {REPLICAS}")
                await asyncio.sleep(0.1)
        finally:
            await conn.close()

    def stop(self) -> None:
        self.children.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    async def connect(self) -> RedisConn:
        import redis.asyncio as aioredis

        r = aioredis.Redis(host="127.0.0.1", port=self.port, max_connections=POOL)
        await r.ping()
        return RedisConn(r)

    def describe(self) -> str:
        v = version_of(["redis-server", "--version"])
        return (
            f"Redis: {v.split(' sha=')[0]}, a primary and {REPLICAS} replicaof replicas "
            f"in memory, XADD + WAIT {REPLICAS}, a pool of up to {POOL} connections, redis-py {pkg_version('redis')} "
            f"with hiredis {pkg_version('hiredis')}"
        )
