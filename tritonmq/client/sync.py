"""A small synchronous facade for scripts: the asyncio client on a private loop thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from tritonmq.client.client import Client
from tritonmq.client.subscription import Subscription
from tritonmq.client.types import Ack, Message

T = TypeVar("T")


class SyncClient:
    """``with SyncClient("zk://host:port") as c: c.publish("t", b"v")``."""

    def __init__(self, url: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tritonmq-client", daemon=True
        )
        self._thread.start()
        self._client = Client(url, **options)
        self._run(self._client.connect())

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: dict[str, Any] | None = None,
    ) -> Ack:
        return self._run(self._client.publish(topic, value, key=key, headers=headers))

    def publish_many(self, topic: str, values: Iterable[bytes]) -> list[Ack]:
        return self._run(self._client.publish_many(topic, list(values)))

    def subscribe(
        self,
        topic: str,
        subscription: str | None = None,
        from_: str | int = "latest",
        *,
        timeout: float | None = None,
    ) -> Iterator[Message]:
        """Yield messages (ack each with ``msg.ack()`` -> use :meth:`ack`); stops after ``timeout`` idle seconds."""
        sub: Subscription = self._client.subscribe(topic, subscription, from_)
        self._run(sub.__aenter__())
        try:
            while True:
                try:
                    yield self._run(sub.get(timeout))
                except TimeoutError:
                    return
        finally:
            self._loop.call_soon_threadsafe(sub.close)

    def ack(self, msg: Message) -> None:
        self._run(msg.ack())

    def refresh_token(self, token: str) -> None:
        """Present ``token`` from now on, live connections included (:meth:`Client.refresh_token`)."""

        async def refresh() -> None:
            self._client.refresh_token(token)

        self._run(refresh())

    def close(self) -> None:
        try:
            self._run(self._client.close(), timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
