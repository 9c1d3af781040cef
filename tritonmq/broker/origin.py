"""The ``Origin`` check of the websocket handshake (browser pages; docs/security.md).

A browser sends the page's ``Origin`` with every websocket handshake and lets any page
connect anywhere; the broker refuses pages it does not trust with HTTP 403 before any
frame is read. Whether an origin is allowed is decided by
:func:`tritonmq.core.auth.origin_allowed` from ``allowed_origins``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from http import HTTPStatus

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from tritonmq.core.auth import Origins, origin_allowed

log = logging.getLogger("tritonmq.broker")

Hook = Callable[[ServerConnection, Request], Response | None]


def origin_check(
    allowed: Sequence[str],
    cluster: Callable[[], Origins] = frozenset,
    refused: Callable[[], None] = lambda: None,
    names: Callable[[], frozenset[str] | None] = lambda: None,
) -> Hook:
    """A ``process_request`` hook refusing handshakes from origins not ``allowed``;
    ``cluster()`` gives the origins of the cluster's brokers (always allowed), ``names()``
    the broker's own host names (the same-origin rule's, :func:`own_names`), and
    ``refused()`` is told of each refusal (the broker then re-reads its cluster)."""
    allowed = tuple(allowed)

    def check(conn: ServerConnection, request: Request) -> Response | None:
        origins = request.headers.get_all("Origin")
        hosts = request.headers.get_all("Host")
        origin = origins[0] if len(origins) == 1 else None
        host = hosts[0] if len(hosts) == 1 else None
        ok = origin_allowed(origin, host, allowed, cluster(), names())
        if len(origins) > 1 or not ok:
            log.info("refused a handshake from Origin %r (Host %r)", origins, host)
            refused()
            return conn.respond(HTTPStatus.FORBIDDEN, "Origin not allowed\n")
        return None

    return check
