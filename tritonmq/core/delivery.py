"""Subscriptions: windowed push of committed records, offsets, and what purge must keep.

* A **consumer** is one ``(connection, sid)``. It has a position ``next_ts``, a
  cumulative ack point ``acked_ts``, and a window of records and bytes in
  flight. ``floor`` is where this attachment started, so resuming past the ack
  point does not count records it never received as in flight.
* A **durable** subscription (one with a name) outlives its consumers: its
  ``offset`` (everything up to it acknowledged) is kept in ZooKeeper. In
  ``broadcast`` mode every consumer of the name gets every record and the offset
  is the lowest of their ack points. In ``shared`` mode the consumers split the
  records; each record is acknowledged on its own, and one not acknowledged
  within ``ack_timeout``, nacked, or held by a consumer that leaves goes to
  another member.
* An **ephemeral** subscription (no name) holds records back while its
  connection lives and for ``grace`` seconds after.

:meth:`Delivery.holds` says, per topic, the last ``ts`` that purge may remove.
A durable subscription holds back from what ZooKeeper has stored, never from
what is only in memory: a new primary resumes from ZooKeeper.

A shared subscription's stored offset is its low watermark; what its members
hold or acknowledged above it the primary sends to its backups
(:mod:`tritonmq.core.shared`). A new primary restores it from there: what was
acknowledged is never handed out again, what a member held is *reserved* for that
member (by its client-chosen id) until it re-subscribes or ``grace`` passes, and
what the old primary may have handed out after its last frame (the *gap* at or above
that frame's cursor, and its free records) waits until every member it knew is back
(or ``grace``). Records committed in the new epoch go out at once. Reconnecting
members send with their ``sub`` what they acknowledged (``acked``: taken as
acknowledgements) and what their application holds unacknowledged (``held``: left
in flight with that member). Without a frame from the old primary (or for members
without an id) the new primary waits ``shared_hold`` instead. What remains: an ack
not yet replicated when the primary died, of a member that never comes back, goes
out once more.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

from tritonmq.core.actions import Deliver, RegisterSubscription, StoreOffsets
from tritonmq.core.consumers import Consumer, Durable, Mode
from tritonmq.core.log import GroupLog, TopicLog, record_size
from tritonmq.core.shared import SharedGate, SharedMirror, expand, range_minus, ranges_of
from tritonmq.errors import Purged, RequestRejected
from tritonmq.wire.frames import From, Record, SharedState, SharedSub

MAX_RECORDS_PER_FRAME = 2_000
FRAME_BYTES = 1024 * 1024


def _is_record(t: TopicLog, ts: int) -> bool:
    i = t.index_of(ts)
    return i < len(t.records) and t.records[i][0] == ts


def check_retained(log: GroupLog, topic: str, start: int) -> None:
    """Raise :class:`Purged` when records of ``topic`` at or after ``start`` were purged:
    a reader starting there would skip them without knowing."""
    last = log.last_purged(topic)
    if last >= start:
        raise Purged(
            f"records of topic {topic!r} from ts {start} to {last} were purged",
            first=start,
            last=last,
        )


class Delivery:
    def __init__(
        self,
        log: GroupLog,
        *,
        window: int,
        window_bytes: int,
        frame_bytes: int = FRAME_BYTES,
        ack_timeout: float = 30.0,
        grace: float = 10.0,
        shared_hold: float = 0.0,
        confirm_shared: bool = False,
    ) -> None:
        self.log = log
        self.window = window
        self.window_bytes = window_bytes
        self.frame_bytes = frame_bytes
        self.ack_timeout = ack_timeout
        self.grace = grace
        self.shared_hold = shared_hold
        self.consumers: dict[tuple[int, int], Consumer] = {}
        self.by_topic: dict[str, list[Consumer]] = {}
        self.by_conn: dict[int, set[int]] = {}  # id(conn) -> its sids: caps, drop_conn
        self.pushed = 0  # the commit point on_commit last pushed up to
        self.topic_order: dict[str, int] = {}  # topic of by_topic -> when it entered it
        self._topic_seq = 0
        self.shared_topics: dict[str, int] = {}  # topic -> its consumers in shared mode
        self.durables: dict[tuple[str, str], Durable] = {}
        self.ghosts: list[
            tuple[str, int, float]
        ] = []  # (topic, acked_ts, until) of gone ephemerals
        self.loaded = False  # durable subscriptions read from ZooKeeper: purge may run
        self.frozen_until = 0.0  # no purge before this (unnamed subscribers may reattach)
        self.mirror = SharedMirror()
        # confirm_shared: shared records wait for the backups to know who holds them (S8)
        self.gate = SharedGate() if confirm_shared else None

    # --- durable subscriptions known to ZooKeeper ----------------------------------

    def load(
        self,
        durables: Iterable[tuple[str, str, str, int]],
        now: float = 0.0,
        *,
        start_ts: int | None = None,
        eras: Mapping[tuple[str, str], int] | None = None,
    ) -> None:
        """The subscriptions ZooKeeper holds for our topics: (topic, name, mode, offset),
        ``eras``: the moved slot's era each offset is of, when not 0.

        A shared one is restored from what the old primary last sent us about it, if that
        is of the same era; records it may have handed out after that (below ``start_ts``,
        our epoch's first) wait for its members (see the module's docstring)."""
        for topic, name, mode, offset in durables:
            d = self.durables.get((topic, name))
            if d is None:
                d = Durable(topic, name, Mode(mode), offset, offset)
                if d.mode is Mode.SHARED:
                    end = self.log.last_ts if start_ts is None else start_ts - 1
                    snap = self.mirror.subs.get((topic, name))
                    if snap is not None and snap.era != (eras or {}).get((topic, name), 0):
                        # another era's ts (one we handed on, since let go: the mirror
                        # keeps what it was told last): restored, its offset jumped over
                        # this era's records (simulator scenario
                        # test_a_shared_subscription_is_restored_only_from_a_state_of_its_era)
                        snap = None
                    self._restore(d, snap, end, now)
                self.durables[(topic, name)] = d
            else:
                if d.stored is None:
                    self._held(d, offset)
                d.stored = offset if d.stored is None else max(d.stored, offset)
        self.loaded = True

    def _restore(self, d: Durable, snap: SharedSub | None, end: int, now: float) -> None:
        """Take over shared subscription ``d`` whose records up to ``end`` the old primary
        may have handed out; ``snap``: what it last told us (None: nothing)."""
        t = self.log.topics.get(d.topic)
        d.release_at = now + self.grace
        d.gap_open = False
        if snap is None:
            old_cursor = d.offset + 1
            d.resume_at = now + self.shared_hold
        else:
            d.offset = max(d.offset, snap.offset)
            old_cursor = max(snap.cursor, d.offset + 1)
            for member, rs in snap.held:
                for ts in expand(t, rs, end):
                    if ts > d.offset:
                        d.reserved[ts] = member or None
            for ts in expand(t, snap.free, end):
                if ts > d.offset:
                    d.reserved.setdefault(ts, None)
            d.gap_skip.update(ts for ts in expand(t, snap.ahead, end) if ts >= old_cursor)
            d.gap_skip.update(ts for ts in d.reserved if ts >= old_cursor)
            d.awaiting = set(snap.members) - {""}
            d.away = dict.fromkeys(d.awaiting, d.release_at)
            if any(not m for m, _ in snap.held):
                d.resume_at = now + self.shared_hold  # members without an id: the old rule
        d.cursor = max(end + 1, old_cursor)
        d.gap = (old_cursor, end)
        self._let_go(d, now)

    def _let_go(self, d: Durable, now: float, member: str = "") -> None:
        """Hand back to the pool what was reserved for a member that is back (and did not
        claim it) or away for too long, and what is uncertain once every member the old
        primary knew is back or ``release_at`` passed."""
        if member:
            if member in d.awaiting and not d.gap_open:
                # S7: back at a new primary without claiming what the old one's last frame
                # said it held: the old primary (perhaps deposed while alive) may have
                # handed those records to another member since, when this one came back
                # to it. Unsure now: they wait with the gap for every member it named.
                for ts, who in d.reserved.items():
                    if who == member:
                        d.reserved[ts] = None
            d.awaiting.discard(member)
            d.away.pop(member, None)
        for m in [m for m, until in d.away.items() if now >= until]:
            del d.away[m]
            d.awaiting.discard(m)
        if not d.gap_open and (now >= d.release_at or (not d.awaiting and now >= d.resume_at)):
            d.gap_open = True
            d.awaiting.clear()
            d.resume_at = 0.0
        free = [
            ts
            for ts, who in d.reserved.items()
            if (who is None and d.gap_open) or (who is not None and who not in d.away)
        ]
        for ts in free:
            del d.reserved[ts]
            if ts < d.gap[0] or ts > d.gap[1]:
                heapq.heappush(d.redeliver, ts)
            else:
                d.gap_skip.discard(ts)  # the gap walk hands it out

    def shared_state(self) -> tuple[SharedSub, ...]:
        """Our shared subscriptions, as a backup must know them to take over."""
        return tuple(self._snapshot(d) for d in self.durables.values() if d.mode is Mode.SHARED)

    def _snapshot(self, d: Durable) -> SharedSub:
        t = self.log.topics.get(d.topic)
        held: dict[str, list[int]] = {}
        free: list[int] = list(d.redeliver)
        for ts, (c, _) in d.inflight.items():
            held.setdefault(c.member, []).append(ts)
        for ts, who in d.reserved.items():
            if who is None:
                free.append(ts)
            else:
                held.setdefault(who, []).append(ts)
        lo, hi = d.gap
        free_ranges: tuple[tuple[int, int], ...] = ()
        if t is not None:
            free_ranges = ranges_of(t, sorted(free))
            skip = sorted(d.gap_skip | set(free))
            free_ranges += range_minus(lo, hi, skip)
        ahead = ranges_of(t, sorted(d.ahead)) if t is not None else ()
        members = {c.member for c in d.consumers if c.member} | d.away.keys()
        return SharedSub(
            d.topic,
            d.name,
            d.offset,
            d.cursor,
            tuple(sorted((m, ranges_of(t, sorted(ts))) for m, ts in held.items() if t)),
            free_ranges,
            ahead,
            tuple(sorted(members)),
            d.era,
        )

    def shared_due(self, epoch: int, links: Iterable[int]) -> SharedState | None:
        """What to tell our backups about shared subscriptions, if it changed."""
        return self.mirror.due(epoch, self.shared_state(), links)

    def freeze_purge(self, until: float) -> None:
        """A new primary does not know the old one's unnamed subscriptions: hold everything
        until they have had time to reattach."""
        self.frozen_until = until

    def may_purge(self, now: float) -> bool:
        return self.loaded and now >= self.frozen_until

    def declare(
        self, topic: str, name: str, mode: Mode, start: From | int, commit_ts: int, era: int = 0
    ) -> RegisterSubscription:
        """A new durable subscription from ``start``, to be held in ZooKeeper; purge keeps
        its records from there on (its in-memory offset) while the registration is on its
        way. ``era``: a moved slot's era it reads (M5)."""
        next_ts = self._start_of(topic, start, None, commit_ts)
        d = Durable(topic, name, mode, max(0, next_ts - 1), None)
        d.declared = d.offset
        self.durables[(topic, name)] = d
        d.era = d.stored_era = era  # created at the era it reads (M5)
        return RegisterSubscription(topic, name, str(mode), d.offset, era=era)

    def _start_of(self, topic: str, start: From | int, d: Durable | None, commit_ts: int) -> int:
        """The first ts a reader of ``topic`` from ``start`` is handed (of durable ``d``)."""
        if isinstance(start, int):
            return start
        t = self.log.topics.get(topic)
        first = t.first_ts() if t is not None else None
        if start == From.EARLIEST and first is not None:
            # an existing one's records start after its offset at the latest: its oldest
            # record, taken as a position, moved the offset over other topics' ts, ahead
            # of every ack (simulator scenarios
            # test_attaching_with_earliest_moves_no_durable_offset_over_other_topics_records
            # and, on an empty topic, test_earliest_on_an_empty_topic_moves_no_durable_offset)
            return first if d is None else min(first, d.offset + 1)
        # latest, or earliest with nothing retained: attaching moves no durable offset
        return d.offset + 1 if d is not None else commit_ts + 1

    def registered(self, topic: str, name: str, offset: int) -> None:
        d = self.durables.get((topic, name))
        if d is not None and d.stored is None:
            self._held(d, offset)
            d.stored = offset

    @staticmethod
    def _held(d: Durable, offset: int) -> None:
        """ZooKeeper holds ``d`` at ``offset``. One a `sub` declared here at another offset
        was there already (a primary of ours deposed while alive registered it after we
        loaded): it is that subscription, acknowledged up to ``offset`` only; kept at the
        declared start, the records between were stored as acknowledged and never handed
        out (simulator scenario
        ``test_a_subscription_a_deposed_primary_registered_is_taken_at_zookeeper_s_offset``). One
        attached at once (the pre-core shell) has handed out from its start: left as is."""
        if d.declared is not None and offset != d.declared and not d.consumers:
            d.start_afresh(offset)
        d.declared = None

    def stored(self, offsets: Iterable[tuple[str, str, int]], eras: tuple[int, ...] = ()) -> None:
        for i, (topic, name, offset) in enumerate(offsets):
            d = self.durables.get((topic, name))
            if d is not None and not d.pending:  # a pending one is written by another group
                d.stored, d.stored_era = offset, eras[i] if eras else 0

    def offsets_to_store(self) -> StoreOffsets | None:
        due = [
            d
            for d in self.durables.values()
            if d.stored is not None and (d.stored != d.offset or d.stored_era != d.era)
        ]
        if not due:
            return None
        eras = tuple(d.era for d in due)  # a moved slot's offsets say their era (M5)
        return StoreOffsets(tuple((d.topic, d.name, d.offset) for d in due), eras * any(eras))

    # --- consumers -----------------------------------------------------------------

    def subscribe(
        self,
        conn: Any,
        sid: int,
        topic: str,
        name: str | None,
        start: From | int,
        window: int | None,
        commit_ts: int,
        *,
        mode: Mode = Mode.BROADCAST,
        resume: bool = False,
        now: float = 0.0,
        acked: Iterable[int] = (),
        held: Iterable[int] = (),
        member: str = "",
        era: int = 0,
        until: int | None = None,
    ) -> tuple[int, list[Deliver | RegisterSubscription]]:
        """Attach a consumer; returns where it starts and what to do first.

        ``latest`` on an existing durable subscription resumes after its offset.
        ``resume`` (a client reconnecting) moves the position, not the ack point; an
        unnamed subscriber resuming before records of its topic that were purged gets
        :class:`Purged` rather than silently skipping them.
        ``acked`` (shared mode): ts the member acknowledged, perhaps to an old primary;
        ``held``: ts its application has and has not acknowledged yet; ``member``: its id.
        ``era``, ``until``: a moved slot's era read here and its seal point (M4).
        """
        self.unsubscribe(conn, sid, now)
        out: list[Deliver | RegisterSubscription] = []
        d = self.durables.get((topic, name)) if name else None
        if resume and not name and isinstance(start, int):
            check_retained(self.log, topic, start)
        next_ts = self._start_of(topic, start, d, commit_ts)
        if d is not None and d.mode is not mode:
            raise RequestRejected(f"subscription {name!r} of {topic!r} is {d.mode}, not {mode}")
        if name and d is None:
            out.append(self.declare(topic, name, mode, next_ts, commit_ts, era))
            d = self.durables[(topic, name)]
        elif d is not None and d.mode is Mode.SHARED and isinstance(start, int) and not resume:
            # Joining an existing shared subscription takes its cursor ("earliest" and
            # "latest" only place a new one); an explicit ts is a replay for all members,
            # and what it replays is held back from purge again.
            d.cursor = next_ts
            d.offset = min(d.offset, max(0, next_ts - 1))
        ack_point = next_ts - 1
        if d is not None and (resume or start == From.LATEST):
            ack_point = min(d.offset, next_ts - 1)
        c = Consumer(conn, sid, topic, d, next_ts, ack_point)
        c.member, c.era, c.until = member, era, until
        c.window = min(window or self.window, self.window)
        c.window_bytes = self.window_bytes
        self.consumers[(id(conn), sid)] = c
        if topic not in self.by_topic:
            self.by_topic[topic] = []
            self._topic_seq += 1
            self.topic_order[topic] = self._topic_seq
        self.by_topic[topic].append(c)
        self.by_conn.setdefault(id(conn), set()).add(sid)
        self.log.topic(topic).subscribers += 1  # a subscribed topic is not freed
        if d is not None and d.mode is Mode.SHARED:
            self.shared_topics[topic] = self.shared_topics.get(topic, 0) + 1
        if d is not None:
            d.consumers.append(c)
            if d.mode is Mode.BROADCAST:
                self._broadcast_offset(d)  # a replay holds what it replays back from purge
            if d.mode is Mode.SHARED:
                cursor = d.cursor
                self._ack_shared(d, acked)
                self._claim(d, c, held, now)
                self._let_go(d, now, member)
                out.extend(self._dispatch(d, commit_ts, now))
                return cursor, out
        out.extend(self._pump(c, commit_ts))
        return next_ts, out

    def commit(
        self, topic: str, name: str, ts: int, commit_ts: int
    ) -> tuple[int, list[RegisterSubscription]]:
        """Acknowledge durable subscription ``name`` up to ``ts`` (at most the commit point)
        without consuming it; register it if missing. Never lowers its offset. Returns the
        offset now, and the registration to perform first if it is new."""
        ts = min(ts, commit_ts)
        d = self.durables.get((topic, name))
        if d is None:
            d = self.durables[(topic, name)] = Durable(topic, name, Mode.BROADCAST, ts, None)
            return ts, [RegisterSubscription(topic, name, str(Mode.BROADCAST), ts)]
        if ts > d.offset:
            d.offset = ts
            d.cursor = max(d.cursor, ts + 1)
        return d.offset, []

    def unsubscribe(
        self, conn: Any, sid: int, now: float = 0.0, *, gone: bool = False
    ) -> list[Deliver]:
        """``gone``: the connection dropped. A shared member with an id may come back: what
        it holds waits ``grace`` for it. One that unsubscribes leaves: its records go out."""
        c = self.consumers.pop((id(conn), sid), None)
        if c is None:
            return []
        peers = self.by_topic[c.topic]
        peers.remove(c)
        if not peers:
            del self.by_topic[c.topic]
            del self.topic_order[c.topic]
        sids = self.by_conn[id(conn)]
        sids.discard(sid)
        if not sids:
            del self.by_conn[id(conn)]
        t = self.log.topics.get(c.topic)
        if t is not None:
            t.subscribers -= 1
            self.log.free_if_unused(c.topic)
        d = c.durable
        if d is None:
            if self.grace > 0:
                self.ghosts.append((c.topic, c.acked_ts, now + self.grace))
            return []
        d.consumers.remove(c)
        if d.mode is Mode.SHARED:
            self.shared_topics[c.topic] -= 1
            if not self.shared_topics[c.topic]:
                del self.shared_topics[c.topic]
            same = [o for o in d.consumers if c.member and o.member == c.member]
            keep = gone and bool(c.member) and self.grace > 0
            for ts in [ts for ts, (who, _) in d.inflight.items() if who is c]:
                if same:  # it is back already, on another connection
                    self._hold(d, same[0], ts, d.inflight[ts][1])
                    continue
                del d.inflight[ts]
                if keep:
                    d.reserved[ts] = c.member
                else:
                    heapq.heappush(d.redeliver, ts)
            if keep and not same:
                d.away[c.member] = now + self.grace
        else:
            self._broadcast_offset(d)
        return []

    def subscriptions_of(self, conn: Any) -> int:
        return len(self.by_conn.get(id(conn), ()))

    def drop_conn(self, conn: Any, now: float = 0.0) -> None:
        for sid in list(self.by_conn.get(id(conn), ())):
            self.unsubscribe(conn, sid, now, gone=True)

    def drop_all(self) -> None:
        """We stopped being primary: consumers will resubscribe at the new one. What we
        knew of shared subscriptions is kept, should we be elected again first."""
        self.mirror.keep(self.shared_state())
        self.mirror.sent_nothing()
        if self.gate is not None:
            self.gate.clear()
        self.consumers.clear()
        self.by_topic.clear()
        self.topic_order.clear()
        self.shared_topics.clear()
        self.by_conn.clear()
        for name, t in list(self.log.topics.items()):
            t.subscribers = 0
            self.log.free_if_unused(name)
        self.durables.clear()
        self.ghosts.clear()
        self.loaded = False

    # --- acknowledgements ----------------------------------------------------------------

    def ack(
        self,
        conn: Any,
        sid: int,
        ts: int,
        commit_ts: int,
        many: Iterable[int] = (),
        now: float = 0.0,
    ) -> list[Deliver]:
        """Broadcast: everything up to ``ts``. Shared: ``ts`` and each of ``many``, one by one."""
        c = self.consumers.get((id(conn), sid))
        if c is None:
            return []
        d = c.durable
        if d is not None and d.mode is Mode.SHARED:
            self._ack_shared(d, (ts, *many))
            return self._dispatch(d, commit_ts, now)
        ts = max(ts, *many) if many else ts
        if ts <= c.acked_ts:
            return []
        c.acked_ts = min(ts, c.next_ts - 1)
        if d is not None:
            self._broadcast_offset(d)
        return self._pump(c, commit_ts)

    def _ack_shared(self, d: Durable, many: Iterable[int]) -> None:
        requeued = False
        for one in many:
            held = d.inflight.pop(one, None)
            if held is not None:
                self._release(d, held[0], one)
            elif one in d.redeliver:  # acked by its first holder after being requeued
                d.redeliver.remove(one)
                requeued = True
            elif one in d.reserved:  # kept for a member after a failover
                del d.reserved[one]
            elif d.gap[0] <= one <= d.gap[1]:  # the old primary may have handed it out
                d.gap_skip.add(one)
            elif d.cursor <= one <= self.log.last_ts:
                # not dispatched here yet: handed out by an old primary and acknowledged
                # there. Bounded by the log; dispatch drops it once the cursor passes it.
                d.ahead.add(one)
        if requeued:
            heapq.heapify(d.redeliver)
        d.offset = max(d.offset, d.low_watermark())

    def _claim(self, d: Durable, c: Consumer, held: Iterable[int], now: float) -> None:
        """Records an old primary handed to ``c`` that it still holds stay in flight with it."""
        t = self.log.topics.get(d.topic)
        if t is None:
            return
        deadline = now + self.ack_timeout
        requeued = False
        for ts in held:
            who = d.inflight.get(ts)
            if who is not None and who[0] is not c and c.member and who[0].member == c.member:
                self._release(d, who[0], ts)  # ours, on a connection that is not closed yet
                self._hold(d, c, ts, deadline)
                continue
            if who is not None or ts in d.ahead:
                continue  # someone has it already, or it was acknowledged
            if ts in d.redeliver:
                d.redeliver.remove(ts)
                requeued = True
            elif ts in d.reserved:  # kept for a member after a failover: this one has it
                del d.reserved[ts]
            elif d.gap[0] <= ts <= d.gap[1]:
                if ts in d.gap_skip or not _is_record(t, ts):
                    continue  # acknowledged, or not a record of this topic
                d.gap_skip.add(ts)  # the gap walk passes it by: it is out already
            elif d.cursor <= ts <= self.log.last_ts:
                if not _is_record(t, ts):
                    continue  # not a record of this topic
                d.ahead.add(ts)  # the cursor passes it by: it is out already
            else:
                continue  # acknowledged already
            self._hold(d, c, ts, deadline)
        if requeued:
            heapq.heapify(d.redeliver)

    def nack(self, conn: Any, sid: int, ts: int, commit_ts: int, now: float = 0.0) -> list[Deliver]:
        """Broadcast: redeliver from ``ts`` on. Shared: hand ``ts`` to a member again."""
        c = self.consumers.get((id(conn), sid))
        if c is None:
            return []
        d = c.durable
        if d is not None and d.mode is Mode.SHARED:
            held = d.inflight.pop(ts, None)
            if held is not None:
                self._release(d, held[0], ts)
                heapq.heappush(d.redeliver, ts)
            return self._dispatch(d, commit_ts, now)
        c.next_ts = max(c.acked_ts + 1, min(ts, c.next_ts))
        c.floor = min(c.floor, c.next_ts - 1)
        return self._pump(c, commit_ts)

    def _broadcast_offset(self, d: Durable) -> None:
        if d.consumers:
            d.offset = min(c.acked_ts for c in d.consumers)

    # --- pushing -----------------------------------------------------------------

    def on_commit(self, commit_ts: int, now: float = 0.0) -> list[Deliver]:
        """Push what newly committed. Only consumers of topics with records in the newly
        committed range are visited (a consumer of another topic has nothing new: its
        window opens on acks, which pump it); all of them when that range is the longer."""
        prev, self.pushed = self.pushed, max(self.pushed, commit_ts)
        if commit_ts - prev > len(self.consumers):
            visit: Iterable[list[Consumer]] = self.by_topic.values()
        else:
            fresh = self.log.entries_between(prev + 1, commit_ts)
            order = self.topic_order
            topics = {e[0] for e in fresh if e is not None and e[0] in order}
            topics.update(self.shared_topics)  # shared ones also redeliver on every commit
            # in by_topic's order, as a full scan would
            visit = [self.by_topic[t] for t in sorted(topics, key=order.__getitem__)]
        return self._push(visit, commit_ts, now)

    def pump(self, topics: Iterable[str], now: float) -> list[Deliver]:
        """Push to ``topics``' consumers what is committed and theirs now: a moved slot's
        seal point no longer caps them (a roll back), and nothing else may push it."""
        return self._push((self.by_topic.get(t, []) for t in topics), self.pushed, now)

    def _push(self, visit: Iterable[list[Consumer]], commit_ts: int, now: float) -> list[Deliver]:
        """Push up to ``commit_ts`` to each consumer of ``visit`` (a shared subscription
        dispatches once, however many of its members are visited)."""
        out: list[Deliver] = []
        shared: set[int] = set()
        for consumers in visit:
            for c in consumers:
                d = c.durable
                if d is not None and d.mode is Mode.SHARED:
                    if id(d) not in shared:
                        shared.add(id(d))
                        out.extend(self._dispatch(d, commit_ts, now))
                elif c.next_ts <= commit_ts:
                    out.extend(self._pump(c, commit_ts))
        return out

    def tick(self, commit_ts: int, now: float) -> list[Deliver]:
        """Redeliver what shared consumers did not acknowledge in time; forget old ghosts."""
        out: list[Deliver] = []
        self.ghosts = [g for g in self.ghosts if g[2] > now]
        for d in self.durables.values():
            if d.mode is not Mode.SHARED:
                continue
            if not d.gap_open or d.reserved or d.away:  # members away: waiting for them
                open_before = d.gap_open
                n = len(d.redeliver)
                self._let_go(d, now)
                if d.gap_open != open_before or len(d.redeliver) != n:
                    out.extend(self._dispatch(d, commit_ts, now))
            late = [ts for ts, (_, deadline) in d.inflight.items() if deadline <= now]
            for ts in late:
                who, _ = d.inflight.pop(ts)
                self._release(d, who, ts)
                heapq.heappush(d.redeliver, ts)
            if d.redeliver:  # late ones, and those a leaving member held
                out.extend(self._dispatch(d, commit_ts, now))
        return out

    def _pump(self, c: Consumer, commit_ts: int) -> list[Deliver]:
        """Frames for a broadcast consumer until its window is full or it has everything."""
        out: list[Deliver] = []
        t = self.log.topics.get(c.topic)
        if t is None:
            return out
        end = commit_ts if c.until is None else min(commit_ts, c.until)  # an era's end (M4)
        while c.next_ts <= end:
            i = t.index_of(c.next_ts)
            a = t.index_of(max(c.acked_ts, c.floor) + 1)
            room = min(c.window - (i - a), MAX_RECORDS_PER_FRAME)
            room_bytes = c.window_bytes - t.bytes_in(a, i)
            if room <= 0 or room_bytes <= 0:
                break
            recs = t.between(c.next_ts, end, room, min(room_bytes, self.frame_bytes))
            if not recs:
                break
            c.next_ts = recs[-1][0] + 1
            out.append(Deliver(c.conn, c.sid, c.topic, recs, c.era))
        return out

    def _dispatch(self, d: Durable, commit_ts: int, now: float) -> list[Deliver]:
        """Hand a shared subscription's records to its members with room, in turn."""
        out: list[Deliver] = []
        t = self.log.topics.get(d.topic)
        members = d.consumers
        if t is None or not members:
            return out
        deadline = now + self.ack_timeout
        idle = 0
        while idle < len(members):
            c = members[d.turn % len(members)]
            d.turn += 1
            room = min(c.window - c.inflight, MAX_RECORDS_PER_FRAME)
            limit = min(self.frame_bytes, c.window_bytes - c.inflight_bytes)
            if limit <= 0:  # its byte window is full (a larger record goes alone)
                room = 0
            recs: list[Record] = []
            used = 0
            end = commit_ts if d.until is None else min(commit_ts, d.until)  # an era's end
            while d.redeliver and len(recs) < room and (not recs or used < limit):
                ts = heapq.heappop(d.redeliver)
                if d.until is not None and ts > d.until:
                    continue  # restored from an old primary's gap: a later era's record
                i = t.index_of(ts)
                if i < len(t.records) and t.records[i][0] == ts:
                    recs.append(t.records[i])
                    used += t.bytes_in(i, i + 1)
            skipped = False
            if d.gap_open and len(recs) < room and used < limit:
                recs, used, skipped = self._walk_gap(d, t, recs, room, used, limit, end)
            if len(recs) < room and d.cursor <= end and used < limit:
                budget = limit - used
                fresh = t.between(d.cursor, end, room - len(recs), budget)
                if fresh:
                    d.cursor = fresh[-1][0] + 1
                    if d.ahead:
                        n = len(fresh)
                        fresh = [r for r in fresh if r[0] not in d.ahead]
                        skipped = skipped or len(fresh) < n
                        d.ahead = {ts for ts in d.ahead if ts >= d.cursor}
                    recs.extend(fresh)
                else:
                    d.cursor = end + 1
                    d.ahead = {ts for ts in d.ahead if ts > end}
            if not recs:
                # passing records that are acknowledged or out already is progress too
                idle = 0 if skipped else idle + 1
                continue
            idle = 0
            for r in recs:
                d.inflight[r[0]] = (c, deadline)
            c.inflight += len(recs)
            c.inflight_bytes += sum(map(record_size, recs))
            if self.gate is not None:
                self.gate.waiting.append((c, Deliver(c.conn, c.sid, c.topic, recs, c.era)))
            else:
                out.append(Deliver(c.conn, c.sid, c.topic, recs, c.era))
        d.offset = max(d.offset, d.low_watermark())
        return out

    def _walk_gap(
        self,
        d: Durable,
        t: TopicLog,
        recs: list[Record],
        room: int,
        used: int,
        limit: int,
        upto: int,
    ) -> tuple[list[Record], int, bool]:
        """Hand out the gap's records nobody claimed, once every member is back, up to
        ``upto`` (the commit point, or the era's seal point: a new primary's gap runs to
        its epoch's start, over a later era's records when the slot came back to us;
        simulator scenario
        ``test_a_restored_shared_subscription_hands_out_nothing_above_its_era_s_seal_point``)."""
        lo, hi = d.gap
        end = min(hi, upto)
        if lo > end:
            if lo > hi:
                d.gap_skip.clear()
            return recs, used, False
        budget = limit - used
        some = t.between(lo, end, room - len(recs), budget)
        if not some:
            d.gap = (end + 1, hi)
            return recs, used, False
        d.gap = (some[-1][0] + 1, hi)
        i = t.index_of(some[0][0])
        used += t.bytes_in(i, i + len(some))
        n = len(some)
        some = [r for r in some if r[0] not in d.gap_skip and r[0] not in d.reserved]
        return [*recs, *some], used, len(some) < n

    def _size(self, topic: str, ts: int) -> int:
        """The size of record ``ts`` of ``topic`` (0 if the log does not hold it)."""
        t = self.log.topics.get(topic)
        if t is None:
            return 0
        i = t.index_of(ts)
        return record_size(t.records[i]) if i < len(t.records) and t.records[i][0] == ts else 0

    def _hold(self, d: Durable, who: Consumer, ts: int, deadline: float) -> None:
        """Record ``ts`` is in flight with shared member ``who`` until ``deadline``."""
        d.inflight[ts] = (who, deadline)
        who.inflight += 1
        who.inflight_bytes += self._size(d.topic, ts)

    def _release(self, d: Durable, who: Consumer, ts: int) -> None:
        """Record ``ts`` is no longer in flight with shared member ``who``."""
        who.inflight -= 1
        who.inflight_bytes = max(0, who.inflight_bytes - self._size(d.topic, ts))

    # --- what purge must keep ----------------------------------------------------------

    def holds(self) -> dict[str, int]:
        """Per topic with a subscriber: the last ``ts`` purge may remove."""
        out: dict[str, int] = {}

        def keep(topic: str, ts: int) -> None:
            out[topic] = min(out.get(topic, ts), ts)

        for d in self.durables.values():
            keep(d.topic, d.hold())
        for consumers in self.by_topic.values():
            for c in consumers:
                if c.durable is None:
                    keep(c.topic, c.acked_ts)
        for topic, acked, _ in self.ghosts:
            keep(topic, acked)
        return out
