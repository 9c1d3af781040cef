"""Client connections (``tritonmq.v1``, ``tritonmq.v1.json``): decode each frame with the
connection's codec and hand it to the core.

A malformed frame gets an ``error`` frame and the connection keeps going; a frame
over ``max_frame_bytes`` is refused by the websocket layer with close code 1009.
Frames of a connection being closed (it did not read what it was sent) are dropped
unread. Nothing is decided here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from tritonmq.config import BrokerConfig
from tritonmq.core.auth import Principal, TokenRejected
from tritonmq.core.events import ClientFrameIn, ClientGone, Event
from tritonmq.errors import ProtocolError
from tritonmq.wire.frames import Error, ErrorCode, Hello
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL, JsonCodec, record_size
from tritonmq.wire.subprotocols import Codec, MsgpackCodec


async def serve(
    ws: ServerConnection,
    cfg: BrokerConfig,
    feed: Callable[[Event], None],
    accepting: Callable[[ServerConnection], bool],
    verify: Callable[[str], Principal | TokenRejected] | None = None,
) -> None:
    """Read ``ws`` until it closes, feeding each decoded frame to the core; the token of a
    ``hello`` is verified (``verify``: signature and claims) before the core judges it."""
    codec = codec_for(ws.subprotocol, cfg)
    # JSON writes records larger than the log counts them: answers are cut by what it writes
    size = record_size if ws.subprotocol == JSON_SUBPROTOCOL else None
    try:
        async for data in ws:
            if not accepting(ws):
                continue
            try:
                frame = codec.decode_client(data)
            except ProtocolError as e:
                error = Error.of(ErrorCode(e.code), e.message, id=e.id, sid=e.sid)
                await ws.send(codec.encode(error))
                continue
            verified = None
            if isinstance(frame, Hello) and frame.token and verify is not None:
                verified = verify(frame.token)
            wall_ms = time.time_ns() // 1_000_000
            feed(ClientFrameIn(ws, frame, time.monotonic(), wall_ms, verified, size))
    except ConnectionClosed:
        pass
    finally:
        feed(ClientGone(ws, time.monotonic()))


def codec_for(subprotocol: str | None, cfg: BrokerConfig) -> Codec:
    """The codec a client connection speaks, bounded by the broker's limits."""
    kind = JsonCodec if subprotocol == JSON_SUBPROTOCOL else MsgpackCodec
    return kind(
        max_frame=cfg.max_frame_bytes,
        max_records=cfg.max_batch_records,
        max_value=cfg.max_value_bytes,
        max_elements=cfg.max_frame_elements,
    )
