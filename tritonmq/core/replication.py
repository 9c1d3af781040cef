"""Replication decisions of one broker: the primary's commit and ISR rules, the backup's append rules.

Safety rests on these rules (docs/replication.md says why each holds):

* A batch commits when every member of ``isr ∪ joining`` has acknowledged it.
  Only committed records are delivered; a committed batch is acknowledged to its
  producer only while the ISR is ``min_insync`` strong (else the retriable
  NOT_ENOUGH_REPLICAS). Writes are accepted only while the ISR is that strong.
* The in-memory ISR shrinks only after ZooKeeper's does (the CAS succeeded) and
  grows before ZooKeeper's does (``joining``), so it is always a superset of the
  ZooKeeper ISR, from which the next primary is elected. A follower joins only
  once it holds everything before this epoch's start and everything committed.
* A backup acknowledges only frames of the epoch it follows, and a backup that
  claims primacy has already left the old epoch: an old primary can never again
  gather a full set of acknowledgements.
* A backup appends only ``ts == last + 1`` after truncating to where its history
  and the primary's agree; one that missed purged records gets their uuids.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tritonmq.config import DEDUP_PAGE
from tritonmq.core.actions import (
    Action,
    ProposeIsr,
    Replicate,
    ReplicateDedup,
    SendError,
    SendPubAck,
)
from tritonmq.core.group import GroupState
from tritonmq.core.log import GroupLog, divergence, pub_memory
from tritonmq.core.slothistory import Position
from tritonmq.errors import LogGap, StaleEpoch
from tritonmq.wire.frames import Append, DedupPage, ErrorCode, Leader, PubRecord, Purge

MAX_INFLIGHT_ENTRIES = 20_000
CATCHUP_CHUNK = 5_000  # the default of PrimaryCore's ``catchup_chunk``
CATCHUP_BYTES = 8 * 1024 * 1024


class FollowerProgress:
    """What we sent a follower and what it acknowledged.

    ``confirmed`` is False for a follower that starts by reset until its first
    acknowledgement: until it has applied the reset its log is not what ``acked``
    says, so it may not join the ISR. ``acked`` itself starts at the reset point
    (the in-flight allowance and the commit point count from there). ``feed``: the
    dedup state it is still to be sent, a page per acknowledgement, before any entry;
    it is not confirmed before it has it all (elected without it, it would store a
    retry again).
    """

    __slots__ = (
        "id",
        "boot",
        "sent",
        "acked",
        "synced",
        "last_progress",
        "confirmed",
        "feed",
        "lacking",
    )

    def __init__(
        self,
        id: str,
        boot: str,
        position: int,
        now: float,
        *,
        confirmed: bool = True,
        feed: DedupFeed | None = None,
    ) -> None:
        self.id = id
        self.boot = boot
        self.sent = position
        self.acked = position
        self.synced = 0  # its files are fsynced up to here, of what it acknowledged (D4)
        self.last_progress = now
        self.confirmed = confirmed
        self.feed = feed
        # (topic, ts): records it purged (under another primary) that we still hold, for a
        # reader of ours; it is no in-sync replica while it lacks any (S3)
        self.lacking: tuple[tuple[str, int], ...] = ()


class DedupFeed:
    """The purged uuids after ``after`` a follower is to be sent, a page at a time: each
    slot's deque copied as it was (a copy in C), cut and filtered a page per call; and
    those purged later before it was sent them (:meth:`add`). ``log`` None: only those."""

    __slots__ = ("after", "parts", "slot", "pos")

    def __init__(self, log: GroupLog | None, after: int) -> None:
        self.after = after
        held = log.purged_by_slot.items() if log is not None and log.purged_max > after else ()
        self.parts = [(slot, list(d)) for slot, d in held]
        self.slot = 0  # index into parts
        self.pos = 0  # index into that slot's uuids

    @property
    def done(self) -> bool:
        return self.slot >= len(self.parts)

    def add(self, slot: int, pairs: list[tuple[int, bytes]]) -> None:
        self.parts.append((slot, pairs))

    def page(self, size: int) -> tuple[tuple[int, bytes, int], ...]:
        """The next (ts, uuid, slot) after ``after``, from at most ``size`` looked at."""
        out: list[tuple[int, bytes, int]] = []
        after, budget = self.after, size
        while budget > 0 and self.slot < len(self.parts):
            slot, pairs = self.parts[self.slot]
            chunk = pairs[self.pos : self.pos + budget]
            out.extend((ts, u, slot) for ts, u in chunk if ts > after)
            budget -= len(chunk)
            self.pos += len(chunk)
            if self.pos >= len(pairs):
                self.slot, self.pos = self.slot + 1, 0
        return tuple(out)


class SlotOrigins(Protocol):
    """Where the records of a slot that moved were written (docs/replication.md M8): a
    retry is answered with each record's era, and with the old group's ts for one the
    slot's previous group stored and handed over."""

    @property
    def era(self) -> int: ...  # the slot's current era

    def handed(self, uuid: bytes) -> Position | None: ...

    def era_of(self, ts: int) -> int: ...  # the era of our own record at ``ts``


@dataclass(frozen=True, slots=True)
class Rejected:
    code: ErrorCode
    message: str


class PrimaryCore:
    """The primary's side of one epoch."""

    def __init__(
        self,
        me: str,
        log: GroupLog,
        state: GroupState,
        *,
        min_insync: int,
        lag_timeout: float,
        commit_ts: int,
        now: float,
        max_bytes: int = 1 << 62,
        dedup_max: int = 2_000_000,
        catchup_chunk: int = CATCHUP_CHUNK,
        dedup_page: int = DEDUP_PAGE,
    ) -> None:
        if state.start_ts != log.last_ts + 1:
            raise ValueError("the epoch must start right after the primary's log end")
        self.me = me
        self.log = log
        self.epoch = state.epoch
        self.isr: set[str] = set(state.isr)
        self.boots: dict[str, str] = dict(state.boots)
        self.joining: set[str] = set()
        self.min_insync = min_insync
        self.max_bytes = max_bytes
        # Purged records whose uuids still deduplicate, at most: past it writes are refused
        # with FULL, because forgetting a uuid younger than the dedup window is not allowed.
        self.dedup_max = dedup_max
        self.lag_timeout = lag_timeout
        # Entries per catch-up append; a parameter so that the simulator, whose logs are a
        # few dozen entries, can make a catch-up take several appends (issue 6, bug 1).
        self.catchup_chunk = catchup_chunk
        self.dedup_page = dedup_page  # purged uuids a frame, to a follower that lacks them
        # The new epoch's start: a follower joins the ISR only once it holds everything
        # before it (the Kafka leader-epoch rule), whatever commit point we inherited.
        self.start_ts = state.start_ts
        self.commit_ts = min(commit_ts, log.last_ts)
        self.followers: dict[str, FollowerProgress] = {}
        # followers that acknowledged in our epoch: they applied our `leader` answer, so
        # hold nothing of an earlier epoch above the point where our logs agree
        self.heard: set[str] = set()
        self._beat_unheard = False  # the next heartbeat goes to followers not heard yet
        self.absent_since: dict[str, float] = {m: now for m in self.isr if m != me}
        self.members: dict[str, str] = {}
        self.accepting = True
        self.proposal: ProposeIsr | None = None
        self._pending: list[tuple[int, int, Any, int, tuple[int, ...], tuple[int, ...]]] = []
        # batches asked at `synced`: acknowledged once committed and fsynced by the ISR (D4)
        self._pending_synced: list[tuple[int, int, Any, int, tuple[int, ...], tuple[int, ...]]]
        self._pending_synced = []
        self.own_synced = 0  # our files are fsynced up to here
        self._seq = 0
        self._refused: dict[Any, ErrorCode] = {}
        self._beat_commit = -1
        self._forgot = 0
        log.begin_epoch(state.epoch, state.start_ts)

    @property
    def forgotten(self) -> int:
        """Purged records up to this ts deduplicate no more (R7)."""
        return self._forgot

    # --- producers -----------------------------------------------------------

    def publish(
        self,
        conn: Any,
        pub_id: int,
        topic: str,
        records: Sequence[PubRecord],
        wall_ms: int = 0,
        *,
        origins: SlotOrigins | None = None,
        synced: bool = False,
    ) -> list[Action]:
        """Stamp, dedup and replicate a batch; it is acknowledged when it commits
        (``synced``: and once every in-sync replica fsynced it, D4).

        ``origins`` (a slot that moved): a record handed over by the slot's old group is
        answered with its position there, never stored again, and the ``puback`` says
        each record's era when one is not the current era (M8).

        ``wall_ms`` (the shell's wall clock) is recorded once for the batch's new
        records and replicated with them: the ``published`` time readers see.

        A retry of records the group already holds is answered even while new
        writes are refused. Once a batch on a connection is refused, every later
        batch on it is refused too: the producer resends them all in order on a
        new connection, so no later batch can overtake the refused one.
        """
        log = self.log
        lookup = log.uuids.get
        known = [lookup(r[0]) for r in records]
        prior: dict[int, Position] = {}
        if origins is not None:
            for i, k in enumerate(known):
                if k is None and (pos := origins.handed(records[i][0])) is not None:
                    prior[i] = pos
        if None not in known or (prior and len(prior) == known.count(None)):
            stamps = [k if k is not None else prior[i].ts for i, k in enumerate(known)]
            eras = _eras(known, prior, origins)
            return self._ack_when_committed(conn, pub_id, stamps, eras, ours=known, synced=synced)
        refused = self._refused.get(conn)
        if refused is not None:
            msg = "an earlier batch on this connection was refused; resend in order"
            return [SendError(conn, refused, msg, pub_id)]
        if not self.accepting:
            msg = "primary lost its ZooKeeper session"
            return [self._refuse(conn, pub_id, ErrorCode.UNAVAILABLE, msg)]
        if len(self.isr) < self.min_insync:
            msg = f"{len(self.isr)} in-sync replica(s), {self.min_insync} required"
            return [self._refuse(conn, pub_id, ErrorCode.NOT_ENOUGH_REPLICAS, msg)]
        incoming = pub_memory(records)  # what they will cost retained, as log.bytes counts
        if incoming > self.max_bytes:
            msg = f"a batch of {incoming} bytes can never fit in max_bytes={self.max_bytes}"
            return [SendError(conn, ErrorCode.TOO_LARGE, msg, pub_id)]
        if log.purged_count + len(records) > self.dedup_max:
            msg = (
                f"the dedup table is full ({log.purged_count} uuids of purged records within"
                f" the dedup window, dedup_max={self.dedup_max}); retry later"
            )
            return [self._refuse(conn, pub_id, ErrorCode.FULL, msg)]
        if log.bytes + incoming > self.max_bytes:
            msg = (
                f"group memory is full ({log.bytes} + {incoming} > {self.max_bytes} bytes):"
                " records are kept until every subscription has acknowledged them; retry later"
            )
            return [self._refuse(conn, pub_id, ErrorCode.FULL, msg)]
        append = log.append_new
        first_new = log.last_ts + 1
        stamps = []
        ours: list[int | None] = []
        for i, ((uuid, key, value, headers), ts) in enumerate(zip(records, known, strict=True)):
            if i in prior:
                stamps.append(prior[i].ts)
                ours.append(None)
                continue
            if ts is None:
                ts = lookup(uuid)  # a uuid repeated within this batch
                if ts is None:
                    ts = append(topic, uuid, key, value, headers)
            stamps.append(ts)
            ours.append(ts)
        eras = _eras(ours, prior, origins)
        actions = self._ack_when_committed(conn, pub_id, stamps, eras, ours=ours, synced=synced)
        if log.last_ts >= first_new:
            log.mark_published(first_new, wall_ms)
            actions.extend(self._replicate_new(first_new))
            if not self._voters():
                actions.extend(self._advance_commit())
        return actions

    def _ack_when_committed(
        self,
        conn: Any,
        pub_id: int,
        stamps: list[int],
        eras: tuple[int, ...] = (),
        *,
        ours: Sequence[int | None] | None = None,
        synced: bool = False,
    ) -> list[Action]:
        """``ours``: the stamps that are our own records (others are another group's,
        committed there); the batch waits for the newest of ours to commit (``synced``:
        and to be fsynced by every in-sync replica)."""
        need = max((t for t in (stamps if ours is None else ours) if t is not None), default=0)
        if need <= (self.synced_point() if synced else self.commit_ts):
            return [self._answer(conn, pub_id, tuple(stamps), eras)]
        self._seq += 1
        waiting = self._pending_synced if synced else self._pending
        heapq.heappush(waiting, (need, self._seq, conn, pub_id, tuple(stamps), eras))
        return []

    def synced_point(self) -> int:
        """Every in-sync replica holds the log fsynced up to here, and it is committed."""
        c = min(self.commit_ts, self.own_synced)
        for v in self._voters():
            f = self.followers.get(v)
            c = min(c, f.synced if f is not None else 0)
        return c

    @property
    def wants_sync(self) -> bool:
        """A batch waits for fsyncs: followers are asked to sync what we send them soon."""
        return bool(self._pending_synced)

    def synced_to(self, ts: int) -> list[Action]:
        """Our own files are fsynced up to ``ts``."""
        self.own_synced = max(self.own_synced, min(ts, self.log.last_ts))
        return self._release_synced()

    def _release_synced(self) -> list[Action]:
        out: list[Action] = []
        waiting = self._pending_synced
        if waiting:
            point = self.synced_point()
            while waiting and waiting[0][0] <= point:
                _, _, conn, pub_id, stamps, eras = heapq.heappop(waiting)
                out.append(self._answer(conn, pub_id, stamps, eras))
        return out

    def _answer(
        self, conn: Any, pub_id: int, stamps: tuple[int, ...], eras: tuple[int, ...] = ()
    ) -> Action:
        """A committed batch is acknowledged only while the ISR is ``min_insync`` strong.

        Below it the records may be held by fewer copies than promised: the producer
        gets a retriable refusal and retries with the same uuids, which dedup maps to
        the same ts once the ISR has grown back.
        """
        if len(self.isr) < self.min_insync:
            msg = (
                f"committed on {len(self.isr)} in-sync replica(s) only,"
                f" {self.min_insync} required; retry"
            )
            return self._refuse(conn, pub_id, ErrorCode.NOT_ENOUGH_REPLICAS, msg)
        return SendPubAck(conn, pub_id, stamps, eras)

    def _refuse(self, conn: Any, pub_id: int, code: ErrorCode, message: str) -> SendError:
        self._refused[conn] = code
        return SendError(conn, code, message, pub_id)

    def _replicate_new(self, first_new: int) -> list[Action]:
        """Send fresh entries to every follower that was caught up; others are pumped on ack."""
        last = self.log.last_ts
        ready = tuple(
            f.id
            for f in self.followers.values()
            if f.sent == first_new - 1
            and last - f.acked <= MAX_INFLIGHT_ENTRIES
            and f.feed is None  # its dedup state first
        )
        for fid in ready:
            self.followers[fid].sent = last
        return [Replicate(ready, first_new, last)] if ready else []

    def _voters(self) -> set[str]:
        return (self.isr | self.joining) - {self.me}

    def _advance_commit(self) -> list[Action]:
        # What the ISR holds is committed; min_insync gates accepting and acknowledging.
        c = self.log.last_ts
        for v in self._voters():
            f = self.followers.get(v)
            if f is None:
                return []
            if f.acked < c:
                c = f.acked
        if c <= self.commit_ts:
            return self._release_synced()  # a follower's fsync may have been all it lacked
        self.commit_ts = c
        out: list[Action] = []
        pending = self._pending
        while pending and pending[0][0] <= c:
            _, _, conn, pub_id, stamps, eras = heapq.heappop(pending)
            out.append(self._answer(conn, pub_id, stamps, eras))
        return out + self._release_synced()

    def step_down(self) -> list[Action]:
        """We are no longer primary: every producer still waiting must retry at the new one."""
        self.accepting = False
        out: list[Action] = [
            SendError(
                conn,
                ErrorCode.NOT_PRIMARY,
                "primary stepped down before this batch committed",
                pub_id,
            )
            for _, _, conn, pub_id, _, _ in sorted(self._pending + self._pending_synced)
        ]
        self._pending.clear()
        self._pending_synced.clear()
        return out

    def refuse_batch(self, err: SendError) -> SendError:
        """A batch refused before it reached us (its slot is moving here, M2): every later
        batch on that connection is refused too, as after any retriable refusal, so that
        none overtakes it (the producer reconnects and resends them all in order). Not
        after WRONG_GROUP, which fails that batch only: the client re-routes it and goes
        on with this connection (client rule 4)."""
        if err.code is not ErrorCode.WRONG_GROUP:
            self._refused[err.conn] = err.code
        return err

    def drop_conn(self, conn: Any) -> None:
        """A producer went away: forget its waiting acks (the records stay)."""
        self._pending = [p for p in self._pending if p[2] is not conn]
        heapq.heapify(self._pending)
        self._pending_synced = [p for p in self._pending_synced if p[2] is not conn]
        heapq.heapify(self._pending_synced)
        self._refused.pop(conn, None)

    def append_internal(
        self, topic: str, uuid: bytes, value: bytes, wall_ms: int
    ) -> list[Action] | None:
        """Append an entry of the broker's own (a slot's handed-over dedup state) that must
        replicate and commit like a record; nothing when the log holds ``uuid`` already.
        None (refused, try later) when a write would be: it must reach ``min_insync``
        copies before anyone relies on it."""
        log = self.log
        if uuid in log.uuids:
            return []
        if not self.accepting or len(self.isr) < self.min_insync:
            return None
        first_new = log.last_ts + 1
        log.append_new(topic, uuid, None, value, None)
        log.mark_published(first_new, wall_ms)
        actions = self._replicate_new(first_new)
        if not self._voters():
            actions.extend(self._advance_commit())
        return actions

    # --- followers -----------------------------------------------------------

    def attach(
        self,
        fid: str,
        boot: str,
        epoch: int,
        epochs: Sequence[tuple[int, int]],
        last_ts: int,
        now: float,
    ) -> Leader | Rejected:
        """A backup asks to follow; answer where it must truncate to."""
        if epoch != self.epoch:
            return Rejected(
                ErrorCode.STALE_EPOCH, f"follower at epoch {epoch}, primary at {self.epoch}"
            )
        if self.members.get(fid) not in (None, boot):
            return Rejected(ErrorCode.BAD_REQUEST, f"{fid} is registered with another boot id")
        agree = divergence(epochs, last_ts, self.log.epochs, self.log.last_ts)
        reset = agree < self.log.base_ts - 1
        if (
            reset
        ):  # it lacks records we have purged (acknowledged by everyone): start it at our base
            agree = self.log.base_ts - 1
        # Records it will never see (purged) still deduplicate there, should it be elected:
        # a page with the answer, later pages (if any) one per acknowledgement.
        feed = DedupFeed(self.log, -1 if reset else agree)
        dedup = feed.page(self.dedup_page)
        more = not feed.done
        # A follower that truncates already holds everything up to ``agree``. One that
        # starts by reset holds nothing of it until it has applied our answer: it may not
        # join the ISR before its first ack (a heartbeat or the next entries bring one),
        # nor one still to be sent dedup pages.
        self.followers[fid] = FollowerProgress(
            fid, boot, agree, now, confirmed=not reset and not more, feed=feed if more else None
        )
        self.absent_since.pop(fid, None)
        purged = self.log.purge_points()
        return Leader(self.epoch, agree, list(self.log.epochs), reset, dedup, purged, more)

    def detach(self, fid: str, now: float) -> None:
        if self.followers.pop(fid, None) is not None:
            self.absent_since[fid] = now

    def pump(self, fid: str, acked: bool = False) -> list[Action]:
        """Send a lagging follower its next chunk, within its in-flight allowance; one
        still to be sent dedup pages gets the next one instead (``acked``: the last one
        was acknowledged), and entries only after the last."""
        f = self.followers.get(fid)
        if f is not None and f.feed is not None:
            if not acked:
                return []
            page = f.feed.page(self.dedup_page)
            more = not f.feed.done
            if more:
                return [ReplicateDedup(fid, DedupPage(self.epoch, page, True))]
            f.feed = None
            return [ReplicateDedup(fid, DedupPage(self.epoch, page)), *self.pump(fid)]
        last = self.log.last_ts
        if f is None or f.sent >= last or f.sent - f.acked >= MAX_INFLIGHT_ENTRIES:
            return []
        start = f.sent + 1
        end = self.log.end_within(start, min(last, f.sent + self.catchup_chunk), CATCHUP_BYTES)
        f.sent = end
        return [Replicate((fid,), start, end)]

    def acked(self, fid: str, epoch: int, ts: int, now: float, synced: int = 0) -> list[Action]:
        f = self.followers.get(fid)
        if f is None or epoch != self.epoch:
            return []
        self.heard.add(fid)
        if ts > f.acked:
            f.acked = min(ts, f.sent)
            f.last_progress = now
        if synced > f.synced:  # of what it holds as we do (it acknowledged up to there)
            f.synced = min(synced, f.acked)
        f.confirmed = f.feed is None
        out = self._advance_commit()
        out.extend(self.pump(fid, acked=True))
        if self.proposal is None:
            p = self._maybe_admit(f)
            if p is not None:
                out.append(p)
        return out

    def isr_followed(self) -> bool:
        """Has every other ISR member acknowledged us in our epoch? Until then one may hold
        records of an earlier epoch above our log end (never committed, so not ours) that
        a primary elected from it after us would commit: our inherited commit point says
        nothing of them, so a seal point taken from our log is none before this (M7)."""
        unheard = self._voters() - self.heard
        self._beat_unheard = bool(unheard)  # an idle group would send them nothing to ack
        return not unheard

    def purged_by(self, fid: str, points: Sequence[tuple[str, int]], kept: int) -> None:
        """Follower ``fid`` purged ``points`` (topic, newest ts) under another primary and
        keeps its log up to ``kept``; what of that we still hold, it lacks."""
        f = self.followers.get(fid)
        if f is not None:
            f.lacking = tuple((t, min(ts, kept)) for t, ts in points)
            self._lacks(f)

    def _lacks(self, f: FollowerProgress) -> bool:
        """Does ``f`` lack records we hold? (Points we purged past since are dropped.)"""
        if not f.lacking:
            return False
        topics = self.log.topics
        f.lacking = tuple(
            (t, ts)
            for t, ts in f.lacking
            if (tl := topics.get(t)) is not None
            and (first := tl.first_ts()) is not None
            and first <= ts
        )
        return bool(f.lacking)

    def _maybe_admit(self, f: FollowerProgress) -> ProposeIsr | None:
        """A follower that holds everything committed and everything before our epoch's
        start joins the ISR (counted at once). Our commit point alone is not enough: a new
        primary inherits it from its backup role, possibly behind what was acknowledged.
        Nor is holding them: one that purged records we keep for a reader waits until we
        purged them too (S3; elected without them, it would lose them for that reader)."""
        if f.id in self.isr or self.members.get(f.id) != f.boot or not f.confirmed:
            return None
        if self._lacks(f):
            return None
        if f.acked < max(self.commit_ts, self.start_ts - 1):
            return None
        self.joining.add(f.id)
        isr = tuple(sorted(self.isr | {f.id}))
        boots = {**{m: self.boots[m] for m in self.isr}, f.id: f.boot}
        self.proposal = ProposeIsr(isr, boots, f"{f.id} caught up")
        return self.proposal

    # --- membership, time, ZooKeeper ----------------------------------------

    def members_changed(self, members: Mapping[str, str], now: float) -> list[Action]:
        self.members = dict(members)
        return self.tick(now)

    def tick(self, now: float) -> list[Action]:
        """Drop laggards and vanished members from the ISR; admit caught-up followers.

        Also re-evaluates the commit point, which nothing else would do for a new
        primary that is alone in the ISR and holds entries of the previous epoch.
        """
        out: list[Action] = self._advance_commit()
        if self.proposal is not None:
            return out
        last = self.log.last_ts
        for m in sorted(self.isr - {self.me}):
            reason = ""
            if self.members.get(m) != self.boots.get(m):
                reason = f"{m} left the group" if m not in self.members else f"{m} restarted"
            else:
                f = self.followers.get(m)
                if f is None:
                    since = self.absent_since.setdefault(m, now)
                    if now - since > self.lag_timeout:
                        reason = f"{m} has not followed for {now - since:.1f}s"
                elif self._lacks(f):
                    reason = f"{m} lacks records it purged under another primary that we keep"
                elif f.acked >= last:
                    f.last_progress = now
                elif now - f.last_progress > self.lag_timeout:
                    reason = f"{m} lags {last - f.acked} entries for {now - f.last_progress:.1f}s"
            if reason:
                isr = tuple(sorted(self.isr - {m}))
                self.proposal = ProposeIsr(isr, {x: self.boots[x] for x in isr}, reason)
                return [*out, self.proposal]
        for f in self.followers.values():
            p = self._maybe_admit(f)
            if p is not None:
                return [*out, p]
        return out

    def isr_changed(self, state: GroupState) -> list[Action]:
        """Our CAS (or a re-read) gave a new state of the same epoch."""
        self.proposal = None
        self.isr = set(state.isr)
        self.boots = dict(state.boots)
        self.joining -= self.isr
        return self._advance_commit()

    def proposal_failed(self) -> None:
        """The CAS lost; roll back the optimistic join so the next tick decides afresh."""
        if self.proposal is not None:
            self.joining -= set(self.proposal.isr) - self.isr
        self.proposal = None

    def heartbeat(self) -> tuple[str, ...]:
        """Caught-up followers to tell the commit point, when no new entries carried it.

        A caught-up follower that has not confirmed its reset yet is beaten on every
        call: its acknowledgement is what lets it into the ISR, and in a group below
        ``min_insync`` no write (and so no new commit point) would ever bring one. So is
        one not heard in our epoch yet, after :meth:`isr_followed` said we wait for it.
        """
        last = self.log.last_ts
        unheard, self._beat_unheard = self._beat_unheard, False
        waiting = tuple(
            f.id
            for f in self.followers.values()
            if f.sent == last and (not f.confirmed or (unheard and f.id not in self.heard))
        )
        if self._beat_commit == self.commit_ts:
            return waiting
        self._beat_commit = self.commit_ts
        return tuple(f.id for f in self.followers.values() if f.sent == last)

    def entries_for(
        self, start: int, end: int
    ) -> tuple[int, int, int, list[Any], tuple[tuple[int, int], ...]]:
        log = self.log
        entries = log.entries_between(start, end)
        return self.epoch, self.commit_ts, start, entries, tuple(log.published_between(start, end))

    def purge(self, upto: Mapping[str, int], forget: int) -> Purge | None:
        """Purge what every subscription has let go of, here and (returned) on every backup.

        Only committed records are ever purged; ``forget`` ends deduplication of purged
        records up to that ``ts`` (the caller's dedup window; never earlier, whatever
        the count: memory is bounded by refusing writes, see ``dedup_max``).
        """
        lagging = [f for f in self.followers.values() if f.sent < self.commit_ts]
        done = []
        for t, ts in upto.items():
            n = self.log.purge(t, min(ts, self.commit_ts))
            if not n:
                continue
            # Each topic's newest record purged, not the bound asked for: a backup that
            # holds none of them (caught up over them as ``None``) remembers that (S6).
            done.append((t, self.log.last_purged(t)))
            if lagging:
                self._send_purged_uuids(lagging, *self.log.purged_tail(t, n))
        forget = min(forget, self.commit_ts)
        if forget > self._forgot:
            self.log.forget_uuids_upto(forget)
            self._forgot = forget
        elif not done:
            return None
        return Purge(self.epoch, done, self._forgot)

    def _send_purged_uuids(
        self, followers: Sequence[FollowerProgress], slot: int, pairs: list[tuple[int, bytes]]
    ) -> None:
        """Purged records a catching-up follower was not sent yet reach it as ``None``:
        their uuids go to it first, with its dedup pages, or elected it would store a
        retry of one again (R6). Not in sync, it is not confirmed before it has them."""
        for f in followers:
            missed = [p for p in pairs if p[0] > f.sent]
            if missed:
                if f.feed is None:
                    f.feed = DedupFeed(None, -1)
                f.feed.add(slot, missed)
                f.confirmed = False


def _eras(
    ours: Sequence[int | None], prior: Mapping[int, Position], origins: SlotOrigins | None
) -> tuple[int, ...]:
    """Each record's era, or () when every one is ours, of the current era (as in a slot
    that never moved: its pubacks do not change). A handed-over record always says its
    era: its ts is the old group's, not the answering group's."""
    if origins is None:
        return ()
    eras = tuple(
        prior[i].era if i in prior else origins.era_of(ts) if ts is not None else origins.era
        for i, ts in enumerate(ours)
    )
    return () if not prior and all(e == origins.era for e in eras) else eras


class BackupCore:
    """A backup's side: truncate to agreement, then append what the primary sends."""

    def __init__(self, log: GroupLog, epoch: int) -> None:
        self.log = log
        self.epoch = epoch
        self.commit_ts = 0
        self.synced = False

    def on_leader(self, lead: Leader) -> int:
        """Apply the primary's answer to our ``follow``; returns how many entries were cut."""
        if lead.epoch != self.epoch:
            raise StaleEpoch(f"leader answered for epoch {lead.epoch}, we follow {self.epoch}")
        if lead.reset:
            cut = len(self.log)
            self.log.reset_to(lead.truncate_to + 1)
        else:
            cut = self.log.truncate_after(lead.truncate_to)
        self.log.adopt_epochs(lead.truncate_to, lead.epochs)
        self.log.adopt_dedup(lead.dedup)
        self.log.purge_as_primary(lead.purged)
        self.synced = True
        return cut

    def on_append(self, ap: Append) -> int:
        """Append a batch; returns the ts to acknowledge."""
        if ap.epoch != self.epoch:
            raise StaleEpoch(f"append from epoch {ap.epoch}, we follow {self.epoch}")
        if not self.synced:
            raise LogGap("append before the follow handshake")
        self.log.append_replicated(ap.start, ap.entries)
        if ap.entries and ap.published:
            self.log.adopt_published(ap.published)
        if ap.commit > self.commit_ts:
            self.commit_ts = min(ap.commit, self.log.last_ts)
        return self.log.last_ts

    def on_dedup(self, page: DedupPage) -> None:
        """A later page of the leader answer's dedup state (the purged uuids we lack)."""
        if page.epoch != self.epoch:
            raise StaleEpoch(f"dedup page from epoch {page.epoch}, we follow {self.epoch}")
        if not self.synced:
            raise LogGap("dedup page before the follow handshake")
        self.log.adopt_dedup(page.dedup)

    def on_purge(self, p: Purge) -> None:
        """Purge in step with the primary (it never purges past what ZooKeeper holds)."""
        if p.epoch != self.epoch:
            raise StaleEpoch(f"purge from epoch {p.epoch}, we follow {self.epoch}")
        self.log.purge_as_primary(p.topics)
        self.log.forget_uuids_upto(p.forget)
