"""A simulated broker built on :class:`tritonmq.core.broker.BrokerCore`: the simulator's
events translated to the core's, the core's actions performed as effects.

This is what ``broker/`` does with asyncio, websockets and kazoo, done with the
simulator's models: it decides nothing. Shell duties the core leaves to its shell
are here too: registering the member znode after every new session, re-reading
the group on watches, reconnecting a follow link on a short back-off until told
to stop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, assert_never

from tritonmq.config import BrokerConfig
from tritonmq.coord import paths
from tritonmq.core import events as ce
from tritonmq.core.actions import (
    Action,
    AskHandover,
    BeginSlotMove,
    CloseLink,
    DeleteSubscription,
    Deliver,
    LoadSubscriptions,
    LogLine,
    ProposeIsr,
    ProposeSlotStep,
    ProposeState,
    ReadState,
    RegisterSubscription,
    Replicate,
    ReplicateDedup,
    SendCommitted,
    SendDedup,
    SendEntries,
    SendError,
    SendFetched,
    SendHandover,
    SendLeader,
    SendMeta,
    SendPresence,
    SendPubAck,
    SendPurge,
    SendShared,
    SendSlotInfo,
    SendStats,
    SendSubInfo,
    SendSubOk,
    SendToPrimary,
    StartFollowing,
    StopFollowing,
    Stopped,
    StoreOffsets,
    SyncLog,
    WriteLog,
)
from tritonmq.core.actions import (
    CloseConn as CoreCloseConn,
)
from tritonmq.core.broker import BrokerCore
from tritonmq.core.group import GroupState, Member
from tritonmq.core.log import GroupLog
from tritonmq.core.slots import slot_of
from tritonmq.sim import slotmodel
from tritonmq.sim.disk import SimDisk
from tritonmq.sim.moveshell import ZK_KINDS, MoveShell
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
    Leads,
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
from tritonmq.sim.params import CHROOT, BrokerParams, under
from tritonmq.sim.zkmodel import (
    Outcome,
    SessionState,
    ZkCreate,
    ZkList,
    ZkListMany,
    ZkResult,
    ZkSet,
    Znode,
)
from tritonmq.wire.frames import Append, HandoverAsk

REDIAL_S = 0.05
_SESSION = {
    SessionState.CONNECTED: ce.SessionState.CONNECTED,
    SessionState.SUSPENDED: ce.SessionState.SUSPENDED,
    SessionState.LOST: ce.SessionState.LOST,
}


@dataclass(slots=True)
class _Link:
    """Our follow link ``id`` to ``primary``: its connection, or when to dial again."""

    id: int
    primary: Member
    conn: int | None = None
    dialing: bool = False
    redial_at: float | None = None


class SimCoreBroker:
    def __init__(
        self,
        name: str,
        group: str,
        boot: str,
        params: BrokerParams,
        *,
        slots: bool = False,
        disk: SimDisk | None = None,
        log: GroupLog | None = None,
    ) -> None:
        self.name = name
        self.group = group
        cfg = BrokerConfig(
            group=group,
            id=name,
            replicas=3,
            min_insync=params.min_insync,
            session_timeout=params.session_timeout,
            replica_lag_timeout=params.lag_timeout,
            window_records=params.window,
            ack_timeout=params.ack_timeout,
            ephemeral_grace=params.grace,
            shared_resume_hold_s=params.shared_hold,
            dedup_window_s=params.dedup_window,
            dedup_page=3,  # more uuids come in pages (a handover, a reset), as millions do
            offset_interval=params.offset_interval,
            data_dir="sim" if disk is not None else "",  # the core journals for its disk
        )
        self.me = Member(name, name, boot)
        self.disk = disk  # outlives this process (sim/disk.py)
        self.core = BrokerCore(cfg, self.me, catchup_chunk=params.catchup_chunk, log=log)
        self.session: SessionState | None = None
        self.zk_session = 0  # the ZooKeeper session id this process holds (set at start)
        self.registered = False
        self.registering = False
        self.reading = False
        self.reread = False
        self.read_asked = 0  # the latest ReadState request
        self.read_covers = 0  # ... that the read in flight began after (ZkView.read)
        self.led = 0  # the last epoch we were primary of
        self.link: _Link | None = None
        self.kinds: dict[int, str] = {}  # accepted conn -> "repl" | "client"
        self.cas: dict[int, GroupState] = {}  # request -> state proposed
        self.stores: dict[int, list[Any]] = {}  # batch -> [pending, ok, offsets, eras]
        self._batches = 0
        # the cluster has a slot map (moves on): read it with every view, watch /cluster
        self.slots = slots
        self.moves = MoveShell(group, self.me)
        # filter_loads_at_read: each load in flight -> the topics it lists, as of its read
        self.filter_at_read = params.filter_loads_at_read
        self.load_filters: dict[int, Callable[[str], bool]] = {}
        self._loads_sent = 0

    @property
    def log(self) -> GroupLog:
        return self.core.log

    # --- events in ---------------------------------------------------------------------

    def handle(self, ev: NodeEvent, now: float) -> list[Effect]:
        out: list[Effect] = []
        match ev:
            case Booted():
                pass
            case SessionChanged(state=state):
                self.session = state
                if state is SessionState.LOST:
                    self.registered = False
                self._core(ce.SessionChanged(_SESSION[state], now), now, out)
                if state is SessionState.CONNECTED:
                    out.append(ZkWatch(under(paths.group(CHROOT, self.group))))
                    if self.slots:
                        out.append(ZkWatch(slotmodel.CLUSTER_PATH))
                    self._register(out)
                    self._read(out)
            case WatchFired():
                self._read(out)
            case ZkReplied(tag=tag, op=op, result=result):
                self._zk(tag, op, result, now, out)
            case Dialed(tag=tag, outcome=outcome, conn=conn):
                self._dialed(tag, outcome, conn, now, out)
            case Accepted(conn=conn, kind=kind):
                self.kinds[conn] = kind
            case Received(conn=conn, msg=msg):
                self._received(conn, msg, now, out)
            case Closed(conn=conn, timed_out=timed_out):
                self._closed(conn, timed_out, now, out)
            case Ticked():
                if self.session is SessionState.CONNECTED and not self.registered:
                    self._register(out)
                lk = self.link
                if lk is not None and lk.redial_at is not None and now >= lk.redial_at:
                    self._dial(lk, out)
                self._core(ce.Tick(now), now, out)
            case _:
                assert_never(ev)
        return out

    def _core(self, ev: ce.Event, now: float, out: list[Effect]) -> None:
        before = self.core.log.last_ts
        actions = self.core.handle(ev)
        self.core.invariants()  # the core's own (core/invariants.py), after every event
        p = self.core.primary
        if isinstance(ev, ce.ClientFrameIn) and p is not None and self.core.log.last_ts > before:
            out.append(AcceptedWrites(p.epoch))
        if p is not None and p.epoch != self.led:
            self.led = p.epoch
            out.append(Leads(p.epoch))
        for a in actions:
            self._perform(a, now, out)

    def _register(self, out: list[Effect]) -> None:
        if not self.registering:
            self.registering = True
            op = ZkCreate(paths.member(CHROOT, self.group, self.name), self.me, True)
            out.append(ZkRequest("register", op))

    def _read(self, out: list[Effect]) -> None:
        if self.reading:
            self.reread = True
            return
        self.reading = True
        self.read_covers = self.read_asked
        if self.slots:
            listed = (under(paths.group(CHROOT, self.group)), *slotmodel.SLOT_PATHS)
            out.append(ZkRequest("view", ZkListMany(listed)))
        else:
            out.append(ZkRequest("view", ZkList(under(paths.group(CHROOT, self.group)))))

    def _zk(self, tag: str, op: Any, result: ZkResult, now: float, out: list[Effect]) -> None:
        ok = result.outcome is Outcome.OK
        kind, _, num = tag.partition(":")
        if kind in ZK_KINDS:
            ev = self.moves.zk(kind, int(num), result, now, out)
            if ev is not None:
                self._core(ev, now, out)
        elif kind == "register":
            self.registering = False
            # ours only if this session made it (kazoo's client_id, as coord/group.py
            # judges): a broker back from its disk keeps its boot, and its dead process's
            # znode goes with that process's session (docs/replication.md D3)
            mine = (
                result.value is not None
                and result.value.data == self.me
                and result.value.owner == self.zk_session
            )
            self.registered = ok or (result.outcome is Outcome.CONFLICT and mine)
            self._read(out)
        elif kind == "view":
            self.reading = False
            if ok:
                self._core(self._view(result.value, now), now, out)
            if self.reread or not ok:
                self.reread = False
                self._read(out)
        elif kind == "cas":
            proposed = self.cas.pop(int(num))
            if ok:
                outcome = ce.CasOutcome.OK
                state: GroupState | None = dataclasses.replace(
                    proposed, version=result.value.version
                )
            else:
                conflict = result.outcome is Outcome.CONFLICT
                outcome = ce.CasOutcome.CONFLICT if conflict else ce.CasOutcome.UNKNOWN
                state = None
            self._core(ce.CasDone(int(num), outcome, state, now), now, out)
        elif kind == "load":
            req, _, sent = num.partition(".")
            lists = self.load_filters.pop(int(sent), self._loads) if sent else self._loads
            found = None
            eras: dict[tuple[str, str], int] = {}
            if ok:
                found = []
                for path, n in result.value.items():
                    topic, name = path.split("/")[2:4]
                    if lists(topic):
                        found.append((topic, name, n.data[0], n.data[1]))
                        if n.data[2:] and n.data[2]:
                            eras[(topic, name)] = n.data[2]
            self._core(ce.SubscriptionsLoaded(int(req), found, now, eras=eras), now, out)
        elif kind == "register-sub":
            topic, name = op.path.split("/")[2:4]
            held, era = (op.data[1], op.data[2]) if ok else (None, 0)
            if result.outcome is Outcome.CONFLICT and result.value is not None:
                held, era = result.value.data[1], _era_of(result.value.data)
            self._core(ce.SubscriptionRegistered(topic, name, held, now, era), now, out)
        elif kind == "store":
            batch = self.stores[int(num)]
            batch[0] -= 1
            batch[1] = batch[1] and ok
            if batch[0] == 0:
                del self.stores[int(num)]
                self._core(ce.OffsetsStored(batch[2], batch[1], now, batch[3]), now, out)

    def _view(self, nodes: dict[str, Znode], now: float) -> ce.ZkView:
        st = nodes.get(paths.state(CHROOT, self.group))
        state = dataclasses.replace(st.data, version=st.version) if st is not None else None
        prefix = under(paths.members(CHROOT, self.group))
        members = {p[len(prefix) :]: n.data for p, n in nodes.items() if p.startswith(prefix)}
        slots = slotmodel.read(nodes) if self.slots else None
        read = self.read_covers
        if slots is None:
            return ce.ZkView(state, members, None, now, read=read)
        return ce.ZkView(state, members, slots.smap, now, slots.histories, read)

    # --- connections -------------------------------------------------------------------

    def _dial(self, lk: _Link, out: list[Effect]) -> None:
        lk.dialing = True
        lk.redial_at = None
        out.append(DialOut(lk.primary.id, "repl", f"follow:{lk.id}"))

    def _dialed(
        self, tag: str, outcome: Dial, conn: int | None, now: float, out: list[Effect]
    ) -> None:
        if tag.startswith("ho:"):
            ev = self.moves.dialed(tag, outcome, conn, now, out)
            if ev is not None:
                self._core(ev, now, out)
            return
        lk = self.link
        if lk is None or tag != f"follow:{lk.id}" or not lk.dialing:
            if conn is not None:
                out.append(CloseConn(conn))
            return
        lk.dialing = False
        if outcome is Dial.CONNECTED:
            lk.conn = conn
            self._core(ce.LinkEvent(lk.id, ce.LinkEnd.CONNECTED, now), now, out)
            return
        lk.redial_at = now + REDIAL_S
        what = ce.LinkEnd.REFUSED if outcome is Dial.REFUSED else ce.LinkEnd.TIMED_OUT
        self._core(ce.LinkEvent(lk.id, what, now), now, out)

    def _received(self, conn: int, msg: Any, now: float, out: list[Effect]) -> None:
        lk = self.link
        if lk is not None and conn == lk.conn:
            if isinstance(msg, ErrorFrame):
                out.append(CloseConn(conn))
                lk.conn, lk.redial_at = None, now + REDIAL_S
                ev = ce.LinkEvent(lk.id, ce.LinkEnd.REJECTED, now, detail=str(msg.code))
                self._core(ev, now, out)
            else:
                self._core(ce.PrimaryFrame(lk.id, msg, now), now, out)
        elif (ask := self.moves.owns(conn)) is not None:
            answered = self.moves.received(ask, msg, now, out)
            if answered is not None:
                self._core(answered, now, out)
        elif self.kinds.get(conn) == "repl" and isinstance(msg, HandoverAsk):
            self._core(ce.HandoverAsked(conn, msg, now), now, out)
        elif self.kinds.get(conn) == "repl":
            self._core(ce.FollowerFrame(conn, msg, now), now, out)
        elif self.kinds.get(conn) == "client":
            self._core(ce.ClientFrameIn(conn, msg, now), now, out)

    def _closed(self, conn: int, timed_out: bool, now: float, out: list[Effect]) -> None:
        lk = self.link
        if lk is not None and conn == lk.conn:
            lk.conn, lk.redial_at = None, now + REDIAL_S
            what = ce.LinkEnd.TIMED_OUT if timed_out else ce.LinkEnd.CLOSED
            self._core(ce.LinkEvent(lk.id, what, now, clean=not timed_out), now, out)
            return
        if (ask := self.moves.owns(conn)) is not None:
            ev = self.moves.closed(ask, now, out)
            if ev is not None:
                self._core(ev, now, out)
            return
        kind = self.kinds.pop(conn, None)
        if kind == "repl":
            self._core(ce.FollowerGone(conn, now), now, out)
        elif kind == "client":
            self._core(ce.ClientGone(conn, now), now, out)

    # --- actions out ---------------------------------------------------------------------

    def _perform(self, a: Action, now: float, out: list[Effect]) -> None:
        match a:
            case SendPubAck(conn=conn, id=pub_id, ts=ts, eras=eras):
                out.append(Send(conn, PubAcked(pub_id, ts, eras)))
            case SendError(conn=conn, code=code, message=message, id=rid, sid=sid, group=group):
                err = ErrorFrame(code, message, rid, sid, group, a.era, a.after)
                out.append(Send(conn, err))
            case Deliver(conn=conn, sid=sid, topic=topic, records=records, era=era):
                out.append(Send(conn, Delivered(sid, topic, tuple(records), era)))
            case SendSubOk(conn=conn, sid=sid, next_ts=next_ts, era=era):
                out.append(Send(conn, SubOk(sid, next_ts, era)))
            case SendFetched() | SendMeta() | SendCommitted():
                out.append(Send(a.conn, a))  # the simulated clients do not ask for these
            case CoreCloseConn(conn=conn):
                out.append(CloseConn(conn))
            case SendEntries(links=links, epoch=epoch, commit=commit, start=start, end=end):
                entries, published = self.core.entries_for(start, end) if start <= end else ([], [])
                frame = Append(epoch, commit, start, entries, tuple(published))
                out.extend(Send(link, frame) for link in links)
            case SendDedup(link=link, page=page):
                out.append(Send(link, page))
            case SendLeader(link=link, leader=leader):
                out.append(Send(link, leader))
                out.append(
                    Note(
                        f"follower on #{link} starts after ts {leader.truncate_to}"
                        f" (reset={leader.reset})"
                    )
                )
            case SendPurge(links=links, purge=purge):
                out.extend(PurgedUpto(topic, upto) for topic, upto in purge.topics)
                out.extend(Send(link, purge) for link in links)
            case SendShared(links=links, shared=shared):
                out.extend(Send(link, shared) for link in links)
            case CloseLink(link=link, reason=reason, code=code):
                if code is not None:
                    out.append(Send(link, ErrorFrame(code, reason)))
                out.append(CloseConn(link))
            case StartFollowing(follow_id=fid, primary=primary):
                self._stop_link(out)
                self.link = _Link(fid, primary)
                self._dial(self.link, out)
            case StopFollowing(follow_id=fid):
                if self.link is not None and self.link.id == fid:
                    self._stop_link(out)
            case SendToPrimary(follow_id=fid, frame=frame):
                lk = self.link
                if lk is not None and lk.id == fid and lk.conn is not None:
                    out.append(Send(lk.conn, frame))
            case ProposeState(request=req, state=state, reason=reason):
                self.cas[req] = state
                path = paths.state(CHROOT, self.group)
                op: ZkCreate | ZkSet = (
                    ZkCreate(path, state)
                    if state.version < 0
                    else ZkSet(path, state, state.version)
                )
                out.append(Note(f"proposing epoch {state.epoch} isr {list(state.isr)}: {reason}"))
                out.append(ZkRequest(f"cas:{req}", op))
            case ReadState(request=req):
                self.read_asked = max(self.read_asked, req)
                self._read(out)
            case LoadSubscriptions(request=req):
                tag = f"load:{req}"
                if self.filter_at_read:
                    self._loads_sent += 1
                    self.load_filters[self._loads_sent] = self._loads_as_now()
                    tag += f".{self._loads_sent}"
                out.append(ZkRequest(tag, ZkList(under(paths.offsets(CHROOT)))))
            case RegisterSubscription(topic=topic, name=name, mode=mode, offset=offset):
                # (mode, offset, the era the offset is a ts of: a moved slot's, M5)
                fence = self._fence(a.fence)
                op2 = ZkCreate(
                    paths.offset(CHROOT, topic, name), (mode, offset, a.era), fence=fence
                )
                out.append(ZkRequest("register-sub", op2))
            case StoreOffsets(offsets=offsets):
                self._batches += 1
                self.stores[self._batches] = [len(offsets), True, offsets, a.eras]
                eras = a.eras or (0,) * len(offsets)
                fence = self._fence(a.fence)
                for (topic, name, offset), era in zip(offsets, eras, strict=True):
                    mode = self._mode_of(topic, name)
                    data = (mode, offset, era)
                    op3 = ZkSet(
                        paths.offset(CHROOT, topic, name), data, fence=fence, era_ordered=era > 0
                    )
                    out.append(ZkRequest(f"store:{self._batches}", op3))
            case LogLine(message=message):
                out.append(Note(message))
            case Stopped():
                pass
            case Replicate() | ReplicateDedup() | ProposeIsr():
                raise AssertionError(f"BrokerCore never returns {a!r}")
            case SendSubInfo() | DeleteSubscription() | SendStats() | SendSlotInfo():
                raise AssertionError(f"simulated clients send no admin ops: {a!r}")
            case SendPresence():
                raise AssertionError(f"simulated clients ask for no presence: {a!r}")
            case ProposeSlotStep():
                out.append(Note(f"slot {a.slot}: {a.step.value} (until {a.until})"))
                self.moves.step(a, out)
            case AskHandover():
                self.moves.ask(a, out)
            case BeginSlotMove():
                raise AssertionError(f"simulated clients send no admin ops: {a!r}")
            case SendHandover(link=link, pairs=pairs):
                out.append(Send(link, pairs))
            case WriteLog(ops=ops):
                assert self.disk is not None, "only a broker with a disk journals"
                self.disk.write(ops)
            case SyncLog():
                assert self.disk is not None
                self.disk.sync()  # at once: an fsync's delay is not modelled
                self._core(ce.Synced(self.core.log.last_ts, now), now, out)
            case _:
                assert_never(a)

    def _stop_link(self, out: list[Effect]) -> None:
        lk = self.link
        if lk is not None and lk.conn is not None:
            out.append(CloseConn(lk.conn))
        self.link = None

    def _loads(self, topic: str) -> bool:
        """A subscription this group loads: of its own topics (no slot map), or as the
        shell does: owned, or of a moved slot we held an era of (M5)."""
        slots = self.core.slots
        if slots is None:
            return topic.startswith(f"{self.group}.")
        return slots.group_of(topic) == self.group or bool(self.core.moves.serves_fetch(topic))

    def _loads_as_now(self) -> Callable[[str], bool]:
        """:meth:`_loads` as of now, for a load read now and answered later: the slot map
        and histories are replaced, never changed in place, so holding them holds now."""
        slots, histories, group = self.core.slots, self.core.moves.histories, self.group
        if slots is None:
            return self._loads

        def lists(topic: str) -> bool:
            if slots.group_of(topic) == group:
                return True
            h = histories[slot_of(topic, len(histories))] if histories else None
            return (
                h is not None
                and h.moved
                and (h.owner == group or any(e.group == group for e in h.history))
            )

        return lists

    def _fence(self, version: int | None) -> tuple[str, int] | None:
        """A write's fence: our group state znode at the version the core holds."""
        return None if version is None else (paths.state(CHROOT, self.group), version)

    def _mode_of(self, topic: str, name: str) -> str:
        d = self.core.delivery.durables.get((topic, name))
        return str(d.mode) if d is not None else "broadcast"


def _era_of(data: tuple[Any, ...]) -> int:
    """The era an offset znode's (mode, ts, era) is of (absent: 0)."""
    return int(data[2]) if len(data) > 2 and data[2] else 0
