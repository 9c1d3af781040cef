"""BrokerCore: the one pure state machine of a broker.

It owns every decision a broker makes: its role, the election (a CAS on the group
state znode), the commit point, ISR proposals, the follow handshake, suspicion of a
dead primary, step-down, purge ordering and the purge freeze after an election,
and what each client frame gets. It composes :class:`PrimaryCore` (the primary's
commit and ISR rules), :class:`BackupCore` (the backup's append rules),
:class:`Delivery`, :class:`Retention` and :func:`decide`; its replication links
(both ends of the follow handshake) are :class:`~tritonmq.core.links.ReplicationLinks`.

How to drive it
---------------
Build one per broker process with its settings and its member identity (the boot
id is chosen outside: a seed reproduces a run). Feed it every event, in the order
they happen, with :meth:`BrokerCore.handle`; each call returns a ``list[Action]``
to perform in order (see :mod:`tritonmq.core.actions` for what each one means).

* ZooKeeper: report every session change (SessionChanged) and every fresh read of
  the group (ZkView: state, members, slot map). After SessionChanged(CONNECTED)
  the shell re-registers the member znode and reads: the core decides nothing
  until it sees itself registered in a view.
* CAS: ProposeState is answered with CasDone carrying OK (the written state with
  its version), CONFLICT (nothing written) or UNKNOWN (ConnectionLoss or
  SessionExpired: maybe written). The shell must not retry an UNKNOWN by itself:
  the core asks for a re-read (ReadState) and judges from the view whether its
  write happened (an election it won is adopted, an ISR change is applied) or not
  (the proposal is dropped and decided afresh). No proposal outlives its answer.
* Ticks: every ~0.1 s (Tick). Lag, offsets, purge, heartbeats, redelivery and the
  suspended-session deadline are all judged on ticks.
* Follow links: StartFollowing(follow_id) opens one; every connect, refusal,
  close and timeout comes back as LinkEvent and every frame as PrimaryFrame with
  that id. Events of another id are stale and ignored.
* A planned stop: StopRequested; the core steps down, writes offsets (waits for
  OffsetsStored, at most ``STOP_FLUSH_S``) and returns Stopped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import partial
from typing import Any, assert_never

from tritonmq.config import BrokerConfig
from tritonmq.core import limits, slotcommits
from tritonmq.core.actions import (
    Action,
    CloseLink,
    LoadSubscriptions,
    LogLine,
    ProposeIsr,
    ProposeState,
    ReadState,
    RegisterSubscription,
    Replicate,
    ReplicateDedup,
    SendDedup,
    SendEntries,
    SendError,
    SendPurge,
    Stopped,
    StoreOffsets,
    WriteLog,
)
from tritonmq.core.actions import Level as L
from tritonmq.core.auth import ClientAuth
from tritonmq.core.clientframes import ClientFrames
from tritonmq.core.delivery import Delivery
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    ClientGone,
    Event,
    FollowerFrame,
    FollowerGone,
    HandoverAnswered,
    HandoverAsked,
    LinkEvent,
    OffsetsStored,
    PrimaryFrame,
    SessionChanged,
    SessionState,
    SlotMoveBegun,
    SlotStepDone,
    StopRequested,
    SubscriptionRegistered,
    SubscriptionsLoaded,
    Synced,
    Tick,
    ZkView,
)
from tritonmq.core.group import GroupState, Member, Verdict, decide
from tritonmq.core.handover import HANDOVER_TOPIC
from tritonmq.core.invariants import broker_invariants
from tritonmq.core.journal import lowest_cut
from tritonmq.core.links import ReplicationLinks
from tritonmq.core.log import GroupLog
from tritonmq.core.moves import SlotMoves
from tritonmq.core.peerauth import FollowGate
from tritonmq.core.presence import PresenceTable
from tritonmq.core.readers import SlotReaders
from tritonmq.core.replication import CATCHUP_CHUNK, BackupCore, PrimaryCore
from tritonmq.core.requests import Commits, Loads, Registrations
from tritonmq.core.retention import Retention
from tritonmq.core.roles import CasKind, FollowLink, PendingCas, Role, RoleGate, refuse_waiting
from tritonmq.core.slotadmin import SlotAdmin
from tritonmq.core.slots import SlotMap
from tritonmq.core.stats import Rates
from tritonmq.wire.frames import Commit, ErrorCode, Sub

DURABLES_WAIT_S = 5.0  # a durable `sub` waits this long for a new primary's subscriptions
STOP_FLUSH_S = 2.0  # a planned stop waits this long for its last offsets to be written


class BrokerCore(ClientFrames, ReplicationLinks):
    def __init__(
        self,
        cfg: BrokerConfig,
        me: Member,
        cluster_secret: bytes | None = None,
        *,
        catchup_chunk: int = CATCHUP_CHUNK,
        log: GroupLog | None = None,
    ) -> None:
        self.cfg = cfg
        self.me = me
        self.cluster_secret = cluster_secret  # None: insecure_cluster (no follow proofs)
        self.follow_gate = FollowGate(cluster_secret)
        self.caps = limits.Caps.of(cfg)
        self.shares = limits.DedupShares(cfg.dedup_max_per_producer)
        self.catchup_chunk = catchup_chunk  # entries per catch-up append (the sim scales it)
        self.log = log if log is not None else GroupLog()  # restarted from disk: its own
        if cfg.data_dir:
            self.log.journal = []  # every change, written to the segment files (WriteLog)
        self.delivery = Delivery(
            self.log,
            window=cfg.window_records,
            window_bytes=cfg.window_bytes,
            ack_timeout=cfg.ack_timeout,
            grace=cfg.ephemeral_grace,
            shared_hold=min(cfg.shared_resume_hold_s, cfg.ephemeral_grace),
            confirm_shared=True,
        )
        self.retention = Retention(
            default_s=cfg.retention_s,
            per_topic=cfg.topic_retention,
            dedup_window_s=cfg.dedup_window_s,
        )
        self._gate = RoleGate()  # the role, changed only through _set_role, which logs it
        self.session = SessionState.CONNECTED
        self.suspended_since = 0.0
        self.state: GroupState | None = None
        self.members: dict[str, Member] = {}
        self.slots: SlotMap | None = None
        # slots' histories, move steps
        self.moves = SlotMoves(cfg.group, cluster_secret, cfg.dedup_page)
        self.readers = SlotReaders(self.moves)  # readers of moved slots: which era, when on
        self.slot_admin = SlotAdmin()  # admins' `slotmove`s waiting for their CAS
        self.viewed = False
        self.primary: PrimaryCore | None = None
        self.backup: BackupCore | None = None
        self.commit_ts = 0  # what we know is committed (as a backup: from the primary)
        self.synced_ts = 0  # our segment files are fsynced up to here (D4)
        self.follow: FollowLink | None = None
        self.suspect: Member | None = None  # a primary we saw die before ZooKeeper did
        self.cas: PendingCas | None = None
        self.links: dict[str, Any] = {}  # follower id -> its replication link
        self.link_ids: dict[int, str] = {}  # id(link) -> follower id
        self.durables_ready = False
        self.waiting_subs: list[ClientFrameIn] = []  # durable `sub`s and `commit`s
        self.auth = ClientAuth(cfg.auth_required, cfg.max_durable_per_principal)
        acked = partial(slotcommits.acknowledged, self.moves)
        self.commits = Commits(self.delivery, self.auth, self.readers.current_era, acked)
        self.registrations = Registrations(self.delivery)
        self.presence = PresenceTable.of(f"{me.id}.{me.boot[:6]}", cfg)
        self.rates = Rates()  # records/s accepted as primary, for `stats`
        self.stop_deadline = 0.0
        self._requests = 0
        self.loads = Loads()  # which subscriptions loads' answers are fresh enough (M9)
        self._load_retry_at: float | None = None
        self._next_offsets_at = 0.0
        self._storing = False
        self._last_wait = ""
        # S3: a primary that heard nothing for longer than the session timeout (frozen, or
        # its loop held) may be deposed without an event saying so yet: it purges nothing
        # until a view read after the gap (this ReadState request) comes in
        self._last_event_at: float | None = None
        self._unsure = 0

    # --- the one entry point ------------------------------------------------------

    def handle(self, ev: Event) -> list[Action]:
        """Apply one event; the actions to perform, in order."""
        if self.role is Role.STOPPED:
            return []
        out = self._after_gap(ev.now)
        out += self._handle(ev)
        shared = self._shared_out()  # shared records the backups have confirmed (S8)
        if shared:
            out += shared
        if self._gate.changes:
            out += self._gate.take()
        if self.log.journal:  # written before anything is acknowledged or sent (D1)
            ops, self.log.journal = tuple(self.log.journal), []
            out.insert(0, WriteLog(ops))
            if (cut := lowest_cut(ops)) is not None:  # fsynced there: others' positions now
                self.synced_ts = min(self.synced_ts, cut)
        return out

    @property
    def role(self) -> Role:
        return self._gate.role

    def _set_role(self, role: Role, why: str) -> None:
        self._gate.set(role, why)

    def invariants(self) -> None:
        """Raise AssertionError naming each invariant broken (core/invariants.py); unit
        tests and the simulator call it after every event."""
        if broken := broker_invariants(self):
            raise AssertionError(f"{self.me.id}: " + "; ".join(broken))

    def _after_gap(self, now: float) -> list[Action]:
        """Seed 74193: a primary frozen past its session's expiry woke to an old ZooKeeper
        answer and purged as the primary it no longer was, before its session's end
        reached it. After such a gap it doubts its role until a fresh view (S3)."""
        last, self._last_event_at = self._last_event_at, now
        if self.primary is None or last is None or now - last <= self.cfg.session_timeout:
            return []
        self._requests += 1
        self._unsure = self._requests
        gap = f"{now - last:.1f}s"
        return [
            LogLine(L.INFO, f"nothing heard for {gap}: no purge until ZooKeeper is read"),
            ReadState(self._requests),
        ]

    def _handle(self, ev: Event) -> list[Action]:
        match ev:
            case ClientFrameIn():
                return self._owned(self._client(ev))
            case ClientGone(conn=conn, now=now):
                self.auth.drop(conn)
                self.delivery.drop_conn(conn, now)
                if self.primary is not None:
                    self.primary.drop_conn(conn)
                self.waiting_subs = [w for w in self.waiting_subs if w.conn is not conn]
                self.commits.drop_conn(conn)
                self.moves.fences.drop_conn(conn)
                self.slot_admin.drop_conn(conn)
                return list(self.presence.drop_conn(conn))
            case FollowerFrame():
                return self._follower_frame(ev)
            case FollowerGone(link=link, now=now):
                return self._follower_gone(link, now)
            case PrimaryFrame():
                return self._primary_frame(ev)
            case LinkEvent():
                return self._link_event(ev)
            case ZkView():
                return self._view(ev)
            case SessionChanged():
                return self._session(ev)
            case CasDone():
                return self._cas_done(ev)
            case SubscriptionsLoaded():
                return self._owned(self._loaded(ev))
            case OffsetsStored():
                return self._stored(ev)
            case Synced(ts=ts, now=now):
                return self._synced(ts, now)
            case SubscriptionRegistered(topic=topic, name=name, offset=offset):
                if self.primary is None:  # step-down refused its commits and dropped it
                    return []
                self.registrations.answered(topic, name, offset is not None, ev.now)
                if offset is not None and self.readers.held_elsewhere(self.delivery, ev):
                    self.durables_ready = False  # decided at its era by a fresh load (M9)
                    out = self.commits.registered(topic, name, None, self.primary.commit_ts)
                    msg = f"{name!r} of {topic!r} is held at era {ev.era}; reading again"
                    return [LogLine(L.INFO, msg), *out, self._ask_load()]
                out = self.commits.registered(topic, name, offset, self.primary.commit_ts)
                return out + self._registered_subs(topic, name, offset, ev.now)
            case SlotStepDone():
                return self.moves.step_done(ev) + self._owner_reload()
            case SlotMoveBegun():
                return self.slot_admin.begun(ev)
            case HandoverAsked():
                return self.moves.answer_ask(ev, self.log, self.commit_ts)
            case HandoverAnswered():  # the handover entry replicates like a record
                out = self.moves.answered(ev, self.primary, self.log)
                return self._primary_out(self.primary, out, ev.now) if self.primary else out
            case Tick(now=now):
                return self._tick(now)
            case StopRequested(now=now):
                return self._stop(now)
            case _:
                assert_never(ev)

    def _owned(self, actions: list[Action]) -> list[Action]:
        """Registrations get their owner and are tracked until ZooKeeper holds them; one
        scan of the actions on the hot path (a client frame), as before."""
        if not any(type(a) is RegisterSubscription for a in actions):
            return actions
        connected = self.session is SessionState.CONNECTED
        return self.registrations.issued(self.auth.owned(actions), connected, self._fence())

    def _fence(self) -> int | None:
        """The group state's version we hold: our writes of subscriptions and offsets are
        made only while ZooKeeper's is still at it. A primary deposed while alive (its
        backups claimed on refusals, the view saying so not yet read) registered a
        subscription after its successor loaded them, and the successor, not knowing it,
        purged what it needed (simulator, ``tests/sim/test_scenarios.py``:
        ``test_a_subscription_a_deposed_primary_registered_is_taken_at_zookeeper_s_offset``
        and the remaining case of
        ``test_no_registration_is_asked_while_the_session_is_not_connected``)."""
        return self.state.version if self.state is not None else None

    def _offsets_due(self) -> StoreOffsets | None:
        """The changed offsets to write, fenced as every write of ours."""
        due = self.delivery.offsets_to_store()
        return None if due is None else dataclasses.replace(due, fence=self._fence())

    def _registered_subs(
        self, topic: str, name: str, offset: int | None, now: float
    ) -> list[Action]:
        """The `sub`s that waited for their subscription to be registered, attached now."""
        p = self.primary
        if offset is None or p is None or not self.durables_ready:
            return []  # a failed one is asked again; `_loaded` answers the rest
        out: list[Action] = []
        waiting, self.waiting_subs = self.waiting_subs, []
        for w in waiting:
            f = w.frame
            if isinstance(f, Sub) and (f.topic, f.subscription) == (topic, name):
                out.extend(self._subscribe(w.conn, f, p, now))
            else:
                self.waiting_subs.append(w)
        return out

    # --- what others may ask ----------------------------------------------------------

    def entries_for(self, start: int, end: int) -> tuple[list[Any], list[tuple[int, int]]]:
        """The log entries a SendEntries names (read when performing it), and the
        ``(first ts, wall-clock ms)`` pairs that date them, so backups agree on published times."""
        entries = self.log.entries_between(start, end)
        return entries, self.log.published_between(start, end) if entries else []

    # --- the primary's actions ----------------------------------------------------------

    def _primary_out(self, p: PrimaryCore, actions: Sequence[Action], now: float) -> list[Action]:
        """Turn PrimaryCore's requests into shell actions; deliver what newly committed."""
        out: list[Action] = []
        for a in actions:
            if type(a) is Replicate and a.start < self.log.base_ts:
                out.extend(self._resync(p, a.followers, now))
            elif type(a) is Replicate:
                links = tuple(self.links[f] for f in a.followers if f in self.links)
                if links:
                    sync = p.wants_sync
                    out.append(SendEntries(links, p.epoch, p.commit_ts, a.start, a.end, sync))
            elif type(a) is ReplicateDedup:
                link = self.links.get(a.follower)
                if link is not None:
                    out.append(SendDedup(link, a.page))
            elif type(a) is ProposeIsr:
                out.extend(self._propose_isr(p, a))
            else:
                out.append(a)
        if p.commit_ts > self.commit_ts:
            self.commit_ts = p.commit_ts
            out.extend(self.delivery.on_commit(p.commit_ts, now))
            if self.moves.active:  # a seal point or a handover entry may have committed
                out.extend(self.moves.plan(p, self.log, now, self._unregistered))
        return out

    def _unregistered(self) -> list[str]:
        """Topics of durable subscriptions declared here that ZooKeeper does not hold yet."""
        ds = self.delivery.durables.values()
        return [d.topic for d in ds if d.stored is None and not d.pending]

    def _resync(self, p: PrimaryCore, followers: Sequence[str], now: float) -> list[Action]:
        """A purge overtook these followers' catch-up: close their links, so that they follow
        again and start by reset at our base (else they would be sent nothing for good)."""
        out: list[Action] = []
        for fid in followers:
            link = self.links.pop(fid, None)
            if link is not None:
                self.link_ids.pop(id(link), None)
                p.detach(fid, now)
                out.append(CloseLink(link, "the entries you need next were purged; follow again"))
                out.append(LogLine(L.INFO, f"{fid} needs purged entries: it follows again"))
        return out

    def _propose_isr(self, p: PrimaryCore, prop: ProposeIsr) -> list[Action]:
        st = self.state
        if st is None or st.epoch != p.epoch or self.cas is not None:
            p.proposal_failed()
            return []
        new = dataclasses.replace(st, isr=prop.isr, boots=dict(prop.boots))
        self._requests += 1
        self.cas = PendingCas(self._requests, CasKind.ISR, new)
        return [ProposeState(self._requests, new, prop.reason)]

    def _become_primary(self, state: GroupState, now: float) -> list[Action]:
        out = self._stop_following()
        commit = max(self.commit_ts, self.backup.commit_ts if self.backup else 0)
        self.backup = None
        p = PrimaryCore(
            self.me.id,
            self.log,
            state,
            min_insync=self.cfg.effective_min_insync,
            lag_timeout=self.cfg.replica_lag_timeout,
            commit_ts=commit,
            now=now,
            max_bytes=self.cfg.max_bytes,
            dedup_max=self.cfg.dedup_max,
            dedup_page=self.cfg.dedup_page,
            catchup_chunk=self.catchup_chunk,
        )
        self.primary = p
        p.own_synced = min(self.synced_ts, self.log.last_ts)  # what our files hold fsynced
        self._set_role(Role.LEADING, f"elected at epoch {state.epoch}")
        self.moves.lead_changed()
        self.state = state
        # Our suspicion has done its work; kept, it would make us ignore the suspect if it
        # is elected after us (simulator: test_world.py::
        # test_a_primary_elected_on_a_suspicion_follows_the_suspect_elected_after_it).
        self.suspect = None
        self.commit_ts = p.commit_ts
        self.durables_ready = False
        # The old primary's unnamed subscribers are unknown here: purge nothing until
        # they have had their grace period to reattach (or to be told PURGED).
        self.delivery.freeze_purge(now + self.cfg.ephemeral_grace)
        out.append(self._ask_load())
        if not self.moves.map_read:
            out.append(ReadState())  # the slots' state, before any write (M7)
        out.append(
            LogLine(
                L.INFO,
                f"primary of {self.cfg.group}: epoch {state.epoch}, isr {list(state.isr)}",
            )
        )
        members = {m.id: m.boot for m in self.members.values()}
        out.extend(self._primary_out(p, p.members_changed(members, now), now))
        return out

    def _step_down(self, reason: str) -> list[Action]:
        p = self.primary
        if p is None:
            return []
        self.primary = None
        self._set_role(Role.JOINING, reason)
        self.rates.clear()
        self.moves.lead_changed()
        out: list[Action] = [
            LogLine(L.WARNING, f"stepping down as primary of epoch {p.epoch}: {reason}")
        ]
        out.extend(CloseLink(link, "primary stepped down") for link in self.links.values())
        self.links.clear()
        self.link_ids.clear()
        out.extend(p.step_down())
        for c in list(self.delivery.consumers.values()):
            out.append(SendError(c.conn, ErrorCode.NOT_PRIMARY, "primary stepped down", sid=c.sid))
        msg = f"broker {self.me.id} is not the primary of {self.cfg.group}"
        for w in self.waiting_subs:
            out.append(refuse_waiting(w, ErrorCode.NOT_PRIMARY, msg, self.primary_url()))
        self.waiting_subs.clear()
        out.extend(self._not_primary(conn, id=rid) for conn, rid in self.commits.take_all())
        self.delivery.drop_all()
        self.registrations.asked.clear()
        self.presence.clear()
        self.durables_ready = False
        if self.cas is not None and self.cas.kind is CasKind.ISR:
            self.cas = None
        return out

    # --- ZooKeeper ------------------------------------------------------------------------

    def _session(self, ev: SessionChanged) -> list[Action]:
        self.session = ev.session
        out: list[Action] = [LogLine(L.INFO, f"zookeeper session {ev.session.value}")]
        if ev.session is SessionState.SUSPENDED:
            self.suspended_since = ev.now
        elif ev.session is SessionState.LOST:
            self.viewed = False  # our member znode is gone; wait for a view that has it again
        return out + self._reconcile(ev.now)

    def _view(self, ev: ZkView) -> list[Action]:
        st, cur = ev.state, self.state
        # A view read before our ISR CAS landed can arrive after its answer: of our epoch,
        # its state is older than the one we hold and would shrink our ISR below
        # ZooKeeper's (R2). One of an older epoch is still taken: we step down and claim
        # again from it, as a late watch has always made us do (found by the simulator on
        # a variant branch, not replayable here)
        if st is None or cur is None or st.epoch != cur.epoch or st.version >= cur.version:
            self.state = st
        self.members = dict(ev.members)
        self.slots = ev.slots
        if ev.slots is not None:
            self.log.set_slots(ev.slots.slots)  # its purged uuids are kept per slot from now on
        self.moves.viewed(ev.histories, ev.slots.version if ev.slots is not None else -1)
        p, st = self.primary, ev.state
        if p is not None and st is not None and (st.epoch, st.primary) == (p.epoch, self.me.id):
            self.moves.map_read = True  # read since we were elected (M7)
        self.viewed = True
        if self._unsure and ev.read >= self._unsure:
            self._unsure = 0  # read after the gap: we act on what it says (step down or not)
        out: list[Action] = self._owner_reload()
        cas = self.cas
        if cas is not None and cas.unknown and ev.read >= cas.read:
            out.extend(self._judge_unknown(cas, ev.now))
        out += self._reconcile(ev.now)
        for held in self.follow_gate.take_held():
            out += self._follower_frame(held, final=True)
        return out + self.moves.plan(self.primary, self.log, ev.now, self._unregistered)

    def _judge_unknown(self, cas: PendingCas, now: float) -> list[Action]:
        """A re-read after a CAS of unknown outcome: did our write happen?"""
        self.cas = None
        st, want = self.state, cas.state
        wrote = (
            st is not None
            and st.epoch == want.epoch
            and st.primary == want.primary
            and st.start_ts == want.start_ts
            and tuple(st.isr) == tuple(want.isr)
            and dict(st.boots) == dict(want.boots)
        )
        if cas.kind is CasKind.CLAIM:
            self._set_role(Role.JOINING, "claim of unknown outcome judged")
            if wrote and st is not None:
                return self._become_primary(st, now)
            # As for a lost claim: the suspicion behind it is stale, or we would wait on it
            # for good while the primary we suspect is alive (simulator: test_world.py::
            # test_refusals_from_a_live_primary_leave_no_stale_suspicion).
            self.suspect = None
            out = [LogLine(L.INFO, "our claim of unknown outcome did not happen")]
            return out + self._reconcile(now)
        p = self.primary
        if p is None:
            return []
        if wrote and st is not None:
            return self._primary_out(p, p.isr_changed(st), now)
        p.proposal_failed()
        return [LogLine(L.INFO, "an ISR change of unknown outcome did not happen; deciding again")]

    def _cas_done(self, ev: CasDone) -> list[Action]:
        cas = self.cas
        if cas is None or ev.request != cas.request:
            return []
        now = ev.now
        if ev.outcome is CasOutcome.UNKNOWN:
            # judged by a read begun after this answer: one begun before may predate the
            # write: an ISR grow judged unwritten, which was written (simulator scenario
            # test_an_isr_cas_of_unknown_outcome_is_judged_by_a_read_begun_after_it)
            self._requests += 1
            cas.unknown, cas.read = True, self._requests
            return [
                LogLine(L.WARNING, f"{cas.kind.value} CAS outcome unknown; re-reading"),
                ReadState(self._requests),
            ]
        self.cas = None
        if cas.kind is CasKind.CLAIM:
            if ev.outcome is CasOutcome.OK and ev.state is not None:
                return self._become_primary(ev.state, now)
            # Lost: whoever won (or the primary that just changed the ISR) is alive. Our
            # suspicion is stale: drop it and follow whatever the fresh view says.
            self._set_role(Role.JOINING, "our claim lost")
            self.suspect = None
            return [LogLine(L.INFO, "our claim lost; re-reading the group"), ReadState()]
        p = self.primary
        if p is None:
            return []
        if ev.outcome is CasOutcome.OK and ev.state is not None:
            self.state = ev.state
            return [
                LogLine(L.INFO, f"isr at epoch {ev.state.epoch} is now {list(ev.state.isr)}"),
                *self._primary_out(p, p.isr_changed(ev.state), now),
                # A view that came while the CAS was in flight was not acted on (a member
                # that registered meanwhile would never be admitted; simulator: test_world.py::
                # test_a_member_that_registered_during_an_isr_cas_re_joins_the_isr).
                *self._reconcile(now),
            ]
        p.proposal_failed()
        return [ReadState()]

    def _registered(self) -> bool:
        return self.viewed and self.members.get(self.me.id) == self.me

    def _reconcile(self, now: float) -> list[Action]:
        """Decide the role from the session and the latest view."""
        if self.role in (Role.STEPPING_DOWN, Role.STOPPED):
            return []
        p = self.primary
        out: list[Action]
        if self.session is not SessionState.CONNECTED:
            if p is None:
                return []
            if self.session is SessionState.LOST:
                return self._step_down("ZooKeeper session lost")
            if p.accepting:
                p.accepting = False
                return [LogLine(L.WARNING, "ZooKeeper session suspended: refusing writes")]
            return []
        if not self._registered() or self.cas is not None:
            return []
        state = self.state
        if p is not None:
            if (
                state is None
                or state.epoch != p.epoch
                or state.primary != self.me.id
                or state.boots.get(self.me.id) != self.me.boot
            ):
                epoch = state.epoch if state else "?"
                out = self._step_down(f"group state moved to epoch {epoch}")
                return out + self._reconcile(now)  # and decide what to be now
            out = []
            if not p.accepting:
                p.accepting = True
                out.append(LogLine(L.INFO, "ZooKeeper session back: accepting writes"))
            if p.proposal is None and (set(state.isr) != p.isr or dict(state.boots) != p.boots):
                out.extend(self._primary_out(p, p.isr_changed(state), now))
            members = {m.id: m.boot for m in self.members.values()}
            out.extend(self._primary_out(p, p.members_changed(members, now), now))
            return out
        d = decide(
            self.me,
            state,
            self.members,
            self.log.last_ts,
            unclean_election=self.cfg.unclean_election,
            suspect=self.suspect,
        )
        if d.verdict is Verdict.CREATE or d.verdict is Verdict.CLAIM:
            assert d.state is not None
            # Leave the old epoch before claiming: from here on we acknowledge nothing of it.
            out = self._stop_following()
            self._set_role(Role.CLAIMING, d.reason)
            self._requests += 1
            self.cas = PendingCas(self._requests, CasKind.CLAIM, d.state)
            out.append(ProposeState(self._requests, d.state, d.reason))
            return out
        if d.verdict is Verdict.FOLLOW:
            assert d.state is not None and d.primary is not None
            f = self.follow
            if f is None or (f.primary, f.epoch) != (d.primary, d.state.epoch):
                return self._start_following(d.primary, d.state.epoch)
            return []
        if d.reason != self._last_wait:
            self._last_wait = d.reason
            return [LogLine(L.INFO, f"waiting: {d.reason}")]
        return []

    # --- durable subscriptions, offsets, purge -----------------------------------------

    def _loaded(self, ev: SubscriptionsLoaded) -> list[Action]:
        p = self.primary
        if p is None or not self.loads.take(ev.request):
            return []  # another term's, or read before what made us ask again (M9)
        if ev.found is None:
            self._load_retry_at = ev.now + 0.2
            return [LogLine(L.WARNING, "loading subscriptions failed; retrying")]
        if self.readers.ahead_of_view(ev):  # understood only with a view as new as it
            self._load_retry_at = ev.now + 0.2
            msg = "the subscriptions name a slot era our view has not seen; reading both again"
            return [LogLine(L.INFO, msg), ReadState()]
        self.readers.load(self.delivery, ev, p.start_ts)
        self.auth.loaded(ev.owners)
        self.durables_ready = True
        out: list[Action] = [LogLine(L.INFO, f"resumed {len(ev.found)} durable subscription(s)")]
        waiting, self.waiting_subs = self.waiting_subs, []
        for w in waiting:
            if isinstance(w.frame, Commit):
                out.extend(self.commits.commit(w.conn, w.frame, p.commit_ts))
            else:
                assert isinstance(w.frame, Sub)
                out.extend(self._subscribe(w.conn, w.frame, p, ev.now))
        return out

    def _owner_reload(self) -> list[Action]:
        """A moved slot's new owner reads the subscriptions again, and purges nothing until
        it has (M5: one stored at an older era is pending here and holds purge; read before
        the move completed, it was another group's)."""
        if not self.readers.gained_ownership() or self.primary is None:
            return []
        self.delivery.loaded = False  # any answer from now on sees the new era (readers.load)
        return [self._ask_load()]

    def _ask_load(self, *, fresh: bool = True) -> LoadSubscriptions:
        """A subscriptions load of its own request number; ``fresh``: an answer to any
        load asked before it is not taken (M9)."""
        self._requests += 1
        return self.loads.ask(self._requests, fresh=fresh)

    def _stored(self, ev: OffsetsStored) -> list[Action]:
        self._storing = False
        if ev.ok:
            self.delivery.stored(ev.offsets, ev.eras)
            self.readers.stored(self.delivery, ev.offsets)  # a hand-on lets go before the purge
        if self.role is Role.STEPPING_DOWN:
            return self._finish_stop()
        p = self.primary
        return self._purge(p, ev.now) if p is not None else []

    def _purge(self, p: PrimaryCore, now: float) -> list[Action]:
        """Purge what every subscription has let go of, as far as ZooKeeper holds it; not
        while cut from ZooKeeper: we may be deposed already, and a durable subscription our
        successor registered is one we cannot know (simulator scenario
        ``test_a_primary_cut_from_zookeeper_purges_nothing``). S3 would keep
        our cut log out of the successor's ISR; purging only as a primary sure of its role
        keeps it whole instead."""
        d = self.delivery
        if not d.may_purge(now) or not p.accepting or self._unsure:  # accepting: connected
            return []
        topics = [t for t, tl in self.log.topics.items() if tl.records and t != HANDOVER_TOPIC]
        points = self.retention.purge_points(topics, d.holds(), p.commit_ts, now)
        forget = self.retention.forget_point(now)
        if HANDOVER_TOPIC in self.log.topics and forget > 0:
            points[HANDOVER_TOPIC] = forget  # handed-over uuids last the dedup window (M2.3)
        frame = p.purge(points, forget)
        # said even with no follower to tell: the simulator checks every purge against
        # what durable subscriptions still need (test_scenarios.py::
        # test_a_durable_sub_is_answered_only_once_zookeeper_holds_it)
        return [SendPurge(tuple(self.links.values()), frame)] if frame is not None else []

    # --- time -----------------------------------------------------------------------------

    def _tick(self, now: float) -> list[Action]:
        if self.role is Role.STEPPING_DOWN:
            return self._finish_stop() if now >= self.stop_deadline else []
        p = self.primary
        if p is None:
            return []
        if (
            self.session is SessionState.SUSPENDED
            and now - self.suspended_since > self.cfg.session_timeout
        ):
            # ZooKeeper has surely expired us by now; it only says so once we reach it
            # again. Let our clients go to the new primary instead of waiting for that.
            return self._step_down("ZooKeeper unreachable for longer than the session timeout")
        out = self._primary_out(p, p.tick(now), now)
        connected = self.session is SessionState.CONNECTED
        out.extend(self.registrations.due(now, connected, self._fence()))  # failed ones
        out.extend(self.moves.plan(p, self.log, now, self._unregistered))
        poll = partial(self._ask_load, fresh=False)
        out.extend(self.readers.check(self.delivery, self.presence, now, poll))
        self.rates.tick(now)
        out.extend(self.delivery.tick(p.commit_ts, now))
        out.extend(self._send_shared(p))
        self.retention.committed(p.commit_ts, now)
        beat = tuple(self.links[f] for f in p.heartbeat() if f in self.links)
        if beat:
            last = self.log.last_ts
            out.append(SendEntries(beat, p.epoch, p.commit_ts, last + 1, last))
        if self._load_retry_at is not None and now >= self._load_retry_at:
            self._load_retry_at = None
            out.append(self._ask_load())
        expired = [w for w in self.waiting_subs if now - w.now > DURABLES_WAIT_S]
        if expired:
            self.waiting_subs = [w for w in self.waiting_subs if now - w.now <= DURABLES_WAIT_S]
            msg = "the new primary is still loading subscriptions; retry"
            for w in expired:
                out.append(refuse_waiting(w, ErrorCode.UNAVAILABLE, msg))
        if now >= self._next_offsets_at and not self._storing:
            self._next_offsets_at = now + self.cfg.offset_interval
            due = self._offsets_due()
            if due is not None:
                self._storing = True
                out.append(due)
            else:
                out.extend(self._purge(p, now))
        return out

    # --- a planned stop ---------------------------------------------------------------------

    def _stop(self, now: float) -> list[Action]:
        out = self._stop_following()
        if self.primary is None:
            self._set_role(Role.STOPPED, "stop requested")
            return [*out, Stopped()]
        due = self._offsets_due()
        out.extend(self._step_down("shutting down"))
        self._set_role(Role.STEPPING_DOWN, "stop requested: writing the last offsets")
        self.stop_deadline = now + STOP_FLUSH_S
        if due is None:
            return out + self._finish_stop()
        self._storing = True
        out.append(due)
        return out

    def _finish_stop(self) -> list[Action]:
        self._set_role(Role.STOPPED, "stopped")
        return [Stopped()]
