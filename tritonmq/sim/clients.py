"""Simulated clients: a producer and a subscriber that follow the client library's rules.

A producer keeps its unacknowledged batches in order and, after any retriable
error or lost connection, finds the primary in ZooKeeper again and resends them
all with the same uuids. A subscriber hands each record to its application once
(broadcast: only ``ts`` above the last one handed over; shared: each ``ts`` once
per member), acknowledges at once, and resumes after the last ``ts`` it saw.
What the application sees is reported to the invariant checker.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from tritonmq.client.pending import RECENT_ACKS_MAX
from tritonmq.coord import paths
from tritonmq.core.group import GroupState
from tritonmq.core.slothistory import SlotHistory
from tritonmq.sim import slotmodel
from tritonmq.sim.invariants import History
from tritonmq.sim.network import Dial
from tritonmq.sim.node import (
    CloseConn,
    Closed,
    Delivered,
    Dialed,
    DialOut,
    Effect,
    ErrorFrame,
    NodeEvent,
    PubAcked,
    Received,
    Send,
    SubOk,
    Ticked,
    ZkReplied,
    ZkRequest,
)
from tritonmq.sim.params import CHROOT
from tritonmq.sim.zkmodel import Outcome, ZkGet
from tritonmq.wire.frames import Ack, ErrorCode, From, Pub, PubRecord, Sub

RETRY_AFTER = 0.2


class _Client:
    """Finding the group's primary and keeping one connection to it."""

    def __init__(self, name: str, group: str, history: History) -> None:
        self.name = name
        self.group = group
        self.history = history
        self.primary: str | None = None
        self.conn: int | None = None
        self.dialing = False
        self.reading = False
        self.retry_at = 0.0
        self.attempt = 0

    def _reconnect(self, now: float, out: list[Effect]) -> None:
        if self.conn is not None:
            out.append(CloseConn(self.conn))
        self.conn = None
        self.primary = None
        self.retry_at = now + RETRY_AFTER

    def _tick_connect(self, now: float, out: list[Effect]) -> None:
        if self.conn is not None or self.dialing or self.reading or now < self.retry_at:
            return
        if self.primary is None:
            self.reading = True
            out.append(ZkRequest("primary", ZkGet(paths.state(CHROOT, self.group))))
        else:
            self.dialing = True
            self.attempt += 1
            out.append(DialOut(self.primary, "client", f"c{self.attempt}"))

    def _on_common(self, ev: NodeEvent, now: float, out: list[Effect]) -> bool:
        match ev:
            case ZkReplied(tag="primary", result=result):
                self.reading = False
                if result.outcome is Outcome.OK and isinstance(result.value.data, GroupState):
                    self.primary = result.value.data.primary
                else:
                    self.retry_at = now + RETRY_AFTER
                return True
            case Dialed(tag=tag, outcome=outcome, conn=conn):
                if tag != f"c{self.attempt}":
                    if conn is not None:
                        out.append(CloseConn(conn))
                    return True
                self.dialing = False
                if outcome is Dial.CONNECTED and conn is not None:
                    self.conn = conn
                    self._connected(now, out)
                else:
                    self._reconnect(now, out)
                return True
            case Closed(conn=conn):
                if conn == self.conn:
                    self.conn = None
                    self.primary = None
                    self.retry_at = now + RETRY_AFTER
                return True
        return False

    def _connected(self, now: float, out: list[Effect]) -> None:
        raise NotImplementedError


class SimProducer(_Client):
    def __init__(
        self,
        name: str,
        group: str,
        topic: str,
        history: History,
        rng: random.Random,
        *,
        publish_until: float,
        rate: float = 0.75,
        slot: int | None = None,
    ) -> None:
        super().__init__(name, group, history)
        # Routed by slot (a topic whose slot may move): ``group`` is where it sends now,
        # from the slot's znode, or from the group a WRONG_GROUP named.
        self.slot = slot
        self.route_stale = slot is not None
        self.topic = topic
        self.rng = rng
        self.publish_until = publish_until
        self.rate = rate  # chance per tick of a new batch
        self.unacked: list[tuple[int, list[PubRecord], list[int]]] = []  # (id, records, seqs)
        self.next_id = 1
        self.next_seq = 1

    def handle(self, ev: NodeEvent, now: float) -> list[Effect]:
        out: list[Effect] = []
        if self._on_common(ev, now, out):
            return out
        match ev:
            case ZkReplied(tag="route", result=result):
                self.reading = False
                if result.outcome is Outcome.OK:
                    self.group = SlotHistory.decode(result.value.data).owner
                    self.route_stale = False
                else:
                    self.retry_at = now + RETRY_AFTER
            case Ticked():
                if self.route_stale and self.slot is not None:
                    self._route(now, out)
                else:
                    self._tick_connect(now, out)
                if (
                    self.conn is not None
                    and now < self.publish_until
                    and self.rng.random() < self.rate
                ):
                    self._publish(out)
                    # a producer of a moving slot sends bursts: a batch waiting for its
                    # commit when the next one is refused is retried at the new group
                    for _ in range(self.rng.randint(0, 2) if self.slot is not None else 0):
                        self._publish(out)
            case Received(conn=conn, msg=msg) if conn == self.conn:
                self._on_reply(msg, now, out)
        return out

    def _route(self, now: float, out: list[Effect]) -> None:
        """Read the slot's owner (the client's map) before finding its primary."""
        if not self.reading and now >= self.retry_at:
            assert self.slot is not None
            self.reading = True
            out.append(ZkRequest("route", ZkGet(slotmodel.slot_path(self.slot))))

    def _publish(self, out: list[Effect]) -> None:
        recs: list[PubRecord] = []
        seqs: list[int] = []
        for _ in range(self.rng.randint(1, 3)):
            uuid = self.rng.getrandbits(64).to_bytes(8, "big")
            recs.append((uuid, None, f"{self.name}:{self.next_seq}".encode(), None))
            seqs.append(self.next_seq)
            self.history.published(self.group, self.name, uuid, self.next_seq)
            self.next_seq += 1
        self.unacked.append((self.next_id, recs, seqs))
        assert self.conn is not None
        out.append(Send(self.conn, Pub(self.next_id, self.topic, recs)))
        self.next_id += 1

    def _connected(self, now: float, out: list[Effect]) -> None:
        assert self.conn is not None
        for pub_id, recs, _ in self.unacked:  # resend everything unacknowledged, in order
            out.append(Send(self.conn, Pub(pub_id, self.topic, recs)))

    def _on_reply(self, msg: Any, now: float, out: list[Effect]) -> None:
        if isinstance(msg, PubAcked):
            for i, (pub_id, recs, seqs) in enumerate(self.unacked):
                if pub_id == msg.id:
                    eras: list[int | None] = list(msg.eras) or [None] * len(msg.ts)
                    for rec, seq, ts, era in zip(recs, seqs, msg.ts, eras, strict=True):
                        self.history.pub_acked(
                            self.group, self.topic, self.name, rec[0], seq, ts, era
                        )
                    del self.unacked[i]
                    return
        elif isinstance(msg, ErrorFrame) and msg.id is not None:
            if msg.code is ErrorCode.WRONG_GROUP and self.slot is not None:
                # the slot moved: everything unacknowledged goes, in order, to the group
                # named (or, if none is, the one the re-read map names), same uuids
                if msg.group:
                    self.group = msg.group
                else:
                    self.route_stale = True
                self._reconnect(now, out)
            elif msg.code.retriable:
                self._reconnect(now, out)
            else:
                self.history.violation(f"{self.name}: publish refused for good: {msg.code}")
                self.unacked = [u for u in self.unacked if u[0] != msg.id]


class SimSubscriber(_Client):
    """Positions are (era, ts) (docs/replication.md M3): a moved slot's reader follows
    ``WRONG_GROUP`` with its ``sid`` to the group named (C7)."""

    def __init__(
        self,
        name: str,
        group: str,
        topic: str,
        history: History,
        *,
        subscription: str | None,
        mode: str = "broadcast",
        ack_on_subok: bool = False,
        start_at: float = 0.0,
    ) -> None:
        super().__init__(name, group, history)
        self.topic = topic
        self.start_at = start_at  # reads from then on (a subscription created late)
        self.subscription = subscription
        self.mode = mode
        # C6: a resumed broadcast subscription acknowledges again what it acknowledged (an
        # ack lost with a primary is otherwise never repeated once a sealed era brings no
        # later record; test_scenarios.py::
        # test_a_resumed_broadcast_reader_acknowledges_again_what_it_acknowledged). Off
        # where nothing moves, so that those
        # runs draw what they always drew.
        self.ack_on_subok = ack_on_subok
        self.sid = 0
        self.era = 0  # the era of ``last`` (a moved slot's, M3)
        self.last = 0  # the last ts handed to the application (broadcast)
        self.seen: set[tuple[int, int]] = set()  # shared: each (era, ts) once
        self.acked_here: set[int] = set()  # shared: the ts it acked at the group it is at
        self.subscribed_once = False
        self.moved_to: tuple[int, int] | None = None  # unnamed sent on: (era, after)
        self.named_moved = False  # named sent on: "latest" at the group named
        history.subscriber(self.app, topic, subscription, mode)

    @property
    def app(self) -> str:
        return self.name

    def handle(self, ev: NodeEvent, now: float) -> list[Effect]:
        out: list[Effect] = []
        had = self.conn
        if not self._on_common(ev, now, out):
            match ev:
                case Ticked() if now >= self.start_at:
                    self._tick_connect(now, out)
                case Received(conn=conn, msg=msg) if conn == self.conn:
                    self._on_msg(msg, now, out)
        if had is not None and self.conn is None:
            self.history.app_away(self.app, now)
        return out

    def _connected(self, now: float, out: list[Effect]) -> None:
        assert self.conn is not None
        self.sid += 1
        start: From | int
        era = 0
        if self.moved_to is not None:
            # sent on from an ended era: from its ``after`` + 1, resumed once it has a
            # position (C7: one moved before its first subok was handed nothing)
            era, after = self.moved_to
            start, resume = after + 1, self.subscribed_once
        elif self.named_moved and self.subscribed_once:
            # a named one's offset is its position: the group it was sent to knows it
            start, resume = From.LATEST, True
        elif not self.subscribed_once:
            start, resume = From.EARLIEST, False
        elif self.mode == "shared":
            start, resume = From.LATEST, True
        else:
            start, resume, era = self.last + 1, True, self.era
        sub = Sub(self.sid, self.topic, self.subscription, start, None, self.mode, resume)
        if era:
            sub = dataclasses.replace(sub, era=era)
        if self.mode == "shared":
            # the client rule: its member id, and (on a resume) what it acknowledged; it
            # acknowledges each record as it receives it, so it holds none
            acked = tuple(sorted(self.acked_here)[-RECENT_ACKS_MAX:]) if resume else ()
            sub = dataclasses.replace(sub, acked=acked, member=self.name)
        out.append(Send(self.conn, sub))

    def _on_msg(self, msg: Any, now: float, out: list[Effect]) -> None:
        assert self.conn is not None
        if isinstance(msg, SubOk) and msg.sid == self.sid:
            self.history.app_back(self.app, now, self.primary or "", self.group)
            self.moved_to, self.named_moved = None, False
            if not self.subscribed_once:
                self.subscribed_once = True
                self.era = msg.era
                self.history.sub_started(self.app, msg.next_ts, msg.era)
            elif self.ack_on_subok and self.mode != "shared" and self.last and msg.era == self.era:
                out.append(Send(self.conn, Ack(self.sid, self.last)))
        elif isinstance(msg, Delivered) and msg.sid == self.sid:
            self._on_delivered(msg, now, out)
        elif isinstance(msg, ErrorFrame) and msg.sid == self.sid:
            if msg.code is ErrorCode.WRONG_GROUP and msg.group:
                # the era ended (or is another group's): go on at the group named (C7)
                self.group = msg.group
                if self.subscription:
                    self.named_moved = True
                    # what it acknowledged are the old era's ts: a later era's group would
                    # take them for its own (the client resubscribes afresh there)
                    self.acked_here.clear()
                elif msg.era is not None and msg.after is not None:
                    self.moved_to = (msg.era, msg.after)
            elif not msg.code.retriable:
                self.history.client_error(self.app, f"{msg.code}: {msg.message}")
            self._reconnect(now, out)

    def _on_delivered(self, msg: Delivered, now: float, out: list[Effect]) -> None:
        assert self.conn is not None
        got: list[int] = []
        for rec in msg.records:
            pos = (msg.era, rec[0])
            if self.mode == "shared":
                if pos in self.seen:
                    continue
                self.seen.add(pos)
                self.era = max(self.era, msg.era)
            elif pos <= (self.era, self.last):
                continue  # handed over already (a redelivery, or an older era's)
            else:
                self.era, self.last = pos
            got.append(rec[0])
            self.history.app_received(self.app, self.group, rec, now, msg.era)
        if self.mode == "shared":
            ts_all = [r[0] for r in msg.records]
            self.acked_here.update(ts_all)
            out.append(Send(self.conn, Ack(self.sid, ts_all[0], tuple(ts_all[1:]))))
            self.history.shared_acked(self.app, ts_all, msg.era)
        elif msg.records and msg.era == self.era:
            out.append(Send(self.conn, Ack(self.sid, self.last)))
            self.history.sub_acked(self.app, self.last, self.era)
