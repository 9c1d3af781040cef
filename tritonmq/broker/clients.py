"""Client connections (``tritonmq.v1``): decode, hand to the core, send what it returns.

A malformed frame gets an ``error`` frame and the connection keeps going; a frame
over ``max_frame_bytes`` is refused by the websocket layer with close code 1009.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from tritonmq.errors import ProtocolError
from tritonmq.wire import codec
from tritonmq.wire.frames import Ack, ErrorCode, Fetch, Hello, Meta, Nack, Pub, Sub, Unsub

if TYPE_CHECKING:
    from tritonmq.broker.node import Broker

log = logging.getLogger("tritonmq.broker.clients")
FETCH_BYTES = 4 * 1024 * 1024  # a fetch answer is cut here; `next` says where to continue


def _not_primary(broker: Broker, *, id: int | None = None, sid: int | None = None) -> bytes:
    return codec.enc_error(
        ErrorCode.NOT_PRIMARY,
        f"broker {broker.cfg.id} is not the primary of {broker.cfg.group}",
        id=id,
        sid=sid,
        primary=broker.primary_url(),
    )


def _meta(broker: Broker, id: int) -> bytes:
    coord = broker.coord
    state = coord.state if coord else None
    members = coord.members if coord else {}
    return codec.packb(
        {
            "op": "meta",
            "id": id,
            "group": broker.cfg.group,
            "broker": broker.cfg.id,
            "role": "primary" if broker.primary else "backup",
            "epoch": state.epoch if state else 0,
            "primary": state.primary if state else None,
            "primary_url": broker.primary_url(),
            "isr": list(state.isr) if state else [],
            "members": {m.id: m.url for m in members.values()},
        }
    )


async def serve(broker: Broker, ws: ServerConnection) -> None:
    cfg = broker.cfg
    send = broker._send
    broker.client_conns.add(ws)
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
                send(ws, codec.enc_error(ErrorCode(e.code), e.message, id=e.id, sid=e.sid))
                continue
            p = broker.primary
            t = type(frame)
            if t is Pub:
                assert isinstance(frame, Pub)
                if p is None:
                    send(ws, _not_primary(broker, id=frame.id))
                else:
                    broker.perform(p.publish(ws, frame.id, frame.topic, frame.records))
            elif t is Ack:
                assert isinstance(frame, Ack)
                for d in broker.delivery.ack(ws, frame.sid, frame.ts, broker.commit_ts):
                    send(ws, codec.enc_deliver(d.sid, d.topic, d.records))
            elif t is Sub:
                assert isinstance(frame, Sub)
                if p is None:
                    send(ws, _not_primary(broker, sid=frame.sid))
                    continue
                next_ts, first = broker.delivery.subscribe(
                    ws,
                    frame.sid,
                    frame.topic,
                    frame.subscription,
                    frame.start,
                    frame.window,
                    p.commit_ts,
                )
                send(ws, codec.enc_subok(frame.sid, next_ts))
                for d in first:
                    send(ws, codec.enc_deliver(d.sid, d.topic, d.records))
            elif t is Nack:
                assert isinstance(frame, Nack)
                for d in broker.delivery.nack(ws, frame.sid, frame.ts, broker.commit_ts):
                    send(ws, codec.enc_deliver(d.sid, d.topic, d.records))
            elif t is Unsub:
                assert isinstance(frame, Unsub)
                broker.delivery.unsubscribe(ws, frame.sid)
            elif t is Hello or t is Meta:
                send(ws, _meta(broker, frame.id if isinstance(frame, Meta) else 0))
            elif t is Fetch:
                assert isinstance(frame, Fetch)
                if p is None:
                    send(ws, _not_primary(broker, id=frame.id))
                    continue
                end = min(frame.end, p.commit_ts)
                limit = min(frame.max, cfg.max_batch_records)
                tlog = broker.log.topics.get(frame.topic)
                recs = (
                    tlog.between(frame.start, end, limit, FETCH_BYTES) if tlog is not None else []
                )
                # Where to continue: after the last record sent, or past `end` if nothing was.
                next_ts = recs[-1][0] + 1 if recs else max(frame.start, end + 1)
                send(ws, codec.enc_fetched(frame.id, recs, next_ts))
    except ConnectionClosed:
        pass
    finally:
        broker.client_conns.discard(ws)
        broker.delivery.drop_conn(ws)
        if broker.primary is not None:
            broker.primary.drop_conn(ws)
