"""The broker's replication links, both ends: followers of ours, our link to a primary.

A mixin of :class:`tritonmq.core.broker.BrokerCore`, split out for its size: as primary
it admits a follower (the follow handshake, the proof, :meth:`PrimaryCore.attach`) and
forgets it when its link goes; as backup it opens, restarts and drops its link to the
primary, suspects a primary whose port refuses connections, and applies what the
primary sends (:class:`BackupCore`). The state it uses is declared below; BrokerCore
owns it and supplies ``_primary_out`` and ``_reconcile``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from tritonmq.config import BrokerConfig
from tritonmq.core.actions import (
    Action,
    CloseLink,
    LogLine,
    SendLeader,
    SendPurge,
    SendShared,
    SendToPrimary,
    StartFollowing,
    StopFollowing,
    SyncLog,
)
from tritonmq.core.actions import Level as L
from tritonmq.core.delivery import Delivery
from tritonmq.core.events import FollowerFrame, LinkEnd, LinkEvent, PrimaryFrame
from tritonmq.core.group import Member
from tritonmq.core.log import GroupLog
from tritonmq.core.moves import SlotMoves
from tritonmq.core.peerauth import FollowGate, follow_proof
from tritonmq.core.replication import BackupCore, PrimaryCore, Rejected
from tritonmq.core.roles import FollowLink, Role
from tritonmq.errors import ReplicationError
from tritonmq.wire.frames import (
    Append,
    DedupPage,
    ErrorCode,
    Follow,
    Leader,
    Purge,
    ReplAck,
    SharedAck,
    SharedState,
)

DEAD_AFTER_REFUSALS = 3  # refused follow connections in a row...
DEAD_AFTER_SECONDS = 0.1  # ...over at least this long: the primary's process is gone
MAX_UNANSWERED = 4  # shared frames in flight to the backups while records wait (S8)


class ReplicationLinks:
    """Follow links in and out of a broker; BrokerCore's state, declared here."""

    cfg: BrokerConfig
    me: Member
    cluster_secret: bytes | None
    follow_gate: FollowGate
    log: GroupLog
    delivery: Delivery
    members: dict[str, Member]
    primary: PrimaryCore | None
    backup: BackupCore | None
    commit_ts: int
    synced_ts: int
    follow: FollowLink | None
    suspect: Member | None
    links: dict[str, Any]
    link_ids: dict[int, str]
    moves: SlotMoves
    _requests: int

    def _primary_out(self, p: PrimaryCore, actions: Sequence[Action], now: float) -> list[Action]:
        raise NotImplementedError  # BrokerCore's

    def _reconcile(self, now: float) -> list[Action]:
        raise NotImplementedError  # BrokerCore's

    @property
    def role(self) -> Role:
        raise NotImplementedError  # BrokerCore's

    def _set_role(self, role: Role, why: str) -> None:
        raise NotImplementedError  # BrokerCore's

    # --- followers of ours ----------------------------------------------------------------

    def _follower_frame(self, ev: FollowerFrame, final: bool = False) -> list[Action]:
        link, frame, now = ev.link, ev.frame, ev.now
        p = self.primary
        if isinstance(frame, ReplAck | SharedAck) and id(link) not in self.link_ids:
            # A link that never followed (issue 26): kept open, 10,400 of them took a
            # primary to its open-file limit. An ack of a link replaced meanwhile closes
            # one already being closed.
            msg = "a replication link sends follow first (and only as a member)"
            return [CloseLink(link, msg, ErrorCode.BAD_REQUEST)]
        if isinstance(frame, ReplAck):
            fid = self.link_ids.get(id(link))
            if p is None or fid is None:
                return []
            acked = p.acked(fid, frame.epoch, frame.ts, now, frame.synced)
            return self._primary_out(p, acked, now)
        if isinstance(frame, SharedAck):
            fid, gate = self.link_ids.get(id(link)), self.delivery.gate
            if p is not None and fid is not None and gate is not None and frame.epoch == p.epoch:
                gate.acked_by(fid, frame.seq)  # what it confirms goes out after this event
            return []
        if p is None or frame.group != self.cfg.group:
            return [CloseLink(link, "not the primary", ErrorCode.NOT_PRIMARY)]
        refused = self.follow_gate.judge(ev, self.me.id, self.members, final=final)
        if refused is True:  # not in our view yet: its registration's watch brings a view
            return []
        if isinstance(refused, Rejected):
            level = L.WARNING if refused.code is ErrorCode.UNAUTHENTICATED else L.INFO
            why = f"follow as {frame.id[:40]!r} refused: {refused.message}"
            return [CloseLink(link, refused.message, refused.code), LogLine(level, why)]
        res = p.attach(frame.id, frame.boot, frame.epoch, frame.epochs, frame.last_ts, now)
        if isinstance(res, Rejected):
            return [CloseLink(link, res.message, res.code)]
        out: list[Action] = []
        old = self.links.get(frame.id)
        if old is not None and old is not link:
            self.link_ids.pop(id(old), None)
            out.append(CloseLink(old, "replaced by a newer link"))
        self.links[frame.id] = link
        self.link_ids[id(link)] = frame.id
        out.append(SendLeader(link, res))
        out.append(LogLine(L.INFO, f"{frame.id} follows from ts {res.truncate_to}"))
        out.extend(self._purge_as_follower(p, frame.purged, res.truncate_to))
        p.purged_by(frame.id, frame.purged, res.truncate_to)
        # Our shared state before any append: whatever admits it to the ISR later comes
        # after it on this link, so no in-sync backup lacks it (S8).
        out.extend(self._send_shared(p))
        out.extend(self._primary_out(p, p.pump(frame.id), now))
        return out

    def _purge_as_follower(
        self, p: PrimaryCore, purged: Sequence[tuple[str, int]], kept: int
    ) -> list[Action]:
        """Purge what a new follower purged and we still hold (up to ``kept``, the ts it
        keeps of its log): an earlier primary purged it while we did not follow it (S3).
        Kept here, a durable subscription created from it (``earliest``) was stored below
        what our backups hold, and one of them elected skipped it silently (simulator seed
        360 of ``--groups 3 --moves 6 --refusals --check-whole``). Nobody needs it: it was
        purged by S2 there, and what a subscriber here still holds is kept (``holds``)."""
        if not self.delivery.loaded:
            return []  # S4: not before we know every durable subscription
        holds = self.delivery.holds()
        points: dict[str, int] = {}
        for topic, upto in purged:
            t = self.log.topics.get(topic)
            first = t.first_ts() if t is not None else None
            upto = min(upto, kept, holds.get(topic, upto))
            if first is not None and first <= upto:
                points[topic] = upto
        frame = p.purge(points, 0) if points else None
        if frame is None:
            return []
        why = f"purged {len(frame.topics)} topic(s) as far as a follower had"
        return [SendPurge(tuple(self.links.values()), frame), LogLine(L.INFO, why)]

    def _follower_gone(self, link: Any, now: float) -> list[Action]:
        self.follow_gate.drop(link)
        fid = self.link_ids.pop(id(link), None)
        if fid is None or self.links.get(fid) is not link:
            return []
        del self.links[fid]
        if self.primary is not None:
            self.primary.detach(fid, now)
        return [LogLine(L.INFO, f"{fid} stopped following")]

    def _send_shared(self, p: PrimaryCore) -> list[Action]:
        """Our shared subscriptions to every backup, if they changed or a link is new."""
        links = tuple(self.links.values())
        if not links:  # no backup to tell: no snapshot to build; the next one gets everything
            self.delivery.mirror.sent_nothing()
            return []
        frame = self.delivery.shared_due(p.epoch, map(id, links))
        return [SendShared(links, frame)] if frame is not None else []

    def _shared_out(self) -> list[Action]:
        """Shared records go to members once every in-sync backup has a frame that says who
        holds them (S8). At most ``MAX_UNANSWERED`` frames wait for answers: what is decided
        meanwhile goes in the next, so a busy subscription costs a frame per round trip to
        the backups, not one per record."""
        p, gate = self.primary, self.delivery.gate
        if p is None or gate is None or not (gate.waiting or gate.pending):
            return []
        mirror = self.delivery.mirror
        backups = (p.isr | p.joining) - {self.me.id}
        out: list[Action] = []
        if not backups:  # nobody to wait for: at once (followers hear of it on the tick)
            gate.framed(mirror.seq)
            out.extend(gate.release(mirror.seq, self.delivery.consumers))
            return out
        out.extend(gate.release(gate.confirmed(backups, 0), self.delivery.consumers))
        if gate.waiting and self.links and gate.unanswered() < MAX_UNANSWERED:
            sent = self._send_shared(p)
            gate.framed(mirror.seq)  # in the frame just sent (or the last: nothing changed)
            if not sent:  # that last frame may be answered already
                out.extend(gate.release(gate.confirmed(backups, 0), self.delivery.consumers))
            out.extend(sent)
        return out

    # --- following a primary --------------------------------------------------------------

    def _start_following(self, primary: Member, epoch: int) -> list[Action]:
        out = self._stop_following()
        if self.suspect is not None and self.suspect.id != primary.id:
            self.suspect = None
        self._requests += 1
        self.follow = FollowLink(self._requests, primary, epoch)
        self.backup = BackupCore(self.log, epoch)
        self.backup.commit_ts = self.commit_ts
        self._set_role(Role.FOLLOWING, f"following {primary.id} at epoch {epoch}")
        out.append(StartFollowing(self._requests, primary))
        out.append(LogLine(L.INFO, f"following {primary.id} at epoch {epoch}"))
        return out

    def _stop_following(self) -> list[Action]:
        if self.backup is not None:
            self.commit_ts = max(self.commit_ts, self.backup.commit_ts)
        f = self.follow
        self.follow = None
        if self.role is Role.FOLLOWING:
            self._set_role(Role.JOINING, "stopped following")
        return [StopFollowing(f.id)] if f is not None else []

    def _restart_following(self, why: str) -> list[Action]:
        f = self.follow
        assert f is not None
        out: list[Action] = [LogLine(L.DEBUG, f"following {f.primary.id}: {why}; reconnecting")]
        out.extend(self._start_following(f.primary, f.epoch))
        return out

    def _link_event(self, ev: LinkEvent) -> list[Action]:
        f = self.follow
        if f is None or ev.follow_id != f.id or self.backup is None:
            return []
        if ev.what is LinkEnd.CONNECTED:
            f.refused = 0
            decided: list[Action] = []
            if self.suspect == f.primary:
                # It answers after all: a later claim must not depose it on an old suspicion
                # (simulator: test_world.py::
                # test_refusals_from_a_live_primary_leave_no_stale_suspicion). What we
                # decided with it counted as gone is decided again: it may lead a later
                # epoch that we waited out instead of following (this link was kept at the
                # old epoch: test_scenarios.py::
                # test_a_backup_whose_suspect_answers_after_all_follows_the_epoch_the_view_names).
                self.suspect = None
                decided = self._reconcile(ev.now)
                if self.follow is not f or self.backup is None:
                    return decided
            self.backup.synced = False
            proof = follow_proof(
                self.cluster_secret, ev.nonce, self.cfg.group, self.me.id, self.me.boot
            )
            hello = Follow(
                self.cfg.group,
                self.me.id,
                self.me.boot,
                f.epoch,
                self.log.last_ts,
                list(self.log.epochs),
                proof,
                self.log.purge_points(),
            )
            return [*decided, SendToPrimary(f.id, hello)]
        if ev.what is LinkEnd.REFUSED:
            # Nothing listens on the primary's port: its process is gone. A few refusals in
            # a row let us claim before ZooKeeper expires its session (a freeze or a
            # partition times out instead, and waits for the session).
            f.refused, f.first_refused = f.refused + 1, f.first_refused if f.refused else ev.now
            dead = f.refused >= DEAD_AFTER_REFUSALS and ev.now - f.first_refused >= (
                DEAD_AFTER_SECONDS
            )
            if dead and self.suspect != f.primary:
                self.suspect = f.primary
                out: list[Action] = [
                    LogLine(L.WARNING, f"primary {f.primary.id} refuses connections: gone")
                ]
                return out + self._reconcile(ev.now)
            return []
        f.refused = 0  # closed, timed out, rejected: not a run of refusals any more
        self.backup.synced = False
        if ev.what is LinkEnd.REJECTED:  # a wrong secret must be loud: nothing replicates
            bad_secret = ev.detail.startswith(ErrorCode.UNAUTHENTICATED.value)
            return [
                LogLine(
                    L.WARNING if bad_secret else L.DEBUG, f"following {f.primary.id}: {ev.detail}"
                )
            ]
        return []

    def _rack(self, f: FollowLink, ts: int) -> ReplAck:
        """An acknowledgement of ``ts``, saying how far our files are fsynced (D4)."""
        return ReplAck(f.epoch, ts, min(self.synced_ts, ts))

    def _synced(self, ts: int, now: float) -> list[Action]:
        """Our segment files are fsynced up to ``ts``: a primary may acknowledge what
        waited for it, a backup tells its primary (D4)."""
        self.synced_ts = max(self.synced_ts, min(ts, self.log.last_ts))
        p, f, b = self.primary, self.follow, self.backup
        if p is not None:
            return self._primary_out(p, p.synced_to(self.synced_ts), now)
        if f is not None and b is not None:
            return [SendToPrimary(f.id, self._rack(f, b.log.last_ts))]
        return []

    def _primary_frame(self, ev: PrimaryFrame) -> list[Action]:
        f, b = self.follow, self.backup
        if f is None or b is None or ev.follow_id != f.id:
            return []
        frame = ev.frame
        try:
            if isinstance(frame, Leader):
                cut = b.on_leader(frame)
                out: list[Action] = [
                    LogLine(L.INFO, f"caught up from ts {frame.truncate_to} of {f.primary.id}")
                ]
                if cut:
                    out.append(
                        LogLine(L.WARNING, f"truncated {cut} entries not in epoch {f.epoch}")
                    )
                if frame.more:  # the next dedup page comes once this one is acknowledged
                    out.append(SendToPrimary(f.id, self._rack(f, b.log.last_ts)))
                return out
            if isinstance(frame, DedupPage):
                b.on_dedup(frame)
                return [SendToPrimary(f.id, self._rack(f, b.log.last_ts))] if frame.more else []
            if isinstance(frame, Append):
                ts = b.on_append(frame)
                self.commit_ts = max(self.commit_ts, b.commit_ts)
                # a handover's pages read as they come (unchanged: nothing done), not all
                # at once by the first write after we are elected (M2.3)
                self.moves.handed(self.log)
                ack = SendToPrimary(f.id, self._rack(f, ts))
                return [ack, SyncLog()] if frame.sync else [ack]
            if isinstance(frame, Purge):
                b.on_purge(frame)
                return []
            if isinstance(frame, SharedState):
                if frame.epoch != f.epoch:
                    return []
                self.delivery.mirror.adopt(frame)
                return [SendToPrimary(f.id, SharedAck(f.epoch, frame.seq))]
            assert_never(frame)
        except ReplicationError as e:
            return self._restart_following(str(e))
