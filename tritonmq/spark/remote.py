"""Blocking calls into the asyncio client from Spark's Python processes.

Spark calls the source and sink from plain threads in several processes (the
planner process of a query, executor workers). Each process keeps one client
per cluster URL on a private event-loop thread; a forked worker makes its own.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from tritonmq.client.client import Client
from tritonmq.client.types import Fetched
from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import TritonError
from tritonmq.tokens import read_token_file
from tritonmq.wire.codec import MAX_SAFE_INT

T = TypeVar("T")
PUBLISH_CHUNK = 10_000


class Remote:
    """One connected :class:`Client` on a loop thread of its own."""

    def __init__(
        self,
        url: str,
        ca_file: str | None = None,
        token_file: str | None = None,
        zk_auth_file: str | None = None,
    ) -> None:
        self.url = url
        token = read_token_file(token_file) if token_file else None
        # a bad caFile, tokenFile or zkAuthFile raises before a thread starts
        self.client = Client(url, ca_file=ca_file, token=token, zk_auth_file=zk_auth_file)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tritonmq-spark", daemon=True
        )
        self._thread.start()
        try:
            self.call(self.client.connect())
        except BaseException:
            self.close()
            raise

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        try:
            self.call(self.client.close(), timeout=10)
        except (TritonError, TimeoutError, RuntimeError):
            pass
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    # --- what the source and sink need -------------------------------------------------

    def groups_of(self, topics: Iterable[str]) -> dict[str, str]:
        return {t: self.client.group_of(t) for t in topics}

    def histories(self, topics: Iterable[str], *, fresh: bool = True) -> dict[str, SlotHistory]:
        """The slot history of each of ``topics`` whose slot ever moved; ``fresh``: re-read
        the cluster first (a batch's plan), else the view as last read."""
        if fresh:
            self.call(self.client.refresh())
        out = {t: self.client.slot_history(t) for t in topics}
        return {t: h for t, h in out.items() if h.moved}

    def topics(self) -> dict[str, str]:
        return self.call(self.client.topics())

    def groups(self) -> list[str]:
        """Every group of the cluster, as read now."""
        self.call(self.client.refresh())
        return self.client.groups()

    def heads(self, groups: Iterable[str]) -> dict[str, int]:
        """Each group's commit point, from its primary."""
        return self.call(self._heads(sorted(set(groups))))

    async def _heads(self, groups: list[str]) -> dict[str, int]:
        out = {}
        for g in groups:
            out[g] = (await self.client.group_meta(g)).commit
        return out

    def commit(self, topic: str, subscription: str, ts: int, group: str | None = None) -> int:
        """``group``: that group's ts (an era of a moved slot it held), else the owner's."""
        return self.call(self.client.commit(topic, subscription, ts, group=group))[0]

    def fetch(
        self, topic: str, start: int, end: int, max: int, group: str | None = None
    ) -> Fetched:
        """``group``: that group's records (an era it held), else the topic's owner's."""
        fetch = self.client.fetch_raw(topic, start, end, max=max, skip_purged=True, group=group)
        return self.call(fetch)

    def first_retained(self, topic: str) -> int | None:
        got = self.fetch(topic, 0, MAX_SAFE_INT, 1)  # the largest ts the wire carries
        return got.records[0][0] if got.records else None

    def publish(
        self,
        topic: str,
        records: Sequence[tuple[bytes, bytes, bytes | None, dict[str, Any] | None]],
        durability: str = "",
    ) -> int:
        """Publish with the given uuids; returns once every record is acknowledged (at
        ``durability``: "" is the broker's default)."""
        for i in range(0, len(records), PUBLISH_CHUNK):
            chunk = records[i : i + PUBLISH_CHUNK]
            self.call(self.client.publish_batch(topic, chunk, durability=durability))
        return len(records)

    def pages(
        self, topic: str, start: int, end: int, max: int, group: str | None = None
    ) -> Iterator[Fetched]:
        """Every page of ``topic``'s records in ``start..end`` (of ``group``, else of the
        topic's owner), waiting for a new primary's commit point to reach ``end`` (it was
        committed when the batch was planned)."""
        cur = start
        idle = 0
        while cur <= end:
            got = self.fetch(topic, cur, end, max, group)
            if got.records or got.purged is not None:
                yield got
            if got.next > cur:
                cur, idle = got.next, 0
                continue
            idle += 1  # a new primary whose commit point has not reached `end` yet
            if idle > 1200:
                raise TimeoutError(f"topic {topic!r}: ts {cur}..{end} not readable for 60s")
            self.call(asyncio.sleep(0.05))


_cache: dict[tuple[int, str, str | None, str | None, str | None], Remote] = {}
_lock = threading.Lock()


def remote(
    url: str,
    ca_file: str | None = None,
    token_file: str | None = None,
    zk_auth_file: str | None = None,
) -> Remote:
    """This process's client for ``url`` (made on first use, closed at exit)."""
    key = (os.getpid(), url, ca_file, token_file, zk_auth_file)
    with _lock:
        r = _cache.get(key)
        if r is None:
            r = _cache[key] = Remote(url, ca_file, token_file, zk_auth_file)
        return r


def forget(
    url: str,
    ca_file: str | None = None,
    token_file: str | None = None,
    zk_auth_file: str | None = None,
) -> None:
    """Close this process's client for ``url`` (a query stopped)."""
    with _lock:
        r = _cache.pop((os.getpid(), url, ca_file, token_file, zk_auth_file), None)
    if r is not None:
        r.close()


@atexit.register
def _close_all() -> None:
    for (pid, *_), r in list(_cache.items()):
        if pid == os.getpid():
            r.close()
    _cache.clear()
