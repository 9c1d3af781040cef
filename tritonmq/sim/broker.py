"""A simulated broker: the asyncio shell's decisions (``broker/broker.py``, ``replica.py``,
``offsets.py``, ``clients.py``) over the pure cores, driven by events instead of tasks.

It follows the shell step by step, including what the shell does on a lost or
unknown ZooKeeper reply, so the simulator finds what a real broker would do.
When ``BrokerCore`` exists, this module becomes a thin translation to it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tritonmq.core.actions import (
    Action,
    Deliver,
    ProposeIsr,
    RegisterSubscription,
    Replicate,
    ReplicateDedup,
    SendError,
    SendPubAck,
)
from tritonmq.core.consumers import Mode
from tritonmq.core.delivery import Delivery
from tritonmq.core.group import GroupState, Member, Verdict, decide
from tritonmq.core.log import GroupLog
from tritonmq.core.replication import CATCHUP_CHUNK, BackupCore, PrimaryCore, Rejected
from tritonmq.core.retention import Retention
from tritonmq.errors import RequestRejected, TritonError
from tritonmq.sim.network import Dial
from tritonmq.sim.node import (
    Accepted,
    AcceptedWrites,
    Booted,
    CloseConn,
    Closed,
    Delivered,
    Dialed,
    DialOut,
    Effect,
    ErrorFrame,
    NodeEvent,
    Note,
    PubAcked,
    PurgedUpto,
    Received,
    Send,
    SessionChanged,
    SubOk,
    Ticked,
    WatchFired,
    ZkReplied,
    ZkRequest,
    ZkWatch,
)
from tritonmq.sim.zkmodel import Outcome, SessionState, ZkCreate, ZkList, ZkSet, Znode
from tritonmq.wire.frames import (
    Ack,
    Append,
    DedupPage,
    ErrorCode,
    Follow,
    Leader,
    Pub,
    Purge,
    ReplAck,
    Sub,
)

DEAD_AFTER_REFUSALS = 3
DEAD_AFTER_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class BrokerParams:
    session_timeout: float = 2.0
    min_insync: int = 2
    lag_timeout: float = 1.0
    offset_interval: float = 0.2
    grace: float = 1.0  # ephemeral_grace
    # shared_resume_hold_s, below the grace as in the defaults (1 s and 10 s), so that a
    # shared member back later than the hold but within the grace is told apart
    shared_hold: float = 0.3
    ack_timeout: float = 2.0
    dedup_window: float = 60.0
    window: int = 64
    legacy_lost_cas: bool = False  # behave as the shell did before the fix of issue 6 bug 3
    # Entries per catch-up append (BrokerCore only); the real default is far above these logs.
    catchup_chunk: int = CATCHUP_CHUNK
    # BrokerCore only: which topics a subscriptions load lists is decided as the load is
    # read, as the shell's (``coord.offsets.load`` asks ``ours(topic)`` after listing the
    # topics), not when its answer comes back; a load read before a slot's move completed
    # here, answered after it, then leaves that slot's subscriptions out (docs/replication.md M9). Off
    # by default: it changes what some runs with moves load, so their draws.
    filter_loads_at_read: bool = False


def group_prefix(group: str) -> str:
    return f"/groups/{group}/"


def state_path(group: str) -> str:
    return f"/groups/{group}/state"


def member_path(group: str, broker: str) -> str:
    return f"/groups/{group}/members/{broker}"


def offset_path(topic: str, name: str) -> str:
    return f"/offsets/{topic}/{name}"


class SimBroker:
    def __init__(self, name: str, group: str, boot: str, params: BrokerParams) -> None:
        self.name = name
        self.group = group
        self.params = params
        self.me = Member(name, name, boot)
        self.log = GroupLog()
        self.delivery = Delivery(
            self.log,
            window=params.window,
            window_bytes=1 << 20,
            ack_timeout=params.ack_timeout,
            grace=params.grace,
        )
        self.retention = Retention(dedup_window_s=params.dedup_window)
        self.session: SessionState | None = None
        self.suspended_since = 0.0
        self.registered = False
        self.registering = False
        self.state: GroupState | None = None
        self.members: dict[str, Member] = {}
        self.primary: PrimaryCore | None = None
        self.backup: BackupCore | None = None
        self.commit_ts = 0
        self.durables_ready = False
        self.following: tuple[str, int] | None = None
        self.follow_primary: Member | None = None
        self.follow_conn: int | None = None
        self.follow_dialing = False
        self.follow_retry_at: float | None = None
        self.backoff = 0.05
        self.refused = 0
        self.first_refused = 0.0
        self.suspect: Member | None = None
        self.isr_unknown = False  # an ISR CAS ended with ConnectionLoss: re-read decides
        self.busy = False  # a create or claim CAS is in flight (the shell awaits it)
        self.reading = False
        self.reread = False
        self.repl_links: dict[str, int] = {}
        self.link_of: dict[int, str] = {}  # replication conn -> follower id ("" before follow)
        self.clients: set[int] = set()
        self.next_flush = 0.0
        self.flushing = 0
        self.loading = False

    # --- dispatch ----------------------------------------------------------------------

    def handle(self, ev: NodeEvent, now: float) -> list[Effect]:
        out: list[Effect] = []
        match ev:
            case Booted():
                pass
            case SessionChanged(state=state):
                self._on_session(state, now, out)
            case ZkReplied(tag=tag, result=result):
                self._on_zk(tag, ev.op, result, now, out)
            case WatchFired():
                self._read_view(out)
            case Dialed():
                self._on_dialed(ev, now, out)
            case Accepted(conn=conn, kind=kind):
                if kind == "repl":
                    self.link_of[conn] = ""
                else:
                    self.clients.add(conn)
            case Received(conn=conn, msg=msg):
                if conn == self.follow_conn:
                    self._on_follow_msg(conn, msg, now, out)
                elif conn in self.link_of:
                    self._on_follower_msg(conn, msg, now, out)
                elif conn in self.clients:
                    self._on_client_msg(conn, msg, now, out)
            case Closed(conn=conn, timed_out=timed_out):
                self._on_closed(conn, timed_out, now, out)
            case Ticked():
                self._on_tick(now, out)
        return out

    # --- ZooKeeper ---------------------------------------------------------------------

    def _on_session(self, state: SessionState, now: float, out: list[Effect]) -> None:
        was = self.session
        self.session = state
        if state is SessionState.SUSPENDED and was is not SessionState.SUSPENDED:
            self.suspended_since = now
        if state is SessionState.LOST:
            self.registered = False
        if state is SessionState.CONNECTED:
            out.append(ZkWatch(group_prefix(self.group)))
            if not self.registered:
                self._register(out)
            self._read_view(out)
        self._reconcile(now, out)

    def _register(self, out: list[Effect]) -> None:
        if self.registering:
            return
        self.registering = True
        out.append(
            ZkRequest("register", ZkCreate(member_path(self.group, self.name), self.me, True))
        )

    def _read_view(self, out: list[Effect]) -> None:
        if self.reading:
            self.reread = True
            return
        self.reading = True
        out.append(ZkRequest("view", ZkList(group_prefix(self.group))))

    def _on_zk(self, tag: str, op: Any, result: Any, now: float, out: list[Effect]) -> None:
        ok = result.outcome is Outcome.OK
        if tag == "register":
            self.registering = False
            # A conflict with our own node (an earlier request of ours) is success; with
            # another boot's, our previous incarnation's session has not expired yet.
            mine = result.value is not None and result.value.data == self.me
            self.registered = ok or (result.outcome is Outcome.CONFLICT and mine)
            if not self.registered:
                out.append(Note("member znode of a previous incarnation still exists; waiting"))
            self._read_view(out)
        elif tag == "view":
            self.reading = False
            if ok:
                self._take_view(result.value)
            if self.reread or not ok:
                self.reread = False
                self._read_view(out)
            self._reconcile(now, out)
        elif tag in ("create", "claim"):
            self.busy = False
            if ok:
                won = dataclasses.replace(op.data, version=result.value.version)
                self.state = won
                out.append(Note(f"elected primary: epoch {won.epoch}, isr {list(won.isr)}"))
                self._become_primary(won, now, out)
            else:
                self._read_view(out)
        elif tag.startswith("isr:"):
            self._on_isr_result(int(tag[4:]), op, result, now, out)
        elif tag == "load":
            self.loading = False
            p = self.primary
            if p is None:
                return
            if not ok:
                self._load(out)
                return
            found = [
                (path.split("/")[2], path.split("/")[3], n.data[0], n.data[1])
                for path, n in result.value.items()
                if path.split("/")[2].startswith(f"{self.group}.")
            ]
            self.delivery.load(found)
            self.durables_ready = True
            out.append(Note(f"resumed {len(found)} durable subscription(s)"))
        elif tag == "register-sub":
            topic, name = op.path.split("/")[2:4]
            if ok:
                self.delivery.registered(topic, name, op.data[1])
            elif result.outcome is Outcome.CONFLICT and result.value is not None:
                self.delivery.registered(topic, name, result.value.data[1])
        elif tag == "store":
            self.flushing -= 1
            if ok:
                topic, name = op.path.split("/")[2:4]
                self.delivery.stored([(topic, name, op.data[1])])

    def _take_view(self, nodes: dict[str, Znode]) -> None:
        st = nodes.get(state_path(self.group))
        self.state = dataclasses.replace(st.data, version=st.version) if st is not None else None
        prefix = group_prefix(self.group) + "members/"
        self.members = {p[len(prefix) :]: n.data for p, n in nodes.items() if p.startswith(prefix)}

    def _on_isr_result(
        self, epoch: int, op: Any, result: Any, now: float, out: list[Effect]
    ) -> None:
        p = self.primary
        if p is None or p.epoch != epoch:
            return
        if result.outcome is Outcome.OK:
            won = dataclasses.replace(op.data, version=result.value.version)
            self.state = won
            out.append(Note(f"isr is now {list(won.isr)}"))
            self._perform(p.isr_changed(won), now, out)
        elif result.outcome is Outcome.CONFLICT:
            p.proposal_failed()
            self._read_view(out)
        elif self.params.legacy_lost_cas:
            # The old shell's _propose task died on ConnectionLoss/SessionExpired and left
            # the proposal set (issue 6, bug 3): kept to show the simulator finds it.
            out.append(Note(f"ISR proposal ended with {result.outcome.value}; task gone"))
        else:
            # Outcome unknown: re-read, then adopt the state if our write landed, else drop it.
            out.append(Note(f"ISR proposal ended with {result.outcome.value}; re-reading"))
            self.isr_unknown = True
            self._read_view(out)

    # --- decisions -----------------------------------------------------------------------

    def _reconcile(self, now: float, out: list[Effect]) -> None:
        p = self.primary
        if self.session is not SessionState.CONNECTED:
            if p is not None:
                if self.session is SessionState.LOST:
                    self._step_down("ZooKeeper session lost", now, out)
                elif p.accepting:
                    p.accepting = False
                    out.append(Note("ZooKeeper session suspended: refusing writes"))
            return
        if not self.registered:
            return
        state, me = self.state, self.me
        if p is not None:
            if (
                state is None
                or state.epoch != p.epoch
                or state.primary != me.id
                or state.boots.get(me.id) != me.boot
            ):
                self._step_down(
                    f"group state moved to epoch {state.epoch if state else '?'}", now, out
                )
            else:
                p.accepting = True
                if self.isr_unknown and p.proposal is not None:
                    self.isr_unknown = False
                    prop = p.proposal
                    if tuple(state.isr) == prop.isr and dict(state.boots) == dict(prop.boots):
                        self._perform(p.isr_changed(state), now, out)
                    else:
                        p.proposal_failed()
                if p.proposal is None and (set(state.isr) != p.isr or dict(state.boots) != p.boots):
                    self._perform(p.isr_changed(state), now, out)
                live = {m.id: m.boot for m in self.members.values()}
                self._perform(p.members_changed(live, now), now, out)
                return
        if self.busy:
            return
        d = decide(me, state, self.members, self.log.last_ts, suspect=self.suspect)
        if d.verdict is Verdict.CREATE:
            assert d.state is not None
            self.busy = True
            out.append(ZkRequest("create", ZkCreate(state_path(self.group), d.state)))
        elif d.verdict is Verdict.CLAIM:
            assert d.state is not None and state is not None
            self._stop_following(out)  # from here on we acknowledge nothing of the old epoch
            self.busy = True
            out.append(Note(f"claiming epoch {d.state.epoch}: {d.reason}"))
            out.append(ZkRequest("claim", ZkSet(state_path(self.group), d.state, state.version)))
        elif d.verdict is Verdict.FOLLOW:
            assert d.state is not None and d.primary is not None
            if self.following != (d.primary.id, d.state.epoch):
                self._start_following(d.primary, d.state.epoch, now, out)

    def _become_primary(self, state: GroupState, now: float, out: list[Effect]) -> None:
        self._stop_following(out)
        commit = self.backup.commit_ts if self.backup else self.commit_ts
        self.backup = None
        p = self.primary = PrimaryCore(
            self.name,
            self.log,
            state,
            min_insync=self.params.min_insync,
            lag_timeout=self.params.lag_timeout,
            commit_ts=commit,
            now=now,
        )
        self.durables_ready = False
        self.isr_unknown = False
        self.delivery.freeze_purge(now + self.params.grace)
        self._load(out)
        self.commit_ts = p.commit_ts
        live = {m.id: m.boot for m in self.members.values()}
        self._perform(p.members_changed(live, now), now, out)

    def _load(self, out: list[Effect]) -> None:
        if not self.loading:
            self.loading = True
            out.append(ZkRequest("load", ZkList("/offsets/")))

    def _step_down(self, reason: str, now: float, out: list[Effect]) -> None:
        p = self.primary
        if p is None:
            return
        out.append(Note(f"stepping down from epoch {p.epoch}: {reason}"))
        self.primary = None
        for conn in list(self.repl_links.values()):
            out.append(CloseConn(conn))
            self.link_of.pop(conn, None)
        self.repl_links.clear()
        self._perform(p.step_down(), now, out)
        for c in list(self.delivery.consumers.values()):
            out.append(Send(c.conn, ErrorFrame(ErrorCode.NOT_PRIMARY, "stepped down", sid=c.sid)))
        self.delivery.drop_all()
        self.durables_ready = False
        self._reconcile(now, out)

    def _suspect_dead(self, primary: Member, now: float, out: list[Effect]) -> None:
        if self.suspect != primary:
            out.append(Note(f"primary {primary.id} refuses connections: treating it as gone"))
            self.suspect = primary
            self._reconcile(now, out)

    # --- following ---------------------------------------------------------------------

    def _start_following(self, primary: Member, epoch: int, now: float, out: list[Effect]) -> None:
        self._stop_following(out)
        if self.suspect is not None and self.suspect.id != primary.id:
            self.suspect = None
        self.following = (primary.id, epoch)
        self.follow_primary = primary
        self.backup = BackupCore(self.log, epoch)
        self.backup.commit_ts = self.commit_ts
        self.backoff = 0.05
        self.refused = 0
        out.append(Note(f"following {primary.id} at epoch {epoch}"))
        self._dial_primary(out)

    def _dial_primary(self, out: list[Effect]) -> None:
        assert self.follow_primary is not None and self.following is not None
        self.follow_dialing = True
        self.follow_retry_at = None
        out.append(DialOut(self.follow_primary.id, "repl", f"follow:{self.following[1]}"))

    def _stop_following(self, out: list[Effect]) -> None:
        if self.backup is not None:
            self.commit_ts = max(self.commit_ts, self.backup.commit_ts)
        if self.follow_conn is not None:
            out.append(CloseConn(self.follow_conn))
        self.follow_conn = None
        self.follow_dialing = False
        self.follow_retry_at = None
        self.following = None
        self.follow_primary = None

    def _retry_follow(self, now: float, *, reset_refused: bool) -> None:
        if reset_refused:
            self.refused = 0
        self.follow_conn = None
        self.follow_retry_at = now + self.backoff
        self.backoff = min(self.backoff * 2, 0.5)

    def _on_dialed(self, ev: Dialed, now: float, out: list[Effect]) -> None:
        if ev.tag.startswith("follow:"):
            current = self.following is not None and ev.tag == f"follow:{self.following[1]}"
            if not current or not self.follow_dialing:
                if ev.conn is not None:
                    out.append(CloseConn(ev.conn))
                return
            self.follow_dialing = False
            if ev.outcome is Dial.CONNECTED:
                assert ev.conn is not None and self.following is not None
                self.follow_conn = ev.conn
                log = self.log
                follow = Follow(
                    self.group,
                    self.name,
                    self.me.boot,
                    self.following[1],
                    log.last_ts,
                    list(log.epochs),
                )
                out.append(Send(ev.conn, follow))
            elif ev.outcome is Dial.REFUSED:
                self.refused, self.first_refused = (
                    self.refused + 1,
                    self.first_refused if self.refused else now,
                )
                self._retry_follow(now, reset_refused=False)
                if (
                    self.refused >= DEAD_AFTER_REFUSALS
                    and now - self.first_refused >= DEAD_AFTER_SECONDS
                    and self.follow_primary is not None
                ):
                    self._suspect_dead(self.follow_primary, now, out)
            else:
                self._retry_follow(now, reset_refused=True)

    def _on_follow_msg(self, conn: int, msg: Any, now: float, out: list[Effect]) -> None:
        core = self.backup
        assert core is not None and self.following is not None
        try:
            if isinstance(msg, Leader):
                cut = core.on_leader(msg)
                if cut:
                    out.append(Note(f"truncated {cut} entries"))
                self.backoff = 0.05
                if msg.more:
                    out.append(Send(conn, ReplAck(self.following[1], core.log.last_ts)))
            elif isinstance(msg, DedupPage):
                core.on_dedup(msg)
                if msg.more:
                    out.append(Send(conn, ReplAck(self.following[1], core.log.last_ts)))
            elif isinstance(msg, Append):
                ts = core.on_append(msg)
                self.commit_ts = core.commit_ts
                out.append(Send(conn, ReplAck(self.following[1], ts)))
            elif isinstance(msg, Purge):
                core.on_purge(msg)
            elif isinstance(msg, ErrorFrame):
                raise TritonError(f"{msg.code}: {msg.message}")
        except TritonError as e:
            out.append(Note(f"following {self.following[0]}: {e}; retrying"))
            out.append(CloseConn(conn))
            self._retry_follow(now, reset_refused=True)

    # --- the primary's side of replication ---------------------------------------------

    def _on_follower_msg(self, conn: int, msg: Any, now: float, out: list[Effect]) -> None:
        p = self.primary
        fid = self.link_of[conn]
        if isinstance(msg, Follow):
            if p is None or msg.group != self.group:
                out.append(Send(conn, ErrorFrame(ErrorCode.NOT_PRIMARY, "not the primary")))
                out.append(CloseConn(conn))
                del self.link_of[conn]
                return
            res = p.attach(msg.id, msg.boot, msg.epoch, msg.epochs, msg.last_ts, now)
            if isinstance(res, Rejected):
                out.append(Send(conn, ErrorFrame(res.code, res.message)))
                out.append(CloseConn(conn))
                del self.link_of[conn]
                return
            old = self.repl_links.pop(msg.id, None)
            if old is not None:
                out.append(CloseConn(old))
                self.link_of.pop(old, None)
            self.link_of[conn] = msg.id
            self.repl_links[msg.id] = conn
            out.append(Send(conn, res))
            out.append(Note(f"{msg.id} follows from ts {res.truncate_to} (reset={res.reset})"))
            self._perform(p.pump(msg.id), now, out)
        elif isinstance(msg, ReplAck) and p is not None and fid:
            self._perform(p.acked(fid, msg.epoch, msg.ts, now), now, out)

    def _on_closed(self, conn: int, timed_out: bool, now: float, out: list[Effect]) -> None:
        if conn == self.follow_conn:
            # A clean close leaves the refusal counter as it was (as the shell does).
            self._retry_follow(now, reset_refused=timed_out)
        elif conn in self.link_of:
            fid = self.link_of.pop(conn)
            if fid and self.repl_links.get(fid) == conn:
                del self.repl_links[fid]
                if self.primary is not None:
                    self.primary.detach(fid, now)
        elif conn in self.clients:
            self.clients.discard(conn)
            self.delivery.drop_conn(conn, now)
            if self.primary is not None:
                self.primary.drop_conn(conn)

    # --- clients -----------------------------------------------------------------------

    def _on_client_msg(self, conn: int, msg: Any, now: float, out: list[Effect]) -> None:
        p = self.primary
        match msg:
            case Pub(id=pub_id, topic=topic, records=records):
                if p is None:
                    out.append(
                        Send(conn, ErrorFrame(ErrorCode.NOT_PRIMARY, "not primary", id=pub_id))
                    )
                    return
                before = self.log.last_ts
                self._perform(p.publish(conn, pub_id, topic, records), now, out)
                if self.log.last_ts > before:
                    out.append(AcceptedWrites(p.epoch))
            case Ack(sid=sid, ts=ts, many=many):
                self._perform(self.delivery.ack(conn, sid, ts, self.commit_ts, many, now), now, out)
            case Sub():
                if p is None:
                    out.append(
                        Send(conn, ErrorFrame(ErrorCode.NOT_PRIMARY, "not primary", sid=msg.sid))
                    )
                    return
                if msg.subscription and not self.durables_ready:
                    err = ErrorFrame(ErrorCode.UNAVAILABLE, "loading subscriptions", sid=msg.sid)
                    out.append(Send(conn, err))
                    return
                try:
                    next_ts, first = self.delivery.subscribe(
                        conn,
                        msg.sid,
                        msg.topic,
                        msg.subscription,
                        msg.start,
                        msg.window,
                        p.commit_ts,
                        mode=Mode(msg.mode),
                        resume=msg.resume,
                        now=now,
                    )
                except RequestRejected as e:
                    out.append(Send(conn, ErrorFrame(ErrorCode(e.code), e.message, sid=msg.sid)))
                    return
                out.append(Send(conn, SubOk(msg.sid, next_ts)))
                self._perform(first, now, out)

    # --- time --------------------------------------------------------------------------

    def _on_tick(self, now: float, out: list[Effect]) -> None:
        if self.session is SessionState.CONNECTED and not self.registered:
            self._register(out)
        if self.follow_retry_at is not None and now >= self.follow_retry_at and self.following:
            self._dial_primary(out)
        p = self.primary
        if (
            p is not None
            and self.session is SessionState.SUSPENDED
            and now - self.suspended_since > self.params.session_timeout
        ):
            self._step_down("ZooKeeper unreachable for longer than the session timeout", now, out)
            return
        if p is None:
            return
        self._perform(p.tick(now), now, out)
        self._perform(self.delivery.tick(p.commit_ts, now), now, out)
        self.retention.committed(p.commit_ts, now)
        beat = [self.repl_links[f] for f in p.heartbeat() if f in self.repl_links]
        for conn in beat:
            out.append(Send(conn, Append(p.epoch, p.commit_ts, p.log.last_ts + 1, [])))
        if now >= self.next_flush:
            self.next_flush = now + self.params.offset_interval
            self._flush_and_purge(p, now, out)

    def _flush_and_purge(self, p: PrimaryCore, now: float, out: list[Effect]) -> None:
        if self.flushing:
            return  # the shell awaits its flush before purging
        due = self.delivery.offsets_to_store()
        if due is not None:
            for topic, name, offset in due.offsets:
                mode = self.delivery.durables[(topic, name)].mode
                self.flushing += 1
                op = ZkSet(offset_path(topic, name), (str(mode), offset))
                out.append(ZkRequest("store", op))
            return
        d = self.delivery
        if not d.may_purge(now):
            return
        topics = [t for t, tl in self.log.topics.items() if tl.records]
        points = self.retention.purge_points(topics, d.holds(), p.commit_ts, now)
        frame = p.purge(points, self.retention.forget_point(now))
        if frame is None:
            return
        for topic, upto in frame.topics:
            out.append(PurgedUpto(topic, upto))
        for conn in self.repl_links.values():
            out.append(Send(conn, frame))

    # --- performing the cores' actions -------------------------------------------------

    def _perform(self, actions: Any, now: float, out: list[Effect]) -> None:
        p = self.primary
        for a in actions:
            self._perform_one(a, p, out)
        if p is not None and p.commit_ts > self.commit_ts:
            self.commit_ts = p.commit_ts
            for d in self.delivery.on_commit(p.commit_ts, now):
                out.append(Send(d.conn, Delivered(d.sid, d.topic, tuple(d.records))))

    def _perform_one(self, a: Action, p: PrimaryCore | None, out: list[Effect]) -> None:
        match a:
            case SendPubAck(conn=conn, id=pub_id, ts=ts):
                out.append(Send(conn, PubAcked(pub_id, ts)))
            case Replicate(followers=followers, start=start, end=end):
                if p is not None:
                    frame = Append(*p.entries_for(start, end))
                    for f in followers:
                        if f in self.repl_links:
                            out.append(Send(self.repl_links[f], frame))
            case ReplicateDedup(follower=f, page=page):
                if f in self.repl_links:
                    out.append(Send(self.repl_links[f], page))
            case Deliver(conn=conn, sid=sid, topic=topic, records=records):
                out.append(Send(conn, Delivered(sid, topic, tuple(records))))
            case SendError(conn=conn, code=code, message=message, id=pub_id):
                out.append(Send(conn, ErrorFrame(code, message, id=pub_id)))
            case ProposeIsr():
                self._propose(a, p, out)
            case RegisterSubscription(topic=topic, name=name, mode=mode, offset=offset):
                op = ZkCreate(offset_path(topic, name), (mode, offset))
                out.append(ZkRequest("register-sub", op))
            case _:
                raise AssertionError(a)

    def _propose(self, prop: ProposeIsr, p: PrimaryCore | None, out: list[Effect]) -> None:
        st = self.state
        if p is None or st is None:
            return
        if st.epoch != p.epoch:
            p.proposal_failed()
            self._read_view(out)
            return
        new = dataclasses.replace(st, isr=prop.isr, boots=prop.boots)
        out.append(Note(f"proposing isr {list(prop.isr)}: {prop.reason}"))
        out.append(ZkRequest(f"isr:{p.epoch}", ZkSet(state_path(self.group), new, st.version)))
