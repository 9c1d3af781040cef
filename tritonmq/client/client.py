"""``tritonmq.Client``: the asyncio producer/consumer API."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

from tritonmq.client.consumer import Subscription
from tritonmq.client.link import Link
from tritonmq.client.types import Ack
from tritonmq.errors import ConfigError


class Client:
    """Connect with ``Client("zk://host:port")`` or ``Client("ws://host:port")``.

    ``zk://`` finds the primary through ZooKeeper; ``ws://`` asks any broker,
    which names the primary and the group's other members. Either way the
    client follows the primary across failovers on its own.
    """

    def __init__(
        self,
        url: str,
        *,
        max_in_flight: int = 32,
        batch_size: int = 1000,
        linger: float = 0.0,
        timeout: float = 30.0,
        retries: int = 1000,
        connect_timeout: float = 30.0,
    ) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in ("zk", "ws", "wss") or not parsed.netloc:
            raise ConfigError(
                f"unsupported broker URL {url!r}: use zk://host:port or ws://host:port"
            )
        self.url = url
        self._scheme = parsed.scheme
        self._zk_hosts = parsed.netloc
        self._chroot = parsed.path if parsed.path not in ("", "/") else "/tritonmq"
        self._known: list[str] = [url] if parsed.scheme != "zk" else []
        self._connect_timeout = connect_timeout
        self._link = Link(
            self._resolve,
            learn=self._remember,
            max_in_flight=max_in_flight,
            batch_size=batch_size,
            linger=linger,
            timeout=timeout,
            retries=retries,
        )

    async def _resolve(self) -> list[str]:
        """Candidate broker URLs, the likely primary first."""
        if self._scheme == "zk":
            from tritonmq.coord.inspect import fetch_cluster

            info = await asyncio.to_thread(fetch_cluster, self._zk_hosts, self._chroot, 5.0)
            urls: list[str] = []
            for g in info["groups"].values():
                if g.get("primary_url"):
                    urls.append(g["primary_url"])
                urls.extend(u for u in g["members"].values() if u not in urls)
            return urls
        return list(self._known)

    def _remember(self, urls: list[str]) -> None:
        """Brokers named by ``meta``: where a ws:// client looks when its seed is gone."""
        if self._scheme != "zk":
            self._known.extend(u for u in urls if u not in self._known)

    async def connect(self) -> Client:
        await self._link.start(self._connect_timeout)
        return self

    async def close(self) -> None:
        await self._link.close()

    async def __aenter__(self) -> Client:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: dict[str, Any] | None = None,
    ) -> Ack:
        """Publish one record; returns once every in-sync replica holds it."""
        return await self._link.publish_nowait(topic, value, key, headers)

    async def publish_many(self, topic: str, values: Iterable[bytes]) -> list[Ack]:
        """Publish many records at once (batched on the wire); acks in the same order."""
        futs = [self._link.publish_nowait(topic, v, None, None) for v in values]
        return list(await asyncio.gather(*futs))

    def subscribe(
        self,
        topic: str,
        subscription: str | None = None,
        from_: str | int = "latest",
        *,
        window: int | None = None,
    ) -> Subscription:
        """``async with client.subscribe(topic) as sub: async for msg in sub: await msg.ack()``."""
        if not (from_ in ("latest", "earliest") or (isinstance(from_, int) and from_ >= 0)):
            raise ConfigError("from_ must be 'latest', 'earliest' or a ts >= 0")
        return self._link.new_subscription(topic, subscription, from_, window)

    @property
    def group(self) -> str:
        return self._link.group
