"""kazoo (threads) to asyncio: futures from kazoo async results, session states to the loop."""

from __future__ import annotations

import asyncio
from typing import Any


def to_future(loop: asyncio.AbstractEventLoop, async_result: Any) -> asyncio.Future[Any]:
    """An asyncio future resolved from a kazoo ``IAsyncResult`` without blocking either side."""
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, exc: BaseException | None) -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)

    def on_ready(ar: Any) -> None:
        try:
            value = ar.get_nowait()
        except BaseException as e:  # kazoo hands back the ZooKeeper error; pass it on
            loop.call_soon_threadsafe(settle, None, e)
        else:
            loop.call_soon_threadsafe(settle, value, None)

    async_result.rawlink(on_ready)
    return fut
