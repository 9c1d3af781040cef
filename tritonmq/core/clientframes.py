"""What a broker does with each client frame: BrokerCore's client side, split out for size.

A mixin of :class:`tritonmq.core.broker.BrokerCore`, as
:class:`~tritonmq.core.links.ReplicationLinks` is for replication: the checks every frame
passes (authorization, names, the topic's group or slot history), then one ``match`` per
frame. The state it uses is declared below; BrokerCore owns it and supplies
``_primary_out``; ``meta`` and ``primary_url`` are here (what clients ask of a broker).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from tritonmq.config import BrokerConfig
from tritonmq.core import limits, requests, slotcommits
from tritonmq.core.actions import (
    Action,
    LoadSubscriptions,
    SendError,
    SendMeta,
    SendSubOk,
    SyncLog,
)
from tritonmq.core.admin import administer
from tritonmq.core.auth import ClientAuth
from tritonmq.core.consumers import Mode
from tritonmq.core.delivery import Delivery
from tritonmq.core.events import ClientFrameIn
from tritonmq.core.group import GroupState, Member
from tritonmq.core.handover import HANDOVER_TOPIC
from tritonmq.core.limits import Caps, DedupShares
from tritonmq.core.log import GroupLog
from tritonmq.core.moves import SlotMoves
from tritonmq.core.presence import PresenceTable
from tritonmq.core.readers import SlotReaders
from tritonmq.core.replication import PrimaryCore
from tritonmq.core.requests import Commits
from tritonmq.core.slotadmin import SlotAdmin
from tritonmq.core.slots import SlotMap
from tritonmq.core.stats import Rates
from tritonmq.core.stats import answer as stats_answer
from tritonmq.errors import RequestRejected
from tritonmq.wire.frames import (
    Ack,
    Commit,
    ErrorCode,
    Fetch,
    Hello,
    Meta,
    Nack,
    Presence,
    Pub,
    SlotMove,
    Stats,
    Sub,
    SubDelete,
    SubReset,
    Unsub,
)


class ClientFrames:
    """Client frames in, actions out; BrokerCore's state, declared here."""

    cfg: BrokerConfig
    me: Member
    caps: Caps
    shares: DedupShares
    log: GroupLog
    delivery: Delivery
    auth: ClientAuth
    commits: Commits
    presence: PresenceTable
    moves: SlotMoves
    slot_admin: SlotAdmin
    readers: SlotReaders
    rates: Rates
    slots: SlotMap | None
    state: GroupState | None
    members: dict[str, Member]
    primary: PrimaryCore | None
    commit_ts: int
    synced_ts: int
    durables_ready: bool
    waiting_subs: list[ClientFrameIn]

    def _primary_out(self, p: PrimaryCore, actions: Sequence[Action], now: float) -> list[Action]:
        raise NotImplementedError  # BrokerCore's

    def primary_url(self) -> str | None:
        st = self.state
        if st is None:
            return None
        if st.primary == self.me.id and self.primary is None:
            return None  # our view still names us, but we stepped down
        m = self.members.get(st.primary)
        return m.url if m is not None else None

    def meta(self) -> dict[str, Any]:
        st = self.state
        return {
            "op": "meta",
            "group": self.cfg.group,
            "broker": self.me.id,
            "role": "primary" if self.primary is not None else "backup",
            "epoch": st.epoch if st else 0,
            "primary": st.primary if st else None,
            "primary_url": self.primary_url(),
            "isr": list(st.isr) if st else [],
            "members": {m.id: m.url for m in self.members.values()},
            "commit": self.commit_ts,
            "bytes": self.log.bytes,
            "records": self.log.records,
            # how far this broker's segment files hold the log, and fsynced (D4; 0: memory)
            "written": self.log.last_ts if self.cfg.data_dir else 0,
            "synced": self.synced_ts,
        }

    def _ask_load(self, *, fresh: bool = True) -> LoadSubscriptions:
        raise NotImplementedError  # BrokerCore's

    def _other_owner(
        self, frame: Pub | Sub | Fetch | Commit | SubDelete | SubReset | Presence
    ) -> str | None:
        if self.slots is None:
            return None
        if isinstance(frame, Pub | Sub) and self.moves.history_of(frame.topic) is not None:
            return None  # the slot moved: its history decides (M2, M4, M8)
        named = isinstance(frame, Fetch) or (isinstance(frame, Commit) and frame.group is not None)
        if named and self.moves.serves_fetch(frame.topic):
            # our own ts of an era we held (a commit: core/slotcommits.py); a commit naming
            # no group is of the owner's ts, and one sent here on a stale map re-routes
            return None
        g = self.slots.group_of(frame.topic)
        return g if g != self.cfg.group else None

    def _not_primary(self, conn: Any, *, id: int | None = None, sid: int | None = None) -> Action:
        msg = f"broker {self.me.id} is not the primary of {self.cfg.group}"
        return SendError(conn, ErrorCode.NOT_PRIMARY, msg, id, sid, self.primary_url())

    def _client(self, ev: ClientFrameIn) -> list[Action]:
        conn, frame, now = ev.conn, ev.frame, ev.now
        p = self.primary
        if refused := self.auth.check(conn, frame, ev.verified, ev.wall_ms):
            return [refused]
        if (bad_name := limits.check_names(conn, frame, self.caps)) is not None:
            return [bad_name]
        if isinstance(frame, Commit) and frame.group not in (None, self.cfg.group):
            msg = f"the commit is of group {frame.group}'s ts; this is group {self.cfg.group}"
            return [SendError(conn, ErrorCode.BAD_REQUEST, msg, id=frame.id)]
        if isinstance(frame, Pub | Sub | Fetch | Commit | SubDelete | SubReset | Presence) and (
            owner := self._other_owner(frame)
        ):
            msg = f"topic {frame.topic!r} belongs to group {owner}, not {self.cfg.group}"
            if isinstance(frame, Sub):
                return [SendError(conn, ErrorCode.WRONG_GROUP, msg, sid=frame.sid, group=owner)]
            return [SendError(conn, ErrorCode.WRONG_GROUP, msg, id=frame.id, group=owner)]
        match frame:
            case Pub(id=pub_id, topic=topic, records=records):
                if p is None:
                    return [self._not_primary(conn, id=pub_id)]
                if cap := limits.check_pub(self.log, self.cfg.group, conn, frame, self.caps):
                    return [cap]
                who = self.auth.producer(conn)
                if full := self.shares.refusal(p, who, conn, frame):  # R7's share rule
                    return [p.refuse_batch(full)]
                if not self.moves.map_read:  # a new primary reading the slot map (M7)
                    msg = f"{self.cfg.group}'s new primary is reading the slot map; retry"
                    return [p.refuse_batch(SendError(conn, ErrorCode.UNAVAILABLE, msg, pub_id))]
                refused, origins = self.moves.pub(self.log, conn, frame)
                if refused is not None:  # the slot is moving (M2)
                    return [p.refuse_batch(refused)]
                level = frame.durability or self.cfg.durability
                if level != "memory" and not self.cfg.data_dir:
                    if frame.durability:  # asked for: said plainly, not quietly weakened
                        msg = f"durability {level!r} needs a broker with a data_dir (D4)"
                        return [SendError(conn, ErrorCode.BAD_REQUEST, msg, pub_id)]
                    level = "memory"  # the broker-wide default, on a broker without files
                synced = level == "synced"
                last = self.log.last_ts
                batch = p.publish(
                    conn, pub_id, topic, records, ev.wall_ms, origins=origins, synced=synced
                )
                out = self._primary_out(p, batch, now)
                if synced:
                    out.append(SyncLog())  # our own fsync; followers are asked in the append
                self.rates.published(topic, self.log.last_ts - last)
                self.shares.spent(who, self.log.last_ts - last, self.log.last_ts)
                return out
            case Ack(sid=sid, ts=ts, many=many):
                return list(self.delivery.ack(conn, sid, ts, self.commit_ts, many, now))
            case Nack(sid=sid, ts=ts):
                return list(self.delivery.nack(conn, sid, ts, self.commit_ts, now))
            case Sub():
                if p is None:
                    return [self._not_primary(conn, sid=frame.sid)]
                if frame.subscription and not self.durables_ready:
                    self.waiting_subs.append(ev)  # answered once the subscriptions are loaded
                    return []
                return self._subscribe(conn, frame, p, now)
            case Unsub(sid=sid):
                return [*self.delivery.unsubscribe(conn, sid, now), *self.presence.leave(conn, sid)]
            case Hello():
                return [
                    SendMeta(conn, {**self.meta(), "id": 0}, cluster=False),
                    *self._narrowed(ev),
                ]
            case Meta(id=meta_id):
                # topics: for readers that match topics by pattern (Spark's topicPattern)
                topics = sorted(t for t in self.log.topics if t != HANDOVER_TOPIC)
                info = {**self.meta(), "id": meta_id, "topics": topics}
                return [SendMeta(conn, info, cluster=True)]
            case Fetch():
                if p is None:
                    return [self._not_primary(conn, id=frame.id)]
                return [
                    requests.fetch(
                        self.log,
                        self.cfg.group,
                        self.cfg.max_batch_records,
                        conn,
                        frame,
                        p.commit_ts,
                        ev.record_size,
                    )
                ]
            case Commit():
                if p is None:
                    return [self._not_primary(conn, id=frame.id)]
                if not self.durables_ready:
                    self.waiting_subs.append(ev)  # answered once the subscriptions are loaded
                    return []
                d = self.delivery.durables.get((frame.topic, frame.subscription))
                if refused := slotcommits.refused_while_moving(self.moves, conn, frame, d):
                    return [refused]
                if slotcommits.load_first(
                    self.moves, self.readers.asked, frame.topic, d, frame.subscription
                ):
                    self.durables_ready = False  # answered once what ZooKeeper holds is read
                    self.waiting_subs.append(ev)
                    return [self._ask_load()]
                return self.commits.commit(conn, frame, p.commit_ts)
            case SubDelete() | SubReset():
                if p is None:
                    return [self._not_primary(conn, id=frame.id)]
                ready = self.durables_ready
                return administer(
                    self.delivery, self.auth, self.log, conn, frame, p.commit_ts, ready
                )
            case Presence(id=rid, topic=topic):
                if p is None:
                    return [self._not_primary(conn, id=rid)]
                return [self.presence.members(conn, rid, topic)]
            case SlotMove():  # any broker, primary or not: a CAS in ZooKeeper
                return self.slot_admin.ask(conn, frame, self.slots)
            case Stats():
                info, commit = self.meta(), self.commit_ts
                args = (self.log, self.delivery, self.rates, commit, self.cfg.max_bytes, ev.wall_ms)
                return [stats_answer(conn, frame, info, *args)]
            case _:
                assert_never(frame)

    def _subscribe(self, conn: Any, frame: Sub, p: PrimaryCore, now: float) -> list[Action]:
        if refused := self.auth.may_use(conn, frame, self.delivery.durables, p.commit_ts):
            return [refused]
        if cap := limits.check_sub(self.delivery, self.cfg.group, conn, frame, self.caps):
            return [cap]
        if cap := self.presence.refusal(conn, frame, now):
            return [cap]
        if isinstance(moved := self.readers.admit(self.delivery, conn, frame), str):
            self.durables_ready = False  # named subs wait for what ZooKeeper holds now
            self.waiting_subs.append(ClientFrameIn(conn, frame, now))
            return [self._ask_load()]
        if isinstance(moved, SendError):
            return [moved]
        asked = frame
        frame, era, until = (moved.frame, moved.era, moved.until) if moved else (frame, 0, None)
        if frame.subscription:
            d = self.delivery.durables.get((frame.topic, frame.subscription))
            if d is None or d.stored is None:
                # Durable only once ZooKeeper holds it: a primary that died before then
                # would leave a subscriber its successor does not know (simulator, seed
                # 139 of --groups 3): answered when the registration lands (or UNAVAILABLE).
                self.waiting_subs.append(ClientFrameIn(conn, asked, now))
                if d is not None:
                    return []  # declared by an earlier `sub`: its registration answers both
                args = (frame.topic, frame.subscription, Mode(frame.mode), frame.start)
                return [self.delivery.declare(*args, p.commit_ts, era)]
        # a `sub` replaces its sid's attachment; its presence only if it changes (issue 26)
        kept = self.presence.unchanged(conn, frame)
        left = [] if kept else self.presence.leave(conn, frame.sid)
        try:
            next_ts, first = self.delivery.subscribe(
                conn,
                frame.sid,
                frame.topic,
                frame.subscription,
                frame.start,
                frame.window,
                p.commit_ts,
                mode=Mode(frame.mode),
                resume=frame.resume,
                now=now,
                acked=frame.acked,
                held=frame.held,
                member=frame.member,
                era=era,
                until=until,
            )
        except RequestRejected as e:
            left = left or self.presence.leave(conn, frame.sid)
            return [requests.refusal(conn, e, sid=frame.sid), *left]
        out: list[Action] = [SendSubOk(conn, frame.sid, next_ts, era), *first, *left]
        if frame.presence and not kept:
            who = self.auth.principal(conn)
            user = who.name if who is not None else ""
            out.extend(self.presence.join(conn, frame.sid, frame.topic, user, frame.info))
        return out

    def _narrowed(self, ev: ClientFrameIn) -> list[Action]:
        """A refreshed token may grant less: the subscriptions it no longer grants end, each
        with ``FORBIDDEN`` naming its ``sid`` (issue 26), and so do waiting ones."""
        conn, d = ev.conn, self.delivery
        subs = []
        for sid in sorted(d.by_conn.get(id(conn), ())):
            c = d.consumers[(id(conn), sid)]
            subs.append((sid, c.topic, c.durable.name if c.durable is not None else None))
        waiting = [w.frame for w in self.waiting_subs if w.conn is conn]
        subs += [(f.sid, f.topic, f.subscription) for f in waiting if isinstance(f, Sub)]
        out: list[Action] = []
        for sid, why in self.auth.no_longer_granted(conn, subs):
            out.extend(d.unsubscribe(conn, sid, ev.now))
            out.extend(self.presence.leave(conn, sid))
            out.append(SendError(conn, ErrorCode.FORBIDDEN, why, sid=sid))
            self.waiting_subs = [
                w
                for w in self.waiting_subs
                if not (w.conn is conn and isinstance(w.frame, Sub) and w.frame.sid == sid)
            ]
        return out
