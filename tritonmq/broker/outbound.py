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
ABORT_AFTER_S = 10.0
"""A closed connection's buffer is dropped (TCP abort) if the client has not read up to
the close frame by then: it holds at most the cap meanwhile."""

Spawn = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]


class Outbound:
    """Sends to client connections, each bounded to ``cap`` unsent bytes."""

    def __init__(self, cap: int, spawn: Spawn, abort_after: float = ABORT_AFTER_S) -> None:
        self.cap = cap
        self.spawn = spawn
        self.abort_after = abort_after
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
        websockets.broadcast((conn,), data)
        return True

    def _overflow(self, conn: ServerConnection, wanted: int) -> None:
        self.closing.add(conn)
        log.warning(
            "closing client %s with %d: %d bytes unsent would exceed max_outbound_bytes %d",
            conn.remote_address,
            CLOSE_OUTBOUND_FULL,
            wanted,
            self.cap,
        )
        self.spawn(self.close(conn, CLOSE_OUTBOUND_FULL, CLOSE_REASON), "close-outbound-full")

    async def close(self, conn: ServerConnection, code: int, reason: str) -> None:
        """Close ``conn`` with ``code``, in bounded time: websockets' close waits for the
        write buffer to drain first, forever for a client that does not read."""
        try:
            async with asyncio.timeout(self.abort_after):
                await conn.close(code, reason)
        except TimeoutError:
            conn.transport.abort()
