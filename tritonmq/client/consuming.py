"""The consuming half of :class:`~tritonmq.client.protocol.ClientProtocol`.

Subscriptions, deliveries and acks (rules 6 and 7 in :mod:`tritonmq.client.protocol`),
split from it along that seam to keep the module under the size limit. :class:`Consuming`
is a mixin: its methods run on the protocol object, whose fields it names below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tritonmq.client.events import (
    Action,
    DeliverRecords,
    Send,
    Subscribe,
    Subscribed,
    SubscriptionFailed,
    SubscriptionMoved,
    WakeAt,
)
from tritonmq.client.pending import Subscription as _Sub
from tritonmq.client.states import ConnState
from tritonmq.errors import TritonError, WrongGroup
from tritonmq.wire.frames import Ack, Deliver, Error, Record, SubOk, Unsub

HANDED_MAX = 100_000  # shared records handed over and not yet acknowledged, remembered


class Consuming:
    """Subscribing, delivering and acknowledging, for :class:`ClientProtocol`."""

    if not TYPE_CHECKING:  # no instance dict; mypy would hold the fields to these slots
        __slots__ = ()  # the fields are ClientProtocol's own slots

    # the protocol's fields these methods use (declared by ClientProtocol)
    rand: Callable[[], float]
    state: ConnState
    conn: int
    last_error: str
    _pause: float
    _subs: dict[int, _Sub]
    _acks: dict[int, int]
    _shared_acks: dict[int, list[int]]
    _wake: float
    _out: list[Action]

    if TYPE_CHECKING:

        def _drop(self, now: float, pause: float) -> None: ...

    def _subscribe(self, e: Subscribe, now: float) -> None:
        sub = _Sub(e.sid, e.topic, e.name, e.start, e.window, e.mode == "shared", now)
        sub.presence, sub.info = e.presence, e.info
        if sub.shared:
            sub.member = e.member or "".join(f"{int(self.rand() * 2**32):08x}" for _ in "ab")
        if isinstance(e.start, int):  # a ts of era ``era`` (a moved slot's, M3)
            sub.era = e.era
        if e.resume and isinstance(e.start, int):  # moved here from another group (M4)
            sub.position = e.start
        self._subs[e.sid] = sub
        if self.state is ConnState.CONNECTED:
            self._out.append(Send(sub.frame(now)))

    def _unsubscribe(self, sid: int) -> None:
        if sid not in self._subs:
            return
        self._flush_acks()  # acks queued for this turn reach the broker first
        del self._subs[sid]
        if self.state is ConnState.CONNECTED:
            self._out.append(Send(Unsub(sid)))

    def _ack(self, sid: int, ts: int, now: float, era: int = 0) -> None:
        sub = self._subs.get(sid)
        if sub is None or era != sub.era:  # a record of an era left behind: not ours to ack
            return
        if sub.shared:
            self._shared_acks.setdefault(sid, []).append(ts)
            sub.acknowledged(ts, now)
        elif ts > self._acks.get(sid, -1):
            self._acks[sid] = sub.acked_to = ts
        self._wake = min(self._wake, now)
        self._out.append(WakeAt(now))

    def _flush_acks(self) -> None:
        if self.state is not ConnState.CONNECTED:
            return  # kept until connected: resume does not bring those records back
        acks, self._acks = self._acks, {}
        shared, self._shared_acks = self._shared_acks, {}
        for sid, ts in acks.items():
            if sid in self._subs:
                self._out.append(Send(Ack(sid, ts)))
        for sid, many in shared.items():
            if sid in self._subs and many:
                self._out.append(Send(Ack(sid, many[0], tuple(many[1:]))))

    def _subscribed(self, sub: _Sub, f: SubOk) -> None:
        """A ``subok``. A broadcast subscription acknowledges again what its application
        acknowledged: an ack sent to a primary that died, or that reached a new one before
        the ``sub`` was attached (a named one waits for the subscriptions to load), is lost,
        and a sealed era (M5) brings no later record whose ack would cover it."""
        if sub.position is None:
            sub.position, sub.era = f.next, f.era
        elif not sub.shared and sub.acked_to >= 0 and f.era == sub.era:
            self._out.append(Send(Ack(sub.sid, sub.acked_to)))
        self._out.append(Subscribed(sub.sid, f.next))

    def _deliver(self, f: Deliver, now: float) -> None:
        sub = self._subs.get(f.sid)
        if sub is None or not f.records:
            return
        records = f.records
        if sub.shared:
            records = self._shared_repeats_dropped(sub, records, now)
            if not records:
                return
        else:
            if f.era != sub.era:  # a moved slot (M4): an older era's records came before
                if f.era < sub.era:
                    return
                sub.era, sub.max_seen, sub.acked_to = f.era, -1, -1
            seen = sub.max_seen
            if records[0][0] <= seen:  # a redelivery after a failover: drop what was handed over
                records = tuple(r for r in records if r[0] > seen)
                if not records:
                    return
            sub.max_seen = records[-1][0]
        self._out.append(DeliverRecords(f.sid, records, f.era))

    def _shared_repeats_dropped(
        self, sub: _Sub, records: tuple[Record, ...], now: float
    ) -> tuple[Record, ...]:
        """Rule 6 for a shared record this member already handed to its application."""
        keep: list[Record] = []
        for r in records:
            ts = r[0]
            if ts in sub.acked:  # acknowledged already, perhaps to an old primary: say so again
                self._shared_acks.setdefault(sub.sid, []).append(ts)
                self._wake = min(self._wake, now)
                self._out.append(WakeAt(now))
            elif sub.handed.get(ts, self.conn) != self.conn:
                sub.handed[ts] = self.conn  # the application has it; its ack will come
            else:
                sub.handed[ts] = self.conn
                if len(sub.handed) > HANDED_MAX:
                    del sub.handed[next(iter(sub.handed))]
                keep.append(r)
        return tuple(keep) if len(keep) < len(records) else records

    def _sub_moved(self, sub: _Sub, f: Error) -> bool:
        """``WRONG_GROUP`` naming a group: the subscription goes on there (M4), an unnamed
        one from ``(era, after + 1)`` when the broker says them, one with no position yet
        or a named one (its offset is its position) as it started. False: it cannot.
        One with no position yet goes on as a new start, not a resume: it was handed
        nothing, so records purged before it got there are not a gap (``earliest``
        passing eras whose records are gone)."""
        if f.group is None or (f.era is None and sub.position is not None and not sub.name):
            return False
        era, after = (None, None) if sub.name else (f.era, f.after)
        del self._subs[sub.sid]
        self._out.append(SubscriptionMoved(sub.sid, f.group, era, after, sub.position is not None))
        return True

    def _sub_error(self, sub: _Sub, err: TritonError, now: float) -> None:
        if err.retriable and not isinstance(err, WrongGroup):
            self.last_error = f"subscription {sub.sid}: {err.code}"
            self._drop(now, self._pause)
            return
        del self._subs[sub.sid]
        self._out.append(SubscriptionFailed(sub.sid, err))
