"""The client's rules as a pure state machine: events in, actions out (sans I/O).

No asyncio, no clock, no randomness: ``now`` comes with every event and a
``rand()`` in [0, 1) is passed to the constructor, so a test or the simulator
replays a run exactly. :class:`~tritonmq.client.link.Link` is the asyncio shell
that performs the actions; the JavaScript client ports these rules one to one
(docs/protocol.md, "Client rules").

One :class:`ClientProtocol` is the connection to one group's primary.

Rules
-----
1. **Connecting.** ``DISCONNECTED`` -> ask for candidates (:class:`Resolve`) ->
   try them in order (:class:`Connect`); on open send ``hello``; the ``meta`` reply
   must say ``role: primary`` (and the expected group, if one is set), else close
   and try its ``primary_url`` hint next, then the other candidates. A handshake
   has ``handshake_timeout``. When every candidate failed, wait a backoff with
   jitter, ``min(backoff_max, backoff_base * 2**failures) * (0.5 + rand() / 2)``,
   then resolve again. ``CONNECTED`` resets the failure count. A round in which
   every candidate failed and at least one refused the TLS handshake (a
   certificate that does not verify) fails every pending publish, request and
   subscription with :class:`~tritonmq.errors.TlsError` at once: waiting cannot
   fix a certificate, and a caller must not hang on one.
2. **Batching.** Records are gathered per topic; a batch is sent at
   ``batch_size`` records or ``linger`` seconds after the first (0: the next turn
   of the event loop), and is cut before ``batch_bytes`` (1 MiB) of records so that
   a frame stays under the broker's ``max_frame_bytes``. Batch ids count 1, 2, 3, ... for the protocol's lifetime.
3. **In-flight window.** At most ``max_in_flight`` batches are on the wire; the
   next goes when a ``puback`` (or a final failure) frees a slot.
4. **Retry in order with the same uuids.** When the connection drops, or a
   batch is refused with a retriable code other than ``WRONG_GROUP``, the
   connection is closed and, once connected again, *every* unacknowledged batch
   is resent in id order with the same ids and uuids. After a refusal the
   reconnect waits ``refusal_pause`` (50 ms, doubling to 1 s, back to 0 on the next
   ``puback``). ``NOT_PRIMARY`` with a ``primary`` hint tries that URL first.
   A batch fails for good on a non-retriable error, on ``WRONG_GROUP`` (the caller
   re-routes by slot with the same uuids; every later batch of its topic, sent or not,
   fails with it: the broker holds them back on this connection until a refused one is
   resent, and none may be resent on a new connection ahead of it), after ``retries``
   refusals, or when its ``timeout`` passes (:class:`~tritonmq.errors.PublishTimeout`,
   naming the last error).
5. **Following the epoch.** Every ``meta`` names the group's epoch. An
   :class:`EpochSeen` (a ZooKeeper watch on the group's state, or the answer to a
   :class:`Probe`) with a newer epoch and another primary moves the connection
   there at once, resending as in rule 4. A :class:`Probe` (ask the *other* brokers
   who is primary) is asked for when the oldest batch on the wire has waited
   ``probe_after`` seconds, at most once per ``probe_after``. A connection with
   subscriptions that has received nothing for ``probe_after`` sends ``hello``; that
   ``hello`` waits on the wire like a batch until any frame arrives, so a subscriber
   that only subscribes probes a silent (frozen) primary too.
6. **Subscriptions.** ``sub`` is sent on every connection. Broadcast: ``from`` is
   (highest ts handed over) + 1, else the first ``subok.next``, else the
   application's ``from``, with ``resume: true`` after the first ``subok``. Shared:
   ``"latest"`` after the first ``subok``, with ``acked``: the ts the application
   acknowledged in the last ``RECENT_ACKS_S`` seconds (at most ``RECENT_ACKS_MAX``,
   the newest), so that a new primary does not hand them out again, and ``held``: the
   ts handed to the application and not yet acknowledged (at most ``HANDED_MAX``), so
   that it leaves them with this member. Every shared ``sub`` carries ``member``, an id
   chosen once per subscription, so that a new primary keeps for this member what the
   old one handed it, however late it comes back. A broadcast record with ts <= the highest ts
   already handed to the application is dropped (a failover's redelivery). A shared record is dropped when the application already
   acknowledged its ts (it is acknowledged again, so the broker lets go of it), or
   when it was handed over on an earlier connection and not yet acknowledged (the
   application's ack will come). On the same connection a shared record comes again
   only because its ``ack_timeout`` passed: that one is handed over again.
   A moved slot's positions are (era, ts): a record of an era before the newest seen is
   dropped, a later era starts afresh, ``sub`` carries the era (docs/protocol.md C6).
   ``WRONG_GROUP`` with ``group`` moves the subscription to that group (C7,
   :class:`SubscriptionMoved`). A retriable error with ``sid`` (not ``WRONG_GROUP``)
   reconnects; any other ends the subscription with that error (``PURGED`` included: the application sees
   :class:`~tritonmq.errors.Purged`, records are never skipped in silence).
7. **Acks** are coalesced per turn: the highest ts per broadcast subscription,
   every ts for shared ones.
8. **Requests answered once** (``fetch``, ``commit``, ``meta``) take ids from the batch
   counter, are sent once connected and resent in id order on every new connection
   until answered (each is safe to repeat: reads, and a commit never lowers an
   offset). A retriable refusal other than ``WRONG_GROUP`` reconnects as in rule 4;
   any other error, or no answer within ``timeout``, fails the request.
9. **Nothing waits forever.** A subscription not confirmed within ``timeout`` of
   its ``subscribe``, or every subscription when no connection could be made for
   ``timeout``, fails with :class:`~tritonmq.errors.Unavailable`; a failed resolve is
   retried with backoff and remembered as the last error.
10. **Tokens.** ``hello`` carries the token (``SetToken`` replaces it; on a live connection a
   new ``hello`` with it is sent at once, refreshing the broker's copy). A ``hello`` answered
   with a non-retriable ``error`` (``UNAUTHENTICATED``, ``TOKEN_EXPIRED``) fails every
   waiting batch, request and subscription with it, and the connection is tried again after
   ``backoff_max``, with whatever token is set by then.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tritonmq.client.consuming import Consuming
from tritonmq.client.events import (
    AckRecord,
    Action,
    Answered,
    Close,
    Connect,
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
    SubscriptionFailed,
    Tick,
    TransportClosed,
    TransportFailed,
    TransportOpened,
    Unsubscribe,
    WakeAt,
)
from tritonmq.client.pending import Batch as _Batch
from tritonmq.client.pending import Request as _Request
from tritonmq.client.pending import Subscription as _Sub
from tritonmq.client.pending import Ticket as _Ticket
from tritonmq.client.states import ConnState
from tritonmq.core.log import record_size
from tritonmq.errors import (
    ClientClosed,
    PublishTimeout,
    TlsError,
    TritonError,
    Unavailable,
    WrongGroup,
    error_from_wire,
)
from tritonmq.wire.frames import (
    BrokerFrame,
    Committed,
    Deliver,
    Error,
    ErrorCode,
    Fetched,
    Hello,
    Join,
    Leave,
    Members,
    MetaReply,
    Pub,
    PubAck,
    PubRecord,
    StatsReply,
    SubInfo,
    SubOk,
)

CLIENT_NAME = "tritonmq-python"
BATCH_BYTES = 1024 * 1024  # a batch's records' bytes, well under max_frame_bytes (8 MiB)


@dataclass(frozen=True, slots=True)
class Settings:
    max_in_flight: int = 32
    batch_size: int = 1000
    batch_bytes: int = BATCH_BYTES
    linger: float = 0.0
    timeout: float = 30.0
    retries: int = 1000
    handshake_timeout: float = 5.0
    backoff_base: float = 0.02
    backoff_max: float = 0.5
    refusal_pause_min: float = 0.05
    refusal_pause_max: float = 1.0
    probe_after: float | None = None  # None: no probing (a ZooKeeper watch tells us instead)
    group: str = ""  # the group expected at the other end ("" : whichever)


_NEVER = float("inf")


def _record_bytes(r: PubRecord) -> int:
    """What a record adds to a ``pub`` frame: the broker's own estimate
    (:func:`tritonmq.core.log.record_size`), header values included."""
    return record_size((0, *r))


@dataclass(slots=True)
class ClientProtocol(Consuming):
    """The connection to one group's primary, as a state machine. See the module rules.

    Subscribing, delivering and acknowledging are :class:`Consuming`'s (client/consuming.py).
    """

    settings: Settings
    rand: Callable[[], float]
    state: ConnState = ConnState.DISCONNECTED
    group: str = ""
    token: str | None = None  # sent in every ``hello`` (docs/security.md)
    epoch: int = 0
    url: str | None = None  # of the connection being made or held
    conn: int = 0
    last_error: str = ""
    _tls_error: str = ""  # a TLS handshake refused in this round of candidates
    _candidates: deque[str] = field(default_factory=deque)
    _tried: set[str] = field(default_factory=set)
    _failures: int = 0
    _reconnect_at: float = 0.0
    _handshake_deadline: float = _NEVER
    _disconnected_since: float | None = None
    _pause: float = 0.0
    _hint: str | None = None
    _next_probe: float = 0.0
    _probing: bool = False
    _heard: float = 0.0  # when the connection last brought a frame
    _hello_at: float | None = None  # a liveness ``hello`` on the wire since then
    _batches: dict[int, _Batch] = field(default_factory=dict)
    _unsent: deque[int] = field(default_factory=deque)
    _in_flight: int = 0
    _next_id: int = 1
    # publish calls waiting to be batched, per (topic, durability): a batch has one level
    _buffer: dict[tuple[str, str], list[tuple[int, Sequence[PubRecord]]]] = field(
        default_factory=dict
    )
    _buffered: dict[tuple[str, str], int] = field(default_factory=dict)
    _flush_at: float = _NEVER
    _tickets: dict[int, _Ticket] = field(default_factory=dict)
    _requests: dict[int, _Request] = field(default_factory=dict)  # by wire id
    _subs: dict[int, _Sub] = field(default_factory=dict)
    _acks: dict[int, int] = field(default_factory=dict)
    _shared_acks: dict[int, list[int]] = field(default_factory=dict)
    _wake: float = _NEVER
    _out: list[Action] = field(default_factory=list)

    # --- the one entry point ------------------------------------------------------

    def handle(self, event: Event, now: float) -> list[Action]:
        """Apply ``event`` at time ``now``; return what the shell must do, in order."""
        out = self._out = []
        if self.state is ConnState.CLOSED:
            self._when_closed(event)
            return out
        match event:
            case Publish():
                self._publish(event, now)
            case Request():
                self._request(event, now)
            case Subscribe():
                self._subscribe(event, now)
            case Unsubscribe(sid=sid):
                self._unsubscribe(sid)
            case AckRecord(sid=sid, ts=ts, era=era):
                self._ack(sid, ts, now, era)
            case Resolved(urls=urls):
                if self.state is ConnState.RESOLVING:
                    hint, self._hint = self._hint, None
                    first = (hint,) if hint else ()
                    self._candidates = deque(dict.fromkeys((*first, *urls)))
                    self._try_next(now)
            case ResolveFailed(error=error):
                if self.state is ConnState.RESOLVING:
                    self.last_error = f"cluster read failed: {error}"
                    self._backoff(now)
            case TransportOpened(conn=conn):
                if conn == self.conn and self.state is ConnState.CONNECTING:
                    out.append(Send(Hello(CLIENT_NAME, self.token)))
            case SetToken(token=token):
                self.token = token
                if self.state is ConnState.CONNECTED:
                    out.append(Send(Hello(CLIENT_NAME, token)))
            case TransportFailed(conn=conn, error=error, tls=tls):
                if conn == self.conn and self.state is ConnState.CONNECTING:
                    self.last_error = f"{self.url}: {error}"
                    if tls:
                        self._tls_error = self.last_error
                    self._try_next(now)
            case TransportClosed(conn=conn, reason=reason):
                if conn == self.conn and self.state is ConnState.CONNECTING:
                    self.last_error = f"{self.url} closed: {reason}"
                    self._try_next(now)
                elif conn == self.conn and self.state is ConnState.CONNECTED:
                    self.last_error = f"{self.url} closed: {reason}"
                    self._lost(now, self._pause)
            case FrameReceived(conn=conn, frame=frame):
                if conn == self.conn:
                    self._heard, self._hello_at = now, None  # the primary is alive
                    self._frame(frame, now)
            case EpochSeen(epoch=epoch, primary_url=primary_url):
                self._epoch_seen(epoch, primary_url, now)
            case Tick():
                self._wake = _NEVER
                self._tick(now)
            case Close():
                self._close()
                return out
        self._schedule(now)
        return out

    # --- producing ----------------------------------------------------------------

    def _publish(self, e: Publish, now: float) -> None:
        if not e.records:
            self._out.append(PublishDone(e.ticket, (), self.group))
            return
        n = len(e.records)
        self._tickets[e.ticket] = _Ticket(e.topic, [0] * n, n)
        key = (e.topic, e.durability)
        self._buffer.setdefault(key, []).append((e.ticket, e.records))
        self._buffered[key] = buffered = self._buffered.get(key, 0) + n
        if buffered >= self.settings.batch_size:
            self._flush(now)
        elif self._flush_at == _NEVER:
            self._flush_at = now + self.settings.linger

    def _flush(self, now: float) -> None:
        self._flush_at = _NEVER
        size, max_bytes = self.settings.batch_size, self.settings.batch_bytes
        deadline = now + self.settings.timeout
        for (topic, durability), segments in self._buffer.items():
            records: list[PubRecord] = []
            parts: list[tuple[int, int, int]] = []
            nbytes = 0
            for ticket, recs in segments:  # whole publish calls, cut where a batch is full
                at = 0
                for i, r in enumerate(recs):
                    cost = _record_bytes(r)
                    if records and (len(records) == size or nbytes + cost > max_bytes):
                        if i > at:
                            parts.append((ticket, at, i - at))
                            at = i
                        self._new_batch(topic, records, parts, deadline, durability)
                        records, parts, nbytes = [], [], 0
                    records.append(r)
                    nbytes += cost
                if len(recs) > at:
                    parts.append((ticket, at, len(recs) - at))
            if records:
                self._new_batch(topic, records, parts, deadline, durability)
        self._buffer.clear()
        self._buffered.clear()
        self._pump(now)

    def _new_batch(
        self,
        topic: str,
        records: list[PubRecord],
        parts: list[tuple[int, int, int]],
        deadline: float,
        durability: str = "",
    ) -> None:
        b = _Batch(self._next_id, topic, records, parts, deadline, durability=durability)
        self._next_id += 1
        self._batches[b.id] = b
        self._unsent.append(b.id)

    def _pump(self, now: float) -> None:
        if self.state is not ConnState.CONNECTED:
            return
        while self._unsent and self._in_flight < self.settings.max_in_flight:
            b = self._batches.get(self._unsent.popleft())
            if b is None or b.on_wire:
                continue
            b.attempts += 1
            b.on_wire = True
            b.sent_at = now
            self._in_flight += 1
            self._out.append(Send(Pub(b.id, b.topic, b.records, b.durability)))

    def _settle(self, b: _Batch) -> None:
        """``b`` leaves the protocol: acknowledged, refused for good, or expired."""
        del self._batches[b.id]
        if b.on_wire:
            b.on_wire = False
            self._in_flight -= 1

    def _puback(self, f: PubAck, now: float) -> None:
        b = self._batches.get(f.id)
        if b is None:
            return
        self._settle(b)
        self._pause = 0.0
        ts = f.ts
        at = 0
        for ticket, first, n in b.parts:
            t = self._tickets.get(ticket)
            if t is not None:
                t.ts[first : first + n] = ts[at : at + n]
                if f.eras:  # a moved slot: where each record's ts belongs (era, ts)
                    if t.eras is None:
                        t.eras = [-1] * len(t.ts)
                    t.eras[first : first + n] = f.eras[at : at + n]
                t.missing -= n
                if t.missing <= 0:
                    del self._tickets[ticket]
                    eras = tuple(t.eras) if t.eras is not None else ()
                    done = PublishDone(ticket, tuple(t.ts), f.group or self.group, eras)
                    self._out.append(done)
            at += n
        self._pump(now)

    def _fail_batch(self, b: _Batch, err: TritonError, now: float, *, pump: bool = True) -> None:
        self._settle(b)
        for ticket, _, _ in b.parts:
            if self._tickets.pop(ticket, None) is not None:
                self._out.append(PublishFailed(ticket, err))
        if pump:
            self._pump(now)

    def _retry_after_refusal(
        self, err: TritonError, attempts: int, hint: str | None, now: float
    ) -> bool:
        """Rule 4: a retriable refusal (not WRONG_GROUP, within ``retries``) drops the
        connection and backs off; everything unanswered is resent on the next one."""
        if not err.retriable or isinstance(err, WrongGroup) or attempts > self.settings.retries:
            return False
        self.last_error = f"{err.code}: {err.message}"
        s = self.settings
        self._pause = min(max(s.refusal_pause_min, self._pause * 2), s.refusal_pause_max)
        self._hint = hint
        self._drop(now, self._pause)
        return True

    def _pub_error(self, b: _Batch, err: TritonError, hint: str | None, now: float) -> None:
        if self._retry_after_refusal(err, b.attempts, hint, now):
            return
        self._fail_batch(b, err, now, pump=not isinstance(err, WrongGroup))
        if isinstance(err, WrongGroup):
            self._fail_topic_after(b, err, now)
            self._pump(now)  # only now: no later batch of the topic goes out meanwhile

    def _fail_topic_after(self, b: _Batch, err: WrongGroup, now: float) -> None:
        """Rule 4: the broker holds back every later batch of ``b``'s topic on this
        connection until a refused one is resent; they fail with it, in order, so that the
        caller re-routes them behind it, and none is resent on a new connection ahead of
        it."""
        for later in [x for x in self._batches.values() if x.topic == b.topic and x.id > b.id]:
            self._fail_batch(later, err, now, pump=False)
        for key in [k for k in self._buffer if k[0] == b.topic]:
            for ticket, _ in self._buffer.pop(key):
                if self._tickets.pop(ticket, None) is not None:
                    self._out.append(PublishFailed(ticket, err))
            self._buffered.pop(key, None)

    # --- requests answered once (fetch, commit, meta) ---------------------------------

    def _request(self, e: Request, now: float) -> None:
        rid = self._next_id
        self._next_id += 1
        frame = dataclasses.replace(e.frame, id=rid)
        r = self._requests[rid] = _Request(e.ticket, frame, now + self.settings.timeout)
        if self.state is ConnState.CONNECTED:
            self._send_request(r)

    def _send_request(self, r: _Request) -> None:
        r.attempts += 1
        self._out.append(Send(r.frame))

    def _answered(
        self, frame: Fetched | Committed | MetaReply | SubInfo | Members | StatsReply
    ) -> bool:
        r = self._requests.pop(frame.id, None)
        if r is None:
            return False
        self._out.append(Answered(r.ticket, frame))
        return True

    def _request_error(self, r: _Request, err: TritonError, hint: str | None, now: float) -> None:
        if self._retry_after_refusal(err, r.attempts, hint, now):
            return
        del self._requests[r.frame.id]
        self._out.append(RequestFailed(r.ticket, err))

    # --- frames from the broker -----------------------------------------------------

    def _frame(self, frame: BrokerFrame, now: float) -> None:
        if self.state is ConnState.CONNECTING:
            if isinstance(frame, MetaReply):
                self._handshake(frame, now)
            elif isinstance(frame, Error) and frame.id is None and frame.sid is None:
                self._hello_refused(frame, now)
            return
        if self.state is not ConnState.CONNECTED:
            return
        match frame:
            case Deliver():
                self._deliver(frame, now)
            case PubAck():
                self._puback(frame, now)
            case SubOk(sid=sid):
                sub = self._subs.get(sid)
                if sub is not None:
                    self._subscribed(sub, frame)
            case Error():
                self._error(frame, now)
            case MetaReply():
                if frame.epoch > self.epoch:
                    self.epoch = frame.epoch
                if frame.id:
                    self._answered(frame)
            case Fetched() | Committed() | SubInfo() | Members() | StatsReply():
                self._answered(frame)
            case Join() | Leave():
                if frame.sid in self._subs:  # C12; one for a sid given up is dropped
                    self._out.append(PresenceChanged(frame.sid, frame))

    def _error(self, f: Error, now: float) -> None:
        err = error_from_wire(
            str(f.code), f.message, f.retriable, f.primary, f.group, first=f.first, last=f.last
        )
        if f.id is not None:
            b = self._batches.get(f.id)
            r = self._requests.get(f.id)
            if b is not None:
                self._pub_error(b, err, f.primary, now)
            elif r is not None:
                self._request_error(r, err, f.primary, now)
        elif f.sid is not None:
            sub = self._subs.get(f.sid)
            if sub is not None and not (
                f.code == ErrorCode.WRONG_GROUP and self._sub_moved(sub, f)
            ):
                self._sub_error(sub, err, now)
        else:
            self.last_error = f"{err.code}: {err.message}"

    def _handshake(self, meta: MetaReply, now: float) -> None:
        wrong = bool(self.settings.group) and meta.group != self.settings.group
        if meta.role == "primary" and not wrong:
            self.state = ConnState.CONNECTED
            self.group = meta.group
            self.epoch = max(self.epoch, meta.epoch)
            self._failures = 0
            self._handshake_deadline = _NEVER
            self._disconnected_since = None
            self._probing = False
            self._next_probe = 0.0
            self._heard, self._hello_at = now, None
            self._tls_error = ""
            for sub in self._subs.values():
                self._out.append(Send(sub.frame(now)))
            self._flush_acks()
            for rid in sorted(self._requests):
                self._send_request(self._requests[rid])
            self._unsent = deque(sorted(self._batches))
            self._pump(now)
            return
        self.last_error = f"{self.url} is not the primary of {self.settings.group or meta.group}"
        self._out.append(Disconnect(self.conn))
        hint = meta.primary_url
        if hint and not wrong and hint not in self._tried:
            self._candidates.appendleft(hint)
        self._try_next(now)

    def _hello_refused(self, f: Error, now: float) -> None:
        """Rule 10: the broker refused our ``hello`` (its token)."""
        err = error_from_wire(str(f.code), f.message, f.retriable, f.primary, f.group)
        self.last_error = f"{self.url}: {err.code}: {err.message}"
        self._out.append(Disconnect(self.conn))
        if err.retriable:
            self._try_next(now)
            return
        self._fail_pending(err)
        self._lost(now, self.settings.backoff_max)

    # --- connecting -----------------------------------------------------------------

    def _try_next(self, now: float) -> None:
        while self._candidates:
            url = self._candidates.popleft()
            if url in self._tried:
                continue
            self._tried.add(url)
            self.conn += 1
            self.url = url
            self.state = ConnState.CONNECTING
            self._handshake_deadline = now + self.settings.handshake_timeout
            self._out.append(Connect(self.conn, url))
            return
        self._backoff(now)

    def _backoff(self, now: float) -> None:
        """Every candidate failed: wait, with jitter, before reading the cluster again."""
        self.state = ConnState.DISCONNECTED
        self.url = None
        self._handshake_deadline = _NEVER
        self._reconnect_at = now + self.backoff_delay(self._failures)
        self._failures += 1
        if self._tls_error:
            self._fail_pending(TlsError(f"TLS handshake refused: {self._tls_error}"))
            self._tls_error = ""

    def backoff_delay(self, failures: int) -> float:
        """``min(max, base * 2**failures)`` scaled by a random factor in [0.5, 1)."""
        s = self.settings
        return min(s.backoff_max, s.backoff_base * 2 ** min(failures, 30)) * (0.5 + self.rand() / 2)

    def _start(self, now: float) -> None:
        self._tried = set()
        self._tls_error = ""
        self._candidates = deque()
        if self._hint:
            self._candidates.append(self._hint)
            self._hint = None
            self._try_next(now)
            if self.state is ConnState.CONNECTING:
                return
        self.state = ConnState.RESOLVING
        self._out.append(Resolve())

    def _drop(self, now: float, pause: float) -> None:
        """Close the current connection on purpose and reconnect after ``pause``."""
        if self.state in (ConnState.CONNECTING, ConnState.CONNECTED):
            self._out.append(Disconnect(self.conn))
        self._lost(now, pause)

    def _lost(self, now: float, pause: float) -> None:
        self.state = ConnState.DISCONNECTED
        self.url = None
        self._handshake_deadline = _NEVER
        self._probing = False
        self._hello_at = None
        if self._disconnected_since is None:
            self._disconnected_since = now
        for b in self._batches.values():
            b.on_wire = False
        self._in_flight = 0
        self._unsent.clear()
        self._reconnect_at = now + pause

    def _epoch_seen(self, epoch: int | None, primary_url: str | None, now: float) -> None:
        self._probing = False
        if epoch is None or epoch <= self.epoch or not primary_url:
            return
        if self.state is ConnState.CONNECTED and primary_url == self.url:
            self.epoch = epoch
            return
        if self.state is ConnState.CONNECTING and primary_url == self.url:
            return  # already on the way there
        self.last_error = f"group moved to epoch {epoch} at {primary_url}"
        self._hint = primary_url
        if self.state is ConnState.RESOLVING:
            return  # the hint goes first among the candidates resolved
        self._drop(now, 0.0)

    # --- time ---------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        if now >= self._flush_at:
            self._flush(now)
        if self._acks or self._shared_acks:
            self._flush_acks()
        self._expire(now)
        s = self.settings
        if self.state is ConnState.DISCONNECTED and now >= self._reconnect_at:
            self._start(now)
        elif self.state is ConnState.CONNECTING and now >= self._handshake_deadline:
            self.last_error = f"{self.url}: no meta within {s.handshake_timeout:g}s"
            self._out.append(Disconnect(self.conn))
            self._try_next(now)
        elif self.state is ConnState.CONNECTED and s.probe_after is not None and self.url:
            if self._subs and self._hello_at is None and now - self._heard >= s.probe_after:
                self._hello_at = now  # rule 5: is a silent primary still there?
                self._out.append(Send(Hello(CLIENT_NAME)))
            oldest = self._oldest_on_wire()
            if (
                oldest is not None
                and now - oldest >= s.probe_after
                and now >= self._next_probe
                and not self._probing
            ):
                self._probing = True
                self._next_probe = now + s.probe_after
                self._out.append(Probe(self.url))

    def _oldest_on_wire(self) -> float | None:
        for b in self._batches.values():
            if b.on_wire:
                return b.sent_at if self._hello_at is None else min(b.sent_at, self._hello_at)
        return self._hello_at

    def _expire(self, now: float) -> None:
        expired = []
        for b in self._batches.values():  # in id order, so in deadline order
            if b.deadline > now:
                break
            expired.append(b)
        if expired:
            err = PublishTimeout(
                f"no acknowledgement within {self.settings.timeout:g}s"
                f" (last error: {self.last_error or 'none'})"
            )
            for b in expired:
                self._fail_batch(b, err, now)
        for r in [r for r in self._requests.values() if r.deadline <= now]:
            del self._requests[r.frame.id]
            gone = Unavailable(
                f"no answer within {self.settings.timeout:g}s"
                f" (last error: {self.last_error or 'none'})"
            )
            self._out.append(RequestFailed(r.ticket, gone))
        for sub in list(self._subs.values()):
            if self._sub_deadline(sub) <= now:
                del self._subs[sub.sid]
                self._acks.pop(sub.sid, None)
                self._shared_acks.pop(sub.sid, None)
                what = "subscribed" if sub.position is None else "connected to the group's primary"
                gone = Unavailable(
                    f"not {what} for {self.settings.timeout:g}s (last error: {self.last_error})"
                )
                self._out.append(SubscriptionFailed(sub.sid, gone))

    def _sub_deadline(self, sub: _Sub) -> float:
        """Rule 9: a first ``subok`` within ``timeout``; then no disconnection that long."""
        if sub.position is None:
            return sub.asked_at + self.settings.timeout
        if self._disconnected_since is not None and self.state is not ConnState.CONNECTED:
            return self._disconnected_since + self.settings.timeout
        return _NEVER

    def _schedule(self, now: float) -> None:
        """Ask for a :class:`Tick` at the earliest deadline not already asked for."""
        at = min(self._flush_at, self._wake_for_state())
        if self._batches:
            at = min(at, next(iter(self._batches.values())).deadline)
        if self._requests:
            at = min(at, next(iter(self._requests.values())).deadline)
        for sub in self._subs.values():
            at = min(at, self._sub_deadline(sub))
        if at < self._wake:
            self._wake = at
            self._out.append(WakeAt(at))

    def _wake_for_state(self) -> float:
        s = self.settings
        if self.state is ConnState.DISCONNECTED:
            return self._reconnect_at
        if self.state is ConnState.CONNECTING:
            return self._handshake_deadline
        if self.state is ConnState.CONNECTED and s.probe_after is not None:
            oldest = self._oldest_on_wire()
            if oldest is not None:
                return max(oldest + s.probe_after, self._next_probe)
            if self._subs:
                return self._heard + s.probe_after  # time for a liveness hello
        return _NEVER

    # --- closing --------------------------------------------------------------------

    def _close(self) -> None:
        if self.state in (ConnState.CONNECTING, ConnState.CONNECTED):
            self._out.append(Disconnect(self.conn))
        self.state = ConnState.CLOSED
        self._fail_pending(ClientClosed("client closed"))

    def _fail_pending(self, err: TritonError) -> None:
        """End every pending publish, subscription and request with ``err``."""
        for ticket in self._tickets:
            self._out.append(PublishFailed(ticket, err))
        for sid in self._subs:
            self._out.append(SubscriptionFailed(sid, err))
        for r in self._requests.values():
            self._out.append(RequestFailed(r.ticket, err))
        self._requests.clear()
        self._tickets.clear()
        self._subs.clear()
        self._batches.clear()
        self._buffer.clear()
        self._buffered.clear()
        self._unsent.clear()
        self._in_flight = 0
        self._flush_at = _NEVER
        self._acks.clear()
        self._shared_acks.clear()

    def _when_closed(self, event: Event) -> None:
        err = ClientClosed("client closed")
        if isinstance(event, Publish):
            self._out.append(PublishFailed(event.ticket, err))
        elif isinstance(event, Subscribe):
            self._out.append(SubscriptionFailed(event.sid, err))
        elif isinstance(event, Request):
            self._out.append(RequestFailed(event.ticket, err))

    # --- for tests and status -------------------------------------------------------

    @property
    def unacknowledged(self) -> list[int]:
        """Ids of the batches not yet acknowledged, in order."""
        return sorted(self._batches)

    @property
    def in_flight(self) -> int:
        return self._in_flight
