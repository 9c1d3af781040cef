"""Client connections (``tritonmq.v1``): decode each frame and hand it to the core.

A malformed frame gets an ``error`` frame and the connection keeps going; a frame
over ``max_frame_bytes`` is refused by the websocket layer with close code 1009.
Nothing is decided here but admission: :class:`Admission` counts open client
connections and refuses the handshake of one past ``max_connections`` with HTTP 503.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from http import HTTPStatus

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from tritonmq.config import BrokerConfig
from tritonmq.core.events import ClientFrameIn, ClientGone, Event
from tritonmq.errors import ProtocolError
from tritonmq.wire import codec
from tritonmq.wire.frames import REPL_SUBPROTOCOL, SUBPROTOCOL, ErrorCode

log = logging.getLogger("tritonmq.broker")


class Admission:
    """Open client connections, idle or not, counted while :func:`serve` runs them.

    At ``max_connections`` a new one is refused at the handshake (HTTP 503, before any
    frame), so the broker stays below its open-file limit and keeps serving the
    connections it has. Handshakes in flight are not counted (each is bounded by the
    server's open timeout). Connections offering the replication subprotocol are
    neither counted nor refused: they are bounded by the group's members.
    """

    def __init__(self, max_connections: int) -> None:
        self.max = max_connections
        self.open = 0
        self.refused = 0

    def process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        offered = ",".join(request.headers.get_all("Sec-WebSocket-Protocol"))
        protocols = {p.strip() for p in offered.split(",")}
        if REPL_SUBPROTOCOL in protocols and SUBPROTOCOL not in protocols:
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


async def serve(
    ws: ServerConnection, cfg: BrokerConfig, feed: Callable[[Event], None], admission: Admission
) -> None:
    """Read ``ws`` until it closes, feeding each decoded frame to the core."""
    admission.open += 1
    try:
        async for data in ws:
            try:
                frame = codec.decode_client(
                    data,
                    max_frame=cfg.max_frame_bytes,
                    max_records=cfg.max_batch_records,
                    max_value=cfg.max_value_bytes,
                )
            except ProtocolError as e:
                await ws.send(codec.enc_error(ErrorCode(e.code), e.message, id=e.id, sid=e.sid))
                continue
            feed(ClientFrameIn(ws, frame, time.monotonic(), time.time_ns() // 1_000_000))
    except ConnectionClosed:
        pass
    finally:
        admission.open -= 1
        feed(ClientGone(ws, time.monotonic()))
