"""The connection to one group's primary: a thin asyncio shell around :class:`ClientProtocol`.

Every decision (batching, the in-flight window, resending in order with the same
uuids, redirects, following a new epoch, dropping redeliveries, backoff) is made
in :mod:`tritonmq.client.protocol`. This module only decodes what arrives, hands it
to the protocol with the loop's clock, and performs the actions it returns, in one
``match``. Every task it starts is kept, and cancelled on close; one that ends
with an unexpected exception fails every pending call with it instead of leaving
them to hang.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import ssl
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, assert_never

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from tritonmq import tlsconfig
from tritonmq.client.events import (
    AckRecord,
    Action,
    Answered,
    Close,
    Connect,
    DeliverRecords,
    Disconnect,
    EpochSeen,
    Event,
    FrameReceived,
    PresenceChanged,
    Probe,
    Publish,
    PublishDone,
    PublishFailed,
    Request,
    RequestFailed,
    Resolve,
    Resolved,
    ResolveFailed,
    Send,
    SetToken,
    Subscribe,
    Subscribed,
    SubscriptionFailed,
    SubscriptionMoved,
    Tick,
    TransportClosed,
    TransportFailed,
    TransportOpened,
    Unsubscribe,
    WakeAt,
)
from tritonmq.client.protocol import BATCH_BYTES, ClientProtocol, Settings
from tritonmq.client.states import ConnState
from tritonmq.client.subscription import PresenceOptions, Subscription
from tritonmq.client.types import Ack
from tritonmq.core.log import record_size
from tritonmq.errors import ClientClosed, ClientError, FrameTooLarge, ProtocolError, WrongGroup
from tritonmq.wire import subprotocols as wire
from tritonmq.wire.frames import (
    Commit,
    Committed,
    Fetch,
    Fetched,
    From,
    Members,
    Meta,
    MetaReply,
    Presence,
    Pub,
    PubRecord,
    Stats,
    StatsReply,
    SubDelete,
    SubInfo,
    SubReset,
)

Answer = Fetched | Committed | MetaReply | SubInfo | Members | StatsReply
"""What a request answered once gets back (C10)."""

log = logging.getLogger("tritonmq.client")

Resolver = Callable[[], Awaitable[list[str]]]
Prober = Callable[[str], Awaitable[tuple[int | None, str | None]]]
"""Ask the group's brokers other than the given URL: ``(epoch, primary_url)``."""
RESOLVE_TIMEOUT = 10.0
MAX_FRAME_BYTES = 8 * 1024 * 1024
"""The broker's ``max_frame_bytes`` unless told otherwise (its default, config.py)."""


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
        max_frame_bytes: int = MAX_FRAME_BYTES,
        probe: Prober | None = None,
        probe_after: float = 1.0,
        codec: wire.Codec = wire.MSGPACK,
        rand: Callable[[], float] = random.random,
        tls: ssl.SSLContext | None = None,
        token: str | None = None,
        follow: Callable[[str], Link] | None = None,
    ) -> None:
        self._resolve = resolve
        self._follow = follow  # the link to another group (a subscription's slot moved, M4)
        self._tls = tls  # how wss:// brokers are verified (None: the system's trust store)
        self._probe = probe
        self._codec = codec
        self.max_frame = max_frame  # what it takes from the broker
        self.max_frame_bytes = max_frame_bytes  # what the broker takes from it
        self.protocol = ClientProtocol(
            Settings(
                max_in_flight=max_in_flight,
                batch_size=batch_size,
                batch_bytes=min(BATCH_BYTES, max_frame_bytes // 2),  # rule 2: well under it
                linger=linger,
                timeout=timeout,
                retries=retries,
                probe_after=probe_after if probe is not None else None,
                group=group,
            ),
            rand,
            token=token,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ws: ClientConnection | None = None
        self._ws_conn = 0
        self._readers: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._next_ticket = 1
        self._pending: dict[int, tuple[asyncio.Future[Any], str, bool]] = {}
        self._asks: dict[int, asyncio.Future[Answer]] = {}
        self._subs: dict[int, Subscription] = {}
        self._next_sid = 1
        self._closed = False

    @property
    def group(self) -> str:
        return self.protocol.group or self.protocol.settings.group

    @property
    def state(self) -> ConnState:
        return self.protocol.state

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background; requests queue until the primary is reached."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._handle(Tick())

    async def close(self) -> None:
        if self._closed:
            return
        self._handle(Close())
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for t in list(self._tasks):
            t.cancel()
        while self._tasks:  # cancelled readers leave a websocket close (<= 1 s) behind
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("client task failed: %r", exc)
        self._fail_everything(ClientError(f"client task failed: {exc!r}"))

    def _fail_everything(self, err: BaseException) -> None:
        """A bug in this shell: surface it to every caller rather than leave them waiting."""
        for fut, _, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        for ask in self._asks.values():
            if not ask.done():
                ask.set_exception(err)
        self._asks.clear()
        for sub in self._subs.values():
            sub.fail(err)
        self._subs.clear()

    # --- the protocol: events in, actions performed ---------------------------------------

    def _handle(self, event: Event) -> None:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        for action in self.protocol.handle(event, loop.time()):
            self._perform(action)

    def _perform(self, action: Action) -> None:
        match action:
            case Send(frame=frame):
                ws = self._ws
                if ws is not None:
                    websockets.broadcast((ws,), self._codec.encode(frame))
            case Connect(conn=conn, url=url):
                self._readers[conn] = self._spawn(self._connection(conn, url))
            case Disconnect(conn=conn):
                if self._ws_conn == conn:
                    self._ws = None
                reader = self._readers.pop(conn, None)
                if reader is not None:
                    reader.cancel()
            case Resolve():
                self._spawn(self._resolve_candidates())
            case Probe(exclude=url):
                self._spawn(self._probe_epoch(url))
            case PublishDone(ticket=ticket, ts=ts, group=group, eras=eras):
                entry = self._pending.pop(ticket, None)
                if entry is not None and not entry[0].done():
                    fut, topic, single = entry
                    acks = [
                        Ack(topic, t, group, eras[i] if eras and eras[i] >= 0 else None)
                        for i, t in enumerate(ts)
                    ]
                    fut.set_result(acks[0] if single else acks)
            case PublishFailed(ticket=ticket, error=error):
                entry = self._pending.pop(ticket, None)
                if entry is not None and not entry[0].done():
                    entry[0].set_exception(error)
            case Answered(ticket=ticket, frame=frame):
                ask = self._asks.pop(ticket, None)
                if ask is not None and not ask.done():
                    ask.set_result(frame)
            case RequestFailed(ticket=ticket, error=error):
                ask = self._asks.pop(ticket, None)
                if ask is not None and not ask.done():
                    ask.set_exception(error)
            case DeliverRecords(sid=sid, records=records, era=era):
                sub = self._subs.get(sid)
                if sub is not None:
                    sub.on_records(records, era)
            case PresenceChanged(sid=sid, frame=frame):
                sub = self._subs.get(sid)
                if sub is not None:
                    sub.on_presence(frame)
            case Subscribed(sid=sid, next=next_ts):
                sub = self._subs.get(sid)
                if sub is not None:
                    sub.on_subok(next_ts)
            case SubscriptionFailed(sid=sid, error=error):
                sub = self._subs.pop(sid, None)
                if sub is not None:
                    sub.fail(error)
            case SubscriptionMoved(sid=sid, group=group, era=era, after=after, resume=resume):
                sub = self._subs.pop(sid, None)
                if sub is not None and self._follow is not None:
                    follow = self._follow(group)
                    follow.add_subscription(sub, era, after, moved=True, resume=resume)
                elif sub is not None:
                    sub.fail(WrongGroup(f"topic {sub.topic!r} moved to group {group}", group=group))
            case WakeAt(at=at):
                self._wake_at(at)
            case _:
                assert_never(action)

    def _wake_at(self, at: float) -> None:
        if self._closed or at >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        assert self._loop is not None
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self._handle(Tick())

    # --- I/O the actions ask for ---------------------------------------------------------

    async def _resolve_candidates(self) -> None:
        """Bug 7: whatever the cluster read raises (kazoo's errors too) is an event, not
        the end of the link: the protocol backs off and reads again."""
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT):
                urls = await self._resolve()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.debug("cluster read failed: %r", e)
            self._handle(ResolveFailed(repr(e)))
            return
        self._handle(Resolved(tuple(urls)))

    async def _probe_epoch(self, exclude: str) -> None:
        epoch: int | None = None
        url: str | None = None
        if self._probe is not None:
            try:
                async with asyncio.timeout(RESOLVE_TIMEOUT):
                    epoch, url = await self._probe(exclude)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("epoch probe failed: %r", e)
        self._handle(EpochSeen(epoch, url))

    async def _connection(self, conn: int, url: str) -> None:
        try:
            ws = await websockets.connect(
                url,
                ssl=tlsconfig.for_url(url, self._tls),
                subprotocols=[self._codec.subprotocol],  # type: ignore[list-item]
                max_size=self.max_frame,
                compression=None,
                open_timeout=3,
                ping_interval=5,
                ping_timeout=10,
                close_timeout=1,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._handle(TransportFailed(conn, repr(e), tls=tlsconfig.is_tls_failure(e)))
            return
        self._ws, self._ws_conn = ws, conn
        reason = ""
        try:
            self._handle(TransportOpened(conn))
            async for data in ws:
                try:
                    frame = self._codec.decode_broker(data)
                except ProtocolError as e:
                    log.warning("dropping an undecodable frame from %s: %s", url, e)
                    continue
                self._handle(FrameReceived(conn, frame))
        except ConnectionClosed as e:
            reason = str(e)
        finally:
            if self._ws is ws:
                self._ws = None
            self._readers.pop(conn, None)
            if not self._closed:
                self._handle(TransportClosed(conn, reason or "closed"))
            self._spawn(_close_quietly(ws))

    # --- producing -------------------------------------------------------------------

    def _ticket(self, topic: str, single: bool) -> tuple[int, asyncio.Future[Any]]:
        if self._closed:
            raise ClientClosed("client closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        ticket = self._next_ticket
        self._next_ticket += 1
        self._pending[ticket] = (fut, topic, single)
        return ticket, fut

    def publish_nowait(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: dict[str, Any] | None,
        uuid: bytes | None = None,
        durability: str = "",
    ) -> asyncio.Future[Ack]:
        """One record; the future gets its :class:`Ack`."""
        record = _record(uuid or os.urandom(16), value, key, headers)
        self._check_size(topic, [record])
        ticket, fut = self._ticket(topic, True)
        self._handle(Publish(ticket, topic, (record,), durability))
        return fut

    def publish_batch(
        self,
        topic: str,
        items: list[tuple[bytes, bytes, bytes | None, dict[str, Any] | None]],
        durability: str = "",
    ) -> asyncio.Future[list[Ack]]:
        """``(uuid, value, key, headers)`` each; the future gets their acks in order."""
        records = [_record(u, v, k, h) for u, v, k, h in items]
        self._check_size(topic, records)
        ticket, fut = self._ticket(topic, False)
        self._handle(Publish(ticket, topic, records, durability))
        return fut

    def _check_size(self, topic: str, records: list[PubRecord]) -> None:
        """Refuse, before anything is sent, a record that cannot fit in a frame the broker
        takes (``max_frame_bytes``): it would close the connection (1009), again at each
        resend. A batch is cut well below the limit (protocol rule 2), so a frame is too
        large only when one record is."""
        limit = self.max_frame_bytes
        for r in records:
            estimate = record_size((0, *r)) + len(topic) + 64
            if estimate < limit - 4096:
                continue
            size = len(self._codec.encode(Pub(0, topic, [r])))  # near the limit: exactly
            if size > limit:
                raise FrameTooLarge(
                    f"a record of {topic!r} takes {size} bytes on the wire, over the broker's "
                    f"max_frame_bytes ({limit}); values are bounded by max_value_bytes too"
                )

    # --- requests answered once (fetch, commit, meta) ----------------------------------

    def request(
        self, frame: Fetch | Commit | Meta | SubDelete | SubReset | Presence | Stats
    ) -> asyncio.Future[Answer]:
        """Send ``frame`` to the primary (its ``id`` is given by the protocol); the future
        gets the answer, or the error that ended it (retriable ones are retried first)."""
        if self._closed:
            raise ClientClosed("client closed")
        fut: asyncio.Future[Answer]
        fut = asyncio.get_running_loop().create_future()
        ticket = self._next_ticket
        self._next_ticket += 1
        self._asks[ticket] = fut
        self._handle(Request(ticket, frame))
        return fut

    # --- consuming -------------------------------------------------------------------

    def new_subscription(
        self,
        topic: str,
        name: str | None,
        start: str | int,
        window: int | None,
        mode: str,
        presence: PresenceOptions | None = None,
    ) -> Subscription:
        sid = self._next_sid
        self._next_sid += 1
        return Subscription(self, sid, topic, name, start, window, mode, presence)

    def add_subscription(
        self,
        sub: Subscription,
        era: int | None = None,
        after: int | None = None,
        *,
        moved: bool = False,
        resume: bool = True,
    ) -> None:
        """Subscribe ``sub`` here. ``moved``: it comes from another group's link (a slot
        move, M4, M5), with a sid of this link, an unnamed one from ``(era, after + 1)``
        (resumed unless ``resume`` is False: it had no position yet), a named one from
        its offset."""
        if self._closed:
            sub.fail(ClientClosed("client closed"))
            return
        if sub._link is not self:
            sub.sid, self._next_sid = self._next_sid, self._next_sid + 1
            sub._link = self
        self._subs[sub.sid] = sub
        start: From | int = sub.start if isinstance(sub.start, int) else From(sub.start)
        if era is not None and after is not None:
            start = after + 1
        elif moved and sub.name:
            start = From.LATEST  # resume from the offset, whatever the first start was
        member = secrets.token_hex(8) if sub.shared else ""
        p = sub.presence
        self._handle(
            Subscribe(
                sub.sid,
                sub.topic,
                sub.name,
                start,
                sub.window,
                sub.mode,
                member,
                p is not None,
                p.info if p is not None else "",
                era or 0,
                era is not None and after is not None and resume,
            )  # fmt: skip
        )

    def remove_subscription(self, sub: Subscription) -> None:
        if self._subs.pop(sub.sid, None) is not None:
            self._handle(Unsubscribe(sub.sid))

    def ack(self, sub: Subscription, ts: int, era: int = 0) -> None:
        self._handle(AckRecord(sub.sid, ts, era))

    # --- following the group's epoch -------------------------------------------------------

    def set_token(self, token: str | None) -> None:
        """Present ``token`` from now on; a live connection sends it at once (a refresh)."""
        if not self._closed:
            self._handle(SetToken(token))

    def epoch_seen(self, epoch: int, primary_url: str | None) -> None:
        """The group's state changed (a ZooKeeper watch): move if it is a new primary."""
        if not self._closed:
            self._handle(EpochSeen(epoch, primary_url))


async def _close_quietly(ws: ClientConnection) -> None:
    """Close a connection that ended. Closing one the broker dropped (close code 1009, a
    frame over its ``max_frame_bytes``) can raise from inside websockets on Python 3.11
    (AttributeError: its transport has no loop any more): nothing is left to close then,
    and it must not fail every call of the client as a task of this shell that failed."""
    try:
        await ws.close()
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.debug("closing an ended connection raised %r", e)


def _record(
    uuid: bytes, value: Any, key: bytes | None, headers: dict[str, Any] | None
) -> tuple[bytes, bytes | None, bytes, dict[str, Any] | None]:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("value must be bytes")
    if key is not None and not isinstance(key, bytes):
        raise TypeError("key must be bytes or None")
    return (uuid, key, bytes(value), headers)
