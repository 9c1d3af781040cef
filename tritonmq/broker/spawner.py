"""Every task the broker shell starts, kept so that none is fire-and-forget.

A task's unexpected exception is logged (never lost), and a planned stop cancels
and awaits them all with a deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("tritonmq.broker")


class Spawner:
    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and (e := task.exception()) is not None:
            log.error("task %s failed", task.get_name(), exc_info=e)

    async def cancel_all(self, timeout: float) -> None:
        """Cancel every task and wait for them, at most ``timeout`` seconds."""
        tasks = [t for t in self.tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
