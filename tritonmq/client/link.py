"""One connection to a group's primary, kept alive across failovers.

Publishing is batched and pipelined (``max_in_flight`` batches on the wire).
When the connection drops, or the broker refuses a batch with a retriable
error, every unacknowledged batch is sent again, in order and with the same
uuids, to whoever is primary now: the primary's dedup table returns the
original ``ts`` for records it already holds, so order and exactly-once hold.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from tritonmq.client.consumer import Subscription
from tritonmq.client.types import Ack
from tritonmq.errors import (
    BrokerError,
    ClientClosed,
    NotPrimary,
    ProtocolError,
    PublishTimeout,
    TritonError,
    WrongGroup,
    error_from_wire,
)
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

log = logging.getLogger("tritonmq.client")

Resolver = Callable[[], Awaitable[list[str]]]
MAX_PAUSE = 1.0


class _Batch:
    __slots__ = ("id", "topic", "records", "futures", "deadline", "attempts", "on_wire")

    def __init__(
        self, id: int, topic: str, records: list[Any], futures: list[Any], deadline: float
    ) -> None:
        self.id = id
        self.topic = topic
        self.records = records
        self.futures = futures
        self.deadline = deadline
        self.attempts = 0
        self.on_wire = False  # sent on the current connection, counted in the in-flight window


class Link:
    def __init__(
        self,
        resolve: Resolver,
        *,
        group: str = "",
        max_in_flight: int = 32,
        batch_size: int = 1000,
        linger: float = 0.0,
        timeout: float = 30.0,
        retries: int = 1000,
        max_frame: int = 64 * 1024 * 1024,
    ) -> None:
        self._resolve = resolve
        self.expected_group = group  # "" : whichever group the primary we find leads
        self._pause = 0.0  # back-off before reconnecting after a refused batch
        self.max_in_flight = max_in_flight
        self.batch_size = batch_size
        self.linger = linger
        self.timeout = timeout
        self.retries = retries
        self.max_frame = max_frame
        self.ws: ClientConnection | None = None
        self.group = group
        self.connected = asyncio.Event()
        self._batches: dict[int, _Batch] = {}
        self._unsent: deque[int] = deque()
        self._inflight = 0
        self._next_id = 1
        self._buffer: dict[str, list[tuple[Any, asyncio.Future[Ack]]]] = {}
        self._flush_handle: asyncio.Handle | asyncio.TimerHandle | None = None
        self._subs: dict[int, Subscription] = {}
        self._next_sid = 1
        self._acks: dict[int, int] = {}
        self._shared_acks: dict[int, list[int]] = {}
        self._ack_scheduled = False
        self._closed = False
        self._last_error: BaseException | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._requests: dict[int, asyncio.Future[dict[str, Any]]] = {}  # fetch, commit

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background; requests queue until the primary is reached."""
        if not self._tasks:
            self._tasks = [
                asyncio.ensure_future(self._run()),
                asyncio.ensure_future(self._expire()),
            ]

    async def close(self) -> None:
        if self._closed:
            return
        self._flush()
        self._closed = True
        for t in self._tasks:
            t.cancel()
        err = ClientClosed("client closed")
        for b in self._batches.values():
            for f in b.futures:
                if not f.done():
                    f.set_exception(err)
        self._batches.clear()
        for s in list(self._subs.values()):
            s.fail(err)
        self._fail_requests(err)
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    async def _run(self) -> None:
        backoff = 0.02
        while not self._closed:
            try:
                ws = await self._connect()
            except (
                OSError,
                TritonError,
                ConnectionClosed,
                InvalidHandshake,
                InvalidURI,
                TimeoutError,
            ) as e:
                self._last_error = e
                log.debug("connect failed: %s", e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
                continue
            backoff = 0.02
            self.ws = ws
            self._on_connected(ws)
            try:
                async for data in ws:
                    if self.ws is not ws:
                        break
                    self._dispatch(data)
            except ConnectionClosed:
                pass
            finally:
                if self.ws is ws:
                    self.ws = None
                self.connected.clear()
                self._fail_requests(NotPrimary("connection to the primary lost"))
            if self._pause:
                await asyncio.sleep(self._pause)

    async def _connect(self) -> ClientConnection:
        """Connect to whichever candidate is primary, following NOT_PRIMARY hints."""
        candidates = await self._resolve()
        tried: set[str] = set()
        while candidates:
            url = candidates.pop(0)
            if url in tried:
                continue
            tried.add(url)
            ws = await websockets.connect(
                url,
                subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                max_size=self.max_frame,
                compression=None,
                open_timeout=3,
                ping_interval=5,
                ping_timeout=10,
            )
            await ws.send(codec.packb({"op": "hello", "client": "tritonmq-python"}))
            meta = codec.decode_broker(await asyncio.wait_for(ws.recv(), 3))
            wrong = self.expected_group and meta.get("group") != self.expected_group
            if meta.get("op") == "meta" and meta.get("role") == "primary" and not wrong:
                self.group = str(meta.get("group", ""))
                return ws
            await ws.close()
            hint = meta.get("primary_url")
            if isinstance(hint, str) and hint not in tried and not wrong:
                candidates.insert(0, hint)
        raise BrokerError("no primary among the known brokers", code="NOT_PRIMARY")

    def _on_connected(self, ws: ClientConnection) -> None:
        self._unsent = deque(sorted(self._batches))
        self._inflight = 0
        for b in self._batches.values():
            b.on_wire = False
        for s in self._subs.values():
            self._send_sub(s)
        self.connected.set()
        self._pump()

    def _reset(self, why: str) -> None:
        """Drop this connection; the run loop reconnects and resends everything unacked."""
        ws = self.ws
        if ws is None:
            return
        log.debug("resetting connection: %s", why)
        self.ws = None
        self.connected.clear()
        self._fail_requests(NotPrimary(f"connection reset: {why}"))
        asyncio.ensure_future(ws.close())

    def _send(self, data: bytes) -> bool:
        ws = self.ws
        if ws is None:
            return False
        websockets.broadcast((ws,), data)
        return True

    # --- producing -------------------------------------------------------------------

    def publish_nowait(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: dict[str, Any] | None,
        uuid: bytes | None = None,
    ) -> asyncio.Future[Ack]:
        if self._closed:
            raise ClientClosed("client closed")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("value must be bytes")
        if key is not None and not isinstance(key, bytes):
            raise TypeError("key must be bytes or None")
        fut: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
        buf = self._buffer.get(topic)
        if buf is None:
            buf = self._buffer[topic] = []
        buf.append(((uuid or os.urandom(16), key, bytes(value), headers), fut))
        if len(buf) >= self.batch_size:
            self._flush()
        elif self._flush_handle is None:
            loop = asyncio.get_running_loop()
            self._flush_handle = (
                loop.call_later(self.linger, self._flush)
                if self.linger > 0
                else loop.call_soon(self._flush)
            )
        return fut

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if not self._buffer:
            return
        deadline = time.monotonic() + self.timeout
        for topic, items in self._buffer.items():
            for i in range(0, len(items), self.batch_size):
                chunk = items[i : i + self.batch_size]
                b = _Batch(
                    self._next_id, topic, [r for r, _ in chunk], [f for _, f in chunk], deadline
                )
                self._next_id += 1
                self._batches[b.id] = b
                self._unsent.append(b.id)
        self._buffer.clear()
        self._pump()

    def _pump(self) -> None:
        while self._unsent and self._inflight < self.max_in_flight and self.ws is not None:
            b = self._batches.get(self._unsent.popleft())
            if b is None:
                continue
            b.attempts += 1
            b.on_wire = True
            self._inflight += 1
            self._send(
                codec.packb({"op": "pub", "id": b.id, "topic": b.topic, "records": b.records})
            )

    def _on_puback(self, frame: dict[str, Any]) -> None:
        b = self._batches.pop(frame.get("id", -1), None)
        if b is None:
            return
        self._settle(b)
        self._pause = 0.0
        group = str(frame.get("group", self.group))
        for fut, ts in zip(b.futures, frame.get("ts", ()), strict=False):
            if not fut.done():
                fut.set_result(Ack(b.topic, ts, group))
        self._pump()

    def _on_pub_error(self, b: _Batch, err: BrokerError) -> None:
        if err.retriable and b.attempts <= self.retries and not isinstance(err, WrongGroup):
            self._last_error = err
            self._pause = min(max(0.05, self._pause * 2), MAX_PAUSE)
            self._reset(f"batch {b.id}: {err.code}")
            return
        self._batches.pop(b.id, None)
        self._settle(b)
        for fut in b.futures:
            if not fut.done():
                fut.set_exception(err)
        self._pump()

    def _settle(self, b: _Batch) -> None:
        """A batch left the in-flight window (acknowledged, refused for good, or expired)."""
        if b.on_wire:
            b.on_wire = False
            self._inflight -= 1

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            now = time.monotonic()
            expired = [b for b in self._batches.values() if b.deadline < now]
            for b in expired:
                del self._batches[b.id]
                self._settle(b)
                err = PublishTimeout(
                    f"no acknowledgement within {self.timeout:.1f}s (last error: {self._last_error})"
                )
                for fut in b.futures:
                    if not fut.done():
                        fut.set_exception(err)
            if expired:
                self._pump()

    # --- requests answered once (fetch, commit) ----------------------------------------

    async def request(self, frame: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``frame`` (given an ``id`` from the pub counter) to the primary; its answer.

        Raises the typed error the broker answered, or a retriable :class:`NotPrimary`
        if the connection drops first: the caller decides whether to retry.
        """
        if self._closed:
            raise ClientClosed("client closed")
        await asyncio.wait_for(self.connected.wait(), timeout)
        rid = self._next_id
        self._next_id += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._requests[rid] = fut
        try:
            if not self._send(codec.packb({**frame, "id": rid})):
                raise NotPrimary("not connected to the primary")
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._requests.pop(rid, None)

    def _fail_requests(self, err: BaseException) -> None:
        requests, self._requests = self._requests, {}
        for fut in requests.values():
            if not fut.done():
                fut.set_exception(err)

    def _on_answer(self, frame: dict[str, Any]) -> None:
        fut = self._requests.pop(frame.get("id", -1), None)
        if fut is not None and not fut.done():
            fut.set_result(frame)

    # --- consuming -------------------------------------------------------------------

    def new_subscription(
        self, topic: str, name: str | None, start: str | int, window: int | None, mode: str
    ) -> Subscription:
        sid = self._next_sid
        self._next_sid += 1
        return Subscription(self, sid, topic, name, start, window, mode)

    def add_subscription(self, sub: Subscription) -> None:
        self._subs[sub.sid] = sub
        self._send_sub(sub)

    def remove_subscription(self, sub: Subscription) -> None:
        if sub.sid in self._subs:
            self._flush_acks()  # acks still queued for this turn must reach the broker first
        if self._subs.pop(sub.sid, None) is not None:
            self._send(codec.packb({"op": "unsub", "sid": sub.sid}))

    def _send_sub(self, sub: Subscription) -> None:
        frame: dict[str, Any] = {
            "op": "sub",
            "sid": sub.sid,
            "topic": sub.topic,
            "from": sub.resume_from(),
        }
        if sub.position is not None:
            frame["resume"] = True  # a reconnect: keep the subscription's ack point
        if sub.name:
            frame["subscription"] = sub.name
        if sub.shared:
            frame["mode"] = "shared"
        if sub.window:
            frame["window"] = sub.window
        self._send(codec.packb(frame))

    def ack(self, sub: Subscription, ts: int) -> None:
        if sub.shared:
            self._shared_acks.setdefault(sub.sid, []).append(ts)
        elif ts > self._acks.get(sub.sid, -1):
            self._acks[sub.sid] = ts
        if not self._ack_scheduled:
            self._ack_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_acks)

    def _flush_acks(self) -> None:
        self._ack_scheduled = False
        acks, self._acks = self._acks, {}
        for sid, ts in acks.items():
            if sid in self._subs:
                self._send(codec.packb({"op": "ack", "sid": sid, "ts": ts}))
        shared, self._shared_acks = self._shared_acks, {}
        for sid, many in shared.items():
            if sid in self._subs:
                self._send(codec.packb({"op": "ack", "sid": sid, "ts": many}))

    # --- frames from the broker ----------------------------------------------------------

    def _dispatch(self, data: bytes | str) -> None:
        try:
            frame = codec.decode_broker(data, max_frame=self.max_frame)
        except ProtocolError as e:
            log.warning("dropping an undecodable frame from the broker: %s", e)
            return
        op = frame["op"]
        if op == "deliver":
            sub = self._subs.get(frame.get("sid", -1))
            if sub is not None:
                sub.on_records(frame.get("records", ()))
        elif op == "puback":
            self._on_puback(frame)
        elif op == "subok":
            sub = self._subs.get(frame.get("sid", -1))
            if sub is not None:
                sub.on_subok(int(frame.get("next", 0)))
        elif op in ("fetched", "committed") or (op == "meta" and frame.get("id")):
            self._on_answer(frame)
        elif op == "error":
            self._on_error(frame)

    def _on_error(self, frame: dict[str, Any]) -> None:
        err = error_from_wire(
            str(frame.get("code", "INTERNAL")),
            str(frame.get("message", "")),
            bool(frame.get("retriable", False)),
            frame.get("primary"),
            frame.get("group"),
        )
        if "id" in frame:
            fut = self._requests.pop(frame["id"], None)
            if fut is not None:
                if not fut.done():
                    fut.set_exception(err)
                if err.retriable and not isinstance(err, WrongGroup):
                    self._reset(f"request {frame['id']}: {err.code}")  # find the primary again
                return
            b = self._batches.get(frame["id"])
            if b is not None:
                self._on_pub_error(b, err)
        elif "sid" in frame:
            sub = self._subs.get(frame["sid"])
            if sub is None:
                return
            if err.retriable and not isinstance(err, WrongGroup):
                self._reset(f"subscription {sub.sid}: {err.code}")
            else:
                self._subs.pop(sub.sid, None)
                sub.fail(err)
        else:
            log.warning("broker reported %s: %s", err.code, err.message)
