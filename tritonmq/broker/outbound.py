"""What a client connection may hold in the broker's memory on its way out.

Replies and deliveries are queued on the connection's transport without waiting
(``websockets.broadcast``: one encoded frame may go to many connections, and the
core never blocks on a slow reader). Nothing in that path bounds the transport's
write buffer: a client that sends requests and never reads (500 ``fetch``es, each
answered with ~4 MiB) would make the broker buffer gigabytes. So every send checks
the buffer first: a connection whose unsent bytes would pass ``max_outbound_bytes``
gets nothing more and is closed with :data:`CLOSE_OUTBOUND_FULL`; everyone else is
served as before. Subscribers that read slowly never get there: their windows
(``window_bytes``) pause delivery well below the cap.

The cap is per connection, so many connections that never read could still hold it many
times over (50 of them: +802 MB). So what all client connections hold unsent is bounded
too, by one budget per broker (:class:`OutboundBudget`, ``max_outbound_total_bytes``), as
their input is (``broker/inbound.py``): past it the connection holding the most unsent
bytes is closed with the same code, and aborted if it has not read up to the close
frame within 0.1 s, since its buffer is what the budget needs back.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import websockets
from websockets.asyncio.server import ServerConnection
from websockets.protocol import State

from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL, transcode

log = logging.getLogger("tritonmq.broker")

CLOSE_OUTBOUND_FULL = 4008
"""WebSocket close code: the connection did not read what the broker sent it."""
CLOSE_REASON = "outbound buffer full"
CLOSE_REASON_BUDGET = "outbound buffers full"
ABORT_AFTER_S = 10.0
"""A closed connection's buffer is dropped (TCP abort) if the client has not read up to
the close frame by then: it holds at most the cap meanwhile."""
BUDGET_ABORT_AFTER_S = 0.1
"""The same for a connection closed for the per-broker budget: it held the most of it."""

Spawn = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]


class OutboundBudget:
    """Unsent bytes of every client connection, at most ``limit`` together.

    Each connection is counted as its write buffer stood after the last send to it: a buffer
    only shrinks in between (the kernel takes from it), so the total is never below the
    truth. Only when it would pass the limit are the buffers read again (one call per
    connection holding bytes), and if the truth passes it too, the largest holders go.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: dict[ServerConnection, int] = {}
        self.total = 0
        self.evictions = 0

    def note(self, conn: ServerConnection, n: int) -> None:
        """``conn`` holds ``n`` unsent bytes now."""
        self.total += n - self.held.get(conn, 0)
        if n:
            self.held[conn] = n
        else:
            self.held.pop(conn, None)

    def release(self, conn: ServerConnection) -> None:
        self.total -= self.held.pop(conn, 0)

    def victims(self, n: int) -> list[ServerConnection]:
        """The connections to close for ``n`` more bytes to fit, largest holders first
        (already forgotten here): none while the total with ``n`` is within the limit."""
        if self.total + n <= self.limit:
            return []
        for conn in list(self.held):
            self.note(conn, _unsent(conn))
        out: list[ServerConnection] = []
        while self.total + n > self.limit and self.held:
            victim = max(self.held, key=self.held.__getitem__)
            self.release(victim)
            out.append(victim)
        self.evictions += len(out)
        return out


def _unsent(conn: ServerConnection) -> int:
    transport = conn.transport
    return 0 if transport.is_closing() else transport.get_write_buffer_size()


class Outbound:
    """Sends to client connections, each bounded to ``cap`` unsent bytes, all of them
    together to ``budget`` (if given); ``evicted`` hears of every connection closed for
    either, with the reason (``outbound_full``, ``outbound_budget``: the listener's admission
    counts and logs them)."""

    def __init__(
        self,
        cap: int,
        spawn: Spawn,
        abort_after: float = ABORT_AFTER_S,
        budget: OutboundBudget | None = None,
        evicted: Callable[[ServerConnection, str], None] | None = None,
    ) -> None:
        self.cap = cap
        self.spawn = spawn
        self.abort_after = abort_after
        self.budget = budget
        self.evicted = evicted
        self.closing: weakref.WeakSet[ServerConnection] = weakref.WeakSet()

    def accepting(self, conn: ServerConnection) -> bool:
        """Whether frames from ``conn`` are still worth handling: not once it was closed for
        not reading. (A client that closes on its own is still heard: its last frames, an
        ``ack`` before its close frame, arrive while the connection is already closing.)"""
        return conn not in self.closing

    def send(self, conn: ServerConnection, data: bytes) -> bool:
        """Queue ``data`` on ``conn`` without waiting; False if it was dropped.

        One frame always goes on an empty buffer, however large (a ``fetched`` of ~4 MiB
        plus one record); the cap applies to what piles up behind it. ``data`` is a
        ``tritonmq.v1`` frame; a ``tritonmq.v1.json`` connection gets it as JSON text.
        """
        if conn in self.closing or conn.protocol.state is not State.OPEN:
            return False  # closing or closed: nothing more is queued on it
        if conn.subprotocol == JSON_SUBPROTOCOL:
            return self._send(conn, transcode(data))
        return self._send(conn, data)

    def _send(self, conn: ServerConnection, data: bytes | str) -> bool:
        queued = conn.transport.get_write_buffer_size()
        if queued and queued + len(data) > self.cap:
            self._overflow(conn, queued + len(data))
            return False
        if self.budget is not None:
            for victim in self.budget.victims(len(data)):
                self._over_budget(victim)
            if conn in self.closing:
                return False  # it held the most
        websockets.broadcast((conn,), data)
        if self.budget is not None:
            self.budget.note(conn, conn.transport.get_write_buffer_size())
        return True

    def forget(self, conn: ServerConnection) -> None:
        """``conn`` is gone: it holds nothing of the budget any more."""
        if self.budget is not None:
            self.budget.release(conn)

    def _over_budget(self, conn: ServerConnection) -> None:
        self.closing.add(conn)
        if self.evicted is not None:
            self.evicted(conn, "outbound_budget")
        self.spawn(
            self.close(conn, CLOSE_OUTBOUND_FULL, CLOSE_REASON_BUDGET, BUDGET_ABORT_AFTER_S),
            "close-outbound-budget",
        )

    def _overflow(self, conn: ServerConnection, wanted: int) -> None:
        self.closing.add(conn)
        if self.evicted is not None:
            self.evicted(conn, "outbound_full")
        log.warning(
            "closing client %s with %d: %d bytes unsent would exceed max_outbound_bytes %d",
            conn.remote_address,
            CLOSE_OUTBOUND_FULL,
            wanted,
            self.cap,
        )
        self.spawn(self.close(conn, CLOSE_OUTBOUND_FULL, CLOSE_REASON), "close-outbound-full")

    async def close(
        self, conn: ServerConnection, code: int, reason: str, abort_after: float | None = None
    ) -> None:
        """Close ``conn`` with ``code``, in bounded time: websockets' close waits for the
        write buffer to drain first, forever for a client that does not read."""
        try:
            async with asyncio.timeout(self.abort_after if abort_after is None else abort_after):
                await conn.close(code, reason)
        except TimeoutError:
            conn.transport.abort()
