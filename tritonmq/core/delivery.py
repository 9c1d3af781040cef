"""Windowed push of committed records to subscribers.

Each subscription has a position ``next_ts`` (the next record to push) and an
acknowledged point ``acked_ts``; at most ``window`` records and ``window_bytes``
bytes lie between them, sent in frames of at most ``frame_bytes`` (a single
larger record still goes alone). Acks are cumulative. A slow consumer therefore
holds back only itself.
"""

from __future__ import annotations

from typing import Any

from tritonmq.core.actions import Deliver
from tritonmq.core.log import GroupLog
from tritonmq.wire.frames import From

MAX_RECORDS_PER_FRAME = 2_000
FRAME_BYTES = 1024 * 1024


class Subscription:
    __slots__ = ("conn", "sid", "topic", "name", "next_ts", "acked_ts", "window", "window_bytes")

    def __init__(
        self,
        conn: Any,
        sid: int,
        topic: str,
        name: str | None,
        next_ts: int,
        window: int,
        window_bytes: int,
    ) -> None:
        self.conn = conn
        self.sid = sid
        self.topic = topic
        self.name = name
        self.next_ts = next_ts
        self.acked_ts = next_ts - 1
        self.window = window
        self.window_bytes = window_bytes


class Delivery:
    def __init__(
        self, log: GroupLog, *, window: int, window_bytes: int, frame_bytes: int = FRAME_BYTES
    ) -> None:
        self.log = log
        self.window = window
        self.window_bytes = window_bytes
        self.frame_bytes = frame_bytes
        self.subs: dict[tuple[int, int], Subscription] = {}
        self.by_topic: dict[str, list[Subscription]] = {}

    def subscribe(
        self,
        conn: Any,
        sid: int,
        topic: str,
        name: str | None,
        start: From | int,
        window: int | None,
        commit_ts: int,
    ) -> tuple[int, list[Deliver]]:
        """Register a subscription; returns its starting position and a first push."""
        if start == From.LATEST:
            next_ts = commit_ts + 1
        elif start == From.EARLIEST:
            t = self.log.topics.get(topic)
            first = t.first_ts() if t is not None else None
            next_ts = first if first is not None else commit_ts + 1
        else:
            next_ts = int(start)
        key = (id(conn), sid)
        self.unsubscribe(conn, sid)
        w = min(window or self.window, self.window)
        sub = Subscription(conn, sid, topic, name, next_ts, w, self.window_bytes)
        self.subs[key] = sub
        self.by_topic.setdefault(topic, []).append(sub)
        return next_ts, self._pump(sub, commit_ts)

    def unsubscribe(self, conn: Any, sid: int) -> None:
        sub = self.subs.pop((id(conn), sid), None)
        if sub is not None:
            peers = self.by_topic[sub.topic]
            peers.remove(sub)
            if not peers:
                del self.by_topic[sub.topic]

    def drop_all(self) -> None:
        self.subs.clear()
        self.by_topic.clear()

    def drop_conn(self, conn: Any) -> None:
        for sub in [s for s in self.subs.values() if s.conn is conn]:
            self.unsubscribe(conn, sub.sid)

    def ack(self, conn: Any, sid: int, ts: int, commit_ts: int) -> list[Deliver]:
        sub = self.subs.get((id(conn), sid))
        if sub is None or ts <= sub.acked_ts:
            return []
        sub.acked_ts = min(ts, sub.next_ts - 1)
        return self._pump(sub, commit_ts)

    def nack(self, conn: Any, sid: int, ts: int, commit_ts: int) -> list[Deliver]:
        """Redeliver from ``ts`` on (never before what was already acknowledged)."""
        sub = self.subs.get((id(conn), sid))
        if sub is None:
            return []
        sub.next_ts = max(sub.acked_ts + 1, min(ts, sub.next_ts))
        return self._pump(sub, commit_ts)

    def on_commit(self, commit_ts: int) -> list[Deliver]:
        out = []
        for subs in self.by_topic.values():
            for sub in subs:
                if sub.next_ts <= commit_ts:
                    out.extend(self._pump(sub, commit_ts))
        return out

    def _pump(self, sub: Subscription, commit_ts: int) -> list[Deliver]:
        """Frames for ``sub`` until its window is full or it has everything committed."""
        out: list[Deliver] = []
        t = self.log.topics.get(sub.topic)
        if t is None:
            return out
        while sub.next_ts <= commit_ts:
            i = t.index_of(sub.next_ts)
            a = t.index_of(sub.acked_ts + 1)
            room = min(sub.window - (i - a), MAX_RECORDS_PER_FRAME)
            room_bytes = sub.window_bytes - t.bytes_in(a, i)
            if room <= 0 or room_bytes <= 0:
                break
            recs = t.between(sub.next_ts, commit_ts, room, min(room_bytes, self.frame_bytes))
            if not recs:
                break
            sub.next_ts = recs[-1][0] + 1
            out.append(Deliver(sub.conn, sub.sid, sub.topic, recs))
        return out
