"""A subscription as the application sees it: an async iterator of messages, each seen once."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonmq.client.types import Message
from tritonmq.errors import BrokerError, ClientClosed
from tritonmq.wire.frames import Join, Leave, PresenceMember

if TYPE_CHECKING:
    from tritonmq.client.link import Link


log = logging.getLogger("tritonmq.client")


@dataclass(frozen=True, slots=True)
class PresenceOptions:
    """A subscription's presence (docs/protocol.md §13): ``info`` is what it tells the other
    members; ``on_join``/``on_leave`` are called with each other member that comes or goes.
    After a failover the members come back one by one (each a join): ask
    :meth:`~tritonmq.client.Client.presence` for the whole list again."""

    info: str = ""
    on_join: Callable[[PresenceMember], object] | None = None
    on_leave: Callable[[PresenceMember], object] | None = None


class Subscription:
    """``async with client.subscribe(topic) as sub: async for msg in sub: ...``

    Records arrive in ``ts`` order. After a failover the client resumes from the
    last record it received, and drops anything with a ``ts`` it already handed
    to the application, so the application never sees a record twice.

    In ``shared`` mode the members of a subscription split its records, each is
    acknowledged on its own, and one that is not acknowledged in time is given to
    another member: records may then arrive out of ``ts`` order, and a record can
    reach the application again (at least once). Across reconnects and failovers the
    member's id (chosen once per subscription) keeps what it holds and acknowledged
    with it, so a record reaches two members only if one stayed away longer than the
    broker's ``ephemeral_grace`` or was slower than its ``ack_timeout``.
    """

    def __init__(
        self,
        link: Link,
        sid: int,
        topic: str,
        name: str | None,
        start: str | int,
        window: int | None,
        mode: str = "broadcast",
        presence: PresenceOptions | None = None,
    ) -> None:
        self._link = link
        self.sid = sid
        self.topic = topic
        self.name = name
        self.start = start
        self.window = window
        self.mode = mode
        self.shared = mode == "shared"
        self.presence = presence
        self._records: deque[tuple[Any, ...]] = deque()
        self._ready = asyncio.Event()
        self._subscribed: asyncio.Future[int] | None = None
        self._error: BaseException | None = None
        self._closed = False

    # called by the link: the protocol already dropped redeliveries -------------------

    def on_records(self, records: Any, era: int = 0) -> None:
        if era:  # a moved slot's records (M3): each remembers its era for its ack
            self._records.extend((*r, era) for r in records)
        else:
            self._records.extend(records)
        self._ready.set()

    def on_presence(self, frame: Join | Leave) -> None:
        """Another member came or went: the application's callback, whose failure is logged
        (it must not end the connection every subscription shares)."""
        p = self.presence
        if p is None:
            return
        call = p.on_join if isinstance(frame, Join) else p.on_leave
        if call is None:
            return
        try:
            call(frame.member)
        except Exception:
            log.exception("presence callback of subscription %d on %r failed", self.sid, self.topic)

    def on_subok(self, next_ts: int) -> None:
        if self._subscribed is not None and not self._subscribed.done():
            self._subscribed.set_result(next_ts)

    def fail(self, exc: BaseException) -> None:
        """The subscription ended (e.g. :class:`~tritonmq.errors.Purged`): the iterator raises
        ``exc`` once the records received before it are consumed."""
        self._error = exc
        if self._subscribed is not None and not self._subscribed.done():
            self._subscribed.set_exception(exc)
        self._ready.set()

    # application side ---------------------------------------------------------------

    async def __aenter__(self) -> Subscription:
        self._subscribed = asyncio.get_running_loop().create_future()
        self._link.add_subscription(self)
        await self._subscribed
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._link.remove_subscription(self)
            self._ready.set()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Message:
        recs = self._records
        while not recs:
            if self._error is not None:
                raise self._error
            if self._closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        r = recs.popleft()
        if len(r) == 6:  # a moved slot's record, with its era (M3)
            era = r[5]
            return Message(self.topic, *r[:5], lambda ts: self._ack(ts, era))
        ts, uuid, key, value, headers = r
        return Message(self.topic, ts, uuid, key, value, headers, self._ack)

    async def get(self, timeout: float | None = None) -> Message:
        """The next message, waiting at most ``timeout`` seconds."""
        async with asyncio.timeout(timeout):  # not wait_for, which can lose a cancellation
            return await self.__anext__()

    async def _ack(self, ts: int, era: int = 0) -> None:
        if self._closed:
            raise ClientClosed("subscription is closed")
        if era:
            self._link.ack(self, ts, era)
        else:
            self._link.ack(self, ts)


__all__ = ["PresenceOptions", "Subscription", "BrokerError"]
