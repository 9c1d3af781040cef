"""Connections per broker: count open client connections, refuse the handshake past the cap.

The count is of sockets, so it lives in the shell. Idle connections are not special: each
holds a file descriptor and buffers whether it sends anything or not. At
``max_connections`` a new client's handshake gets HTTP 503 (before any frame), so the
broker stays below its open-file limit and keeps serving the connections it has.
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from tritonmq.wire.frames import REPL_SUBPROTOCOL, SUBPROTOCOL
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL

log = logging.getLogger("tritonmq.broker")
Hook = Callable[[ServerConnection, Request], Response | None]


FD_HEADROOM = 256  # descriptors besides client connections: ZooKeeper, replication, files


def fit_fd_limit(max_connections: int) -> int:
    """Raise this process's open-file limit (up to its hard limit) so that
    ``max_connections`` is what refuses clients, not the limit; log a warning when it
    cannot be. Returns the soft limit in force."""
    want = max_connections + FD_HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        soft = new
    except (ValueError, OSError) as e:
        log.debug("could not raise the open-file limit to %d: %s", new, e)
    if soft < want:
        log.warning(
            "max_connections=%d needs %d open files, this process may have %d:"
            " raise the limit (ulimit -n) or lower max_connections",
            max_connections,
            want,
            soft,
        )
    return soft


class Admission:
    """Client connections open, counted while :meth:`serve` runs them.

    Handshakes in flight are not counted (each is bounded by the server's open timeout),
    so a burst of simultaneous handshakes may pass the cap by that many. A handshake
    offering only the replication subprotocol is neither counted nor refused: those
    connections are bounded by the group's members.
    """

    def __init__(self, max_connections: int) -> None:
        fit_fd_limit(max_connections)
        self.max = max_connections
        self.open = 0
        self.refused = 0

    def process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        """websockets' handshake hook: None admits, a response refuses."""
        offered = ",".join(request.headers.get_all("Sec-WebSocket-Protocol"))
        protocols = {p.strip() for p in offered.split(",")}
        if REPL_SUBPROTOCOL in protocols and not protocols & {SUBPROTOCOL, JSON_SUBPROTOCOL}:
            return None
        if self.open < self.max:
            return None
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning("refused %d connection(s): max_connections=%d", self.refused, self.max)
        return conn.respond(
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"this broker has max_connections={self.max} client connections; retry later\n",
        )

    def after(self, first: Hook) -> Hook:
        """One ``process_request`` hook: ``first`` (e.g. the Origin check), then the cap."""

        def hook(conn: ServerConnection, request: Request) -> Response | None:
            return first(conn, request) or self.process_request(conn, request)

        return hook

    async def serve(
        self, ws: ServerConnection, handler: Callable[[ServerConnection], Awaitable[None]]
    ) -> None:
        """Run ``handler`` for ``ws``, counting it unless it is a replication link."""
        if ws.subprotocol == REPL_SUBPROTOCOL:
            await handler(ws)
            return
        self.open += 1
        try:
            await handler(ws)
        finally:
            self.open -= 1
