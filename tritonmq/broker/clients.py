"""Client connections (``tritonmq.v1``): decode, hand to the core, send what it returns.

A malformed frame gets an ``error`` frame and the connection keeps going; a frame
over ``max_frame_bytes`` is refused by the websocket layer with close code 1009.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from tritonmq.broker import offsets
from tritonmq.core.delivery import Mode
from tritonmq.errors import ProtocolError, RequestRejected
from tritonmq.wire import codec
from tritonmq.wire.frames import (
    Ack,
    Commit,
    ErrorCode,
    Fetch,
    Hello,
    Meta,
    Nack,
    Pub,
    Sub,
    Unsub,
)

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


def _meta(broker: Broker, id: int) -> dict[str, Any]:
    coord = broker.coord
    state = coord.state if coord else None
    members = coord.members if coord else {}
    return {
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
        "commit": broker.commit_ts,
        "bytes": broker.log.bytes,
        "records": sum(len(t.records) for t in broker.log.topics.values()),
    }


def _wrong_group(broker: Broker, frame: Pub | Sub | Fetch | Commit, owner: str) -> bytes:
    msg = f"topic {frame.topic!r} belongs to group {owner}, not {broker.cfg.group}"
    if isinstance(frame, Sub):
        return codec.enc_error(ErrorCode.WRONG_GROUP, msg, sid=frame.sid, group=owner)
    return codec.enc_error(ErrorCode.WRONG_GROUP, msg, id=frame.id, group=owner)


async def _meta_with_cluster(broker: Broker, id: int) -> bytes:
    """``meta`` plus the slot map and every group's brokers, so a ws:// client can route."""
    frame = _meta(broker, id)
    frame["topics"] = sorted(broker.log.topics)  # for readers that match topics by pattern
    coord = broker.coord
    if coord is not None:
        try:
            frame["groups"] = await asyncio.wait_for(coord.read_groups(), 3.0)
        except Exception as e:  # ZooKeeper unreachable: answer with what we know
            log.debug("meta without cluster view: %s", e)
        if coord.slot_map is not None:
            frame["slots"] = coord.slot_map.as_dict()
    return codec.packb(frame)


async def _durables_loaded(broker: Broker, timeout: float = 5.0) -> bool:
    try:
        await asyncio.wait_for(broker.durables_ready.wait(), timeout)
    except TimeoutError:
        return False
    return True


def _fetched(broker: Broker, frame: Fetch, commit_ts: int) -> bytes:
    end = min(frame.end, commit_ts)
    limit = min(frame.max, broker.cfg.max_batch_records)
    tlog = broker.log.topics.get(frame.topic)
    purged = None
    if tlog is not None and frame.start <= tlog.purged_to and frame.start <= end:
        if not frame.skip_purged:
            msg = (
                f"records of topic {frame.topic!r} in group {broker.cfg.group} from ts"
                f" {frame.start} to {tlog.purged_to} were purged"
            )
            return codec.enc_error(ErrorCode.PURGED, msg, id=frame.id)
        purged = tlog.purged_to
    recs = tlog.between(frame.start, end, limit, FETCH_BYTES) if tlog is not None else []
    # Where to continue: after the last record sent, or past `end` if nothing was.
    next_ts = recs[-1][0] + 1 if recs else max(frame.start, end + 1)
    published = broker.log.published_between(recs[0][0], recs[-1][0]) if recs else []
    return codec.enc_fetched(frame.id, recs, next_ts, published, purged)


async def _committed(broker: Broker, frame: Commit) -> bytes:
    """Raise (or create) a durable subscription's offset; answer once ZooKeeper knows it."""
    if not await _durables_loaded(broker):
        msg = "the new primary is still loading subscriptions; retry"
        return codec.enc_error(ErrorCode.UNAVAILABLE, msg, id=frame.id)
    p = broker.primary
    if p is None:
        return _not_primary(broker, id=frame.id)
    offset, register = broker.delivery.commit(
        frame.topic, frame.subscription, frame.ts, p.commit_ts
    )
    for a in register:
        await offsets.register(broker, a)
    return codec.enc_committed(frame.id, offset, p.commit_ts)


async def serve(broker: Broker, ws: ServerConnection) -> None:
    cfg = broker.cfg
    send = broker.send
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
            commit = broker.commit_ts
            if isinstance(frame, Pub | Sub | Fetch | Commit) and (
                owner := broker.other_owner(frame.topic)
            ):
                send(ws, _wrong_group(broker, frame, owner))
                continue
            match frame:
                case Pub(id=pub_id, topic=topic, records=records):
                    if p is None:
                        send(ws, _not_primary(broker, id=pub_id))
                    else:
                        wall_ms = int(time.time() * 1000)
                        broker.perform(p.publish(ws, pub_id, topic, records, wall_ms))
                case Ack(sid=sid, ts=ts, many=many):
                    now = time.monotonic()
                    broker.perform(broker.delivery.ack(ws, sid, ts, commit, many, now))
                case Nack(sid=sid, ts=ts):
                    broker.perform(broker.delivery.nack(ws, sid, ts, commit, time.monotonic()))
                case Sub():
                    if p is None:
                        send(ws, _not_primary(broker, sid=frame.sid))
                        continue
                    if frame.subscription and not await _durables_loaded(broker):
                        msg = "the new primary is still loading subscriptions; retry"
                        send(ws, codec.enc_error(ErrorCode.UNAVAILABLE, msg, sid=frame.sid))
                        continue
                    p = broker.primary
                    if p is None:
                        send(ws, _not_primary(broker, sid=frame.sid))
                        continue
                    try:
                        next_ts, first = broker.delivery.subscribe(
                            ws,
                            frame.sid,
                            frame.topic,
                            frame.subscription,
                            frame.start,
                            frame.window,
                            p.commit_ts,
                            mode=Mode(frame.mode),
                            resume=frame.resume,
                            now=time.monotonic(),
                        )
                    except RequestRejected as e:
                        send(ws, codec.enc_error(ErrorCode(e.code), e.message, sid=frame.sid))
                        continue
                    send(ws, codec.enc_subok(frame.sid, next_ts))
                    broker.perform(first)
                case Unsub(sid=sid):
                    broker.perform(broker.delivery.unsubscribe(ws, sid, time.monotonic()))
                case Hello():
                    send(ws, codec.packb(_meta(broker, 0)))
                case Meta(id=meta_id):
                    send(ws, await _meta_with_cluster(broker, meta_id))
                case Fetch():
                    if p is None:
                        send(ws, _not_primary(broker, id=frame.id))
                        continue
                    send(ws, _fetched(broker, frame, p.commit_ts))
                case Commit():
                    if p is None:
                        send(ws, _not_primary(broker, id=frame.id))
                        continue
                    send(ws, await _committed(broker, frame))
    except ConnectionClosed:
        pass
    finally:
        broker.delivery.drop_conn(ws, time.monotonic())
        if broker.primary is not None:
            broker.primary.drop_conn(ws)
