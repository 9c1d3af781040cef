"""A small synchronous facade for scripts: the asyncio client on a private loop thread.

Everything the facade does with the client runs on that thread, synchronous calls
included (``Client.subscribe`` starts the group's link, which needs its loop): the
caller's thread only waits for results.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any, ParamSpec, TypeVar

from tritonmq.client.client import Client
from tritonmq.client.subscription import Subscription
from tritonmq.client.types import Ack, Message

T = TypeVar("T")
P = ParamSpec("P")


class SyncClient:
    """``with SyncClient("zk://host:port") as c: c.publish("t", b"v")``."""

    def __init__(self, url: str | None = None, **options: Any) -> None:
        self._client = Client(url, **options)  # bad settings raise here, before any thread
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tritonmq-client", daemon=True
        )
        self._thread.start()
        try:
            self._run(self._client.connect())
        except BaseException:
            self.close()  # no thread (nor ZooKeeper session) left behind by a failed connect
            raise

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` on the loop's thread: a synchronous method of the client."""

        async def call() -> T:
            return fn(*args, **kwargs)

        return self._run(call())

    def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: dict[str, Any] | None = None,
        durability: str = "",
    ) -> Ack:
        coro = self._client.publish(topic, value, key=key, headers=headers, durability=durability)
        return self._run(coro)

    def publish_many(
        self, topic: str, values: Iterable[bytes], *, durability: str = ""
    ) -> list[Ack]:
        return self._run(self._client.publish_many(topic, list(values), durability=durability))

    def subscribe(
        self,
        topic: str,
        subscription: str | None = None,
        from_: str | int = "latest",
        *,
        timeout: float | None = None,
    ) -> Iterator[Message]:
        """Yield messages (ack each with ``msg.ack()`` -> use :meth:`ack`); stops after ``timeout`` idle seconds."""
        sub: Subscription = self._call(self._client.subscribe, topic, subscription, from_)
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

        self._call(self._client.refresh_token, token)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self._client.close(), timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
