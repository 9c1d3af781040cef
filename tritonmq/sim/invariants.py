"""What must hold after every step of a simulated run, and after healing at its end.

:class:`History` records what the clients saw (publishes, acknowledgements, what
each application received) and what the brokers did that the invariants speak
of (writes accepted per epoch, offsets stored, purges). The first broken rule is
kept as the run's violation; the world stops there and prints the trace.

The invariants, by the name docs/replication.md gives them (and the method that checks):

* ``one-writer-per-epoch``: at most one broker incarnation accepts writes per epoch
  (:meth:`History.accepted_writes`).
* ``one-ts-per-record``: a ts is acknowledged for one record only, and a record is
  acknowledged at one position (group, ts) only (:meth:`History.pub_acked`); a record of
  a moved slot is acknowledged at a ts of an era of the group it names
  (``one-writer-per-slot``), the era given in the ``puback`` or the one the group's ts
  falls in.
* ``acked-on-min-insync``: an acknowledged record reached ``min_insync`` replicas
  (:meth:`History.acknowledged_copies`).
* ``isr-holds-acked``: every live in-sync replica holds every acknowledged record
  (:meth:`History.check_isr_holds`).
* ``no-duplicate-delivery``, ``delivered-at-acked-ts``, ``producer-order``: what an
  application receives (:meth:`History.app_received`); for a shared subscription, no
  record reaches two of its members either, unless the first was away (disconnected)
  for longer than the brokers' ``ephemeral_grace`` (docs/replication.md S7, S8).
* ``offset-not-ahead``: a stored offset is never ahead of what its subscription
  acknowledged (:meth:`History.offset_stored`).
* ``no-purge-of-needed``: nothing a durable subscription still needs is purged
  (:meth:`History.purged`).
* After healing (:meth:`History.check_liveness`): ``producers-finish`` (no producer
  still waits), ``durable-receives-all``, ``unnamed-no-silent-skip`` (a gap only with a
  ``PURGED`` error); and with ``SimParams.check_whole``, ``group-whole`` (every replica
  is back in its group's ISR, :meth:`History.check_group_whole`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tritonmq.core.group import GroupState
from tritonmq.core.log import GroupLog
from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import SlotHistoryError
from tritonmq.wire.frames import Record

Pos = tuple[int, int]  # a position in a topic: (era, ts) (docs/replication.md M3)
TOP: Pos = (1 << 62, 1 << 62)


def group_of_topic(topic: str) -> str:
    return topic.split(".", 1)[0]


@dataclass(slots=True)
class App:
    """One subscriber's application."""

    topic: str
    subscription: str | None
    mode: str
    base: int | None = None  # first ts its subscription could deliver
    uuids: set[bytes] = field(default_factory=set)
    ts: set[int] = field(default_factory=set)
    last_seq: dict[str, int] = field(default_factory=dict)
    acked_upto: int = 0  # broadcast: cumulative ack sent
    acked: set[int] = field(default_factory=set)  # shared: each ts acked
    pos: set[Pos] = field(default_factory=set)  # where each record it received lies
    acked_pos: Pos = (0, 0)  # broadcast: the cumulative ack as a position
    acked_at: set[Pos] = field(default_factory=set)  # shared: each position acked
    errors: list[str] = field(default_factory=list)
    away_since: float | None = None  # shared: away from the group's primary since
    broker: str | None = None  # the broker its connection is to
    group: str | None = None  # the group of that broker (None: its topic's)
    vanished: bool = False  # shared: it was once away longer than the grace


class History:
    def __init__(self, min_insync: int) -> None:
        self.min_insync = min_insync
        self.published_by: dict[bytes, tuple[str, int]] = {}
        self.acked: dict[str, dict[int, bytes]] = {}  # group -> ts -> uuid
        self.acked_ts: dict[bytes, tuple[str, int]] = {}  # uuid -> (group, ts)
        self.topic_acked: dict[str, dict[int, bytes]] = {}  # topic -> ts -> uuid
        self.producer_ts: dict[str, dict[int, tuple[int, int]]] = {}  # seq -> (era, ts)
        self.apps: dict[str, App] = {}
        self.sub_bases: dict[tuple[str, str], Pos] = {}  # durable subscription -> registered offset
        self.topic_pos: dict[str, dict[Pos, bytes]] = {}  # topic -> (era, ts) -> uuid
        self.acked_pos: dict[bytes, Pos] = {}  # uuid -> where it was acknowledged
        self.writers: dict[tuple[str, int], str] = {}  # (group, epoch) -> broker incarnation
        self.violations: list[str] = []
        self._checked: dict[str, object] = {}  # group -> what its last ISR check saw
        # A shared member away longer than this (the brokers' ephemeral_grace) has its
        # records handed to the others: at least once for a vanished member, by design
        self.shared_grace = 1.0
        self.primaries: dict[str, str] = {}  # group -> the broker elected last
        # With slot moves: a topic's slot history as ZooKeeper holds it (the ground truth)
        self.slot_history: Callable[[str], SlotHistory | None] | None = None

    def violation(self, text: str) -> None:
        self.violations.append(text)

    # --- producers -----------------------------------------------------------------

    def published(self, group: str, producer: str, uuid: bytes, seq: int) -> None:
        self.published_by[uuid] = (producer, seq)

    def pub_acked(
        self,
        group: str,
        topic: str,
        producer: str,
        uuid: bytes,
        seq: int,
        ts: int,
        era: int | None = None,
    ) -> None:
        """``group`` acknowledged the record at ``ts``; ``era``: the era the ``puback``
        names for it (a moved slot's record not of its current era: the ts is that era's
        group's)."""
        found = self._position(group, topic, ts, era)
        if found is None:
            return
        group, pos = found
        self.topic_acked.setdefault(topic, {})[ts] = uuid
        acked = self.acked.setdefault(group, {})
        other = acked.get(ts)
        if other is not None and other != uuid:
            self.violation(f"{group}: ts {ts} acknowledged for two records ({producer}:{seq})")
        prev = self.acked_ts.get(uuid)
        if prev is not None and prev != (group, ts):
            self.violation(
                f"{producer}:{seq} acknowledged twice, at {prev[0]} ts {prev[1]} and {group} ts {ts}"
            )
        acked[ts] = uuid
        self.acked_ts[uuid] = (group, ts)
        self.topic_pos.setdefault(topic, {})[pos] = uuid
        self.acked_pos[uuid] = pos
        mine = self.producer_ts.setdefault(producer, {})
        mine[seq] = pos
        for s, t in mine.items():
            if (s < seq and t >= pos) or (s > seq and t <= pos):
                self.violation(
                    f"{producer}'s order broken: seq {s} at {_pos(t)}, seq {seq} at {_pos(pos)}"
                )
                break

    def _position(
        self, group: str, topic: str, ts: int, era: int | None
    ) -> tuple[str, tuple[int, int]] | None:
        """The group that holds an acknowledged record and its position (era, ts); None
        after a violation. A slot that never moved: (the acknowledging group, (0, ts))."""
        h = self.slot_history(topic) if self.slot_history is not None else None
        if h is None or not h.moved:
            # a puback naming an era of a slot whose only move was rolled back since: a
            # retry answered from the handover, at the ts of the era's (only) group
            return (h.owner if h is not None and era is not None else group), (0, ts)
        try:
            holder = h.group_of_era(era) if era is not None else group
        except SlotHistoryError as e:
            self.violation(f"{group} acknowledged {topic} ts {ts} in era {era}: {e}")
            return None
        at = h.era_of(holder, ts)
        sealed_below = h.move is not None and h.move.until is not None and h.move.until < ts
        if at == h.era and holder == h.owner and sealed_below:
            at = None  # above the seal point of the era that ends
        if at is None or (era is not None and at != era):
            self.violation(
                f"{group} acknowledged {topic} at {holder} ts {ts} (era {era}), outside the"
                f" eras {holder} held: {h.encode().decode()}"
            )
            return None
        return holder, (at, ts)

    # --- brokers -------------------------------------------------------------------

    def primary_elected(self, group: str, broker: str, now: float) -> None:
        """A shared member still on another broker is away from the new primary from now
        (it hears of the new epoch only when its connection ends)."""
        self.primaries[group] = broker
        for a in self.apps.values():
            if a.broker not in (None, broker) and (a.group or group_of_topic(a.topic)) == group:
                self.app_away_from(a, now)

    def accepted_writes(self, group: str, epoch: int, broker: str) -> None:
        who = self.writers.setdefault((group, epoch), broker)
        if who != broker:
            self.violation(
                f"{group}: two primaries accept writes in epoch {epoch}: {who}, {broker}"
            )

    def acknowledged_copies(
        self, group: str, ts: tuple[int, ...], logs: Mapping[str, Sequence[GroupLog]]
    ) -> None:
        """A primary acknowledges: each record must have reached ``min_insync`` replicas
        (``logs``: every incarnation's logs, live, or crashed since it may have received it)."""
        for t in ts:
            holders = [b for b, held in logs.items() if any(_holds(lg, t, None) for lg in held)]
            if len(holders) < self.min_insync:
                self.violation(
                    f"{group}: ts {t} acknowledged with {len(holders)} copies {holders}"
                    f" (min_insync {self.min_insync})"
                )
                return

    def check_isr_holds(
        self, group: str, state: GroupState | None, logs: Mapping[str, tuple[str, GroupLog]]
    ) -> None:
        """Every live in-sync replica (the incarnation the ISR names) holds every acked record."""
        if state is None:
            return
        acked = self.acked.get(group, {})
        key = (
            state.epoch,
            tuple(state.isr),
            len(acked),
            tuple(
                (m, b, id(log), len(log.entries), log.base_ts, tuple(log.epochs[-1:]))
                for m, (b, log) in sorted(logs.items())
            ),
        )
        if self._checked.get(group) == key:
            return  # nothing it depends on moved since the last check
        self._checked[group] = key
        for m in state.isr:
            got = logs.get(m)
            if got is None or got[0] != state.boots.get(m):
                continue
            log = got[1]
            for ts, uuid in acked.items():
                if not _holds(log, ts, uuid):
                    producer, seq = self.published_by.get(uuid, ("?", 0))
                    self.violation(
                        f"{group}: acknowledged record ts {ts} ({producer}:{seq}) is missing on"
                        f" in-sync replica {m} (epoch {state.epoch}, isr {list(state.isr)})"
                    )
                    return

    def offset_stored(
        self, topic: str, name: str, offset: int, created: bool, era: int = 0
    ) -> None:
        """``offset`` (a ts of ``era``: a moved slot's, M5) is written for ``topic/name``."""
        at = (era, offset)
        if created:
            self.sub_bases.setdefault((topic, name), at)
            return
        base = self.sub_bases.get((topic, name), (0, 0))
        apps = [a for a in self.apps.values() if (a.topic, a.subscription) == (topic, name)]
        if not apps:
            return
        if apps[0].mode == "shared":
            acked = set().union(*(a.acked_at for a in apps))
            group = self.topic_pos.get(topic, {})
            missing = sorted(p for p in group if base < p <= at and p not in acked)
            if missing:
                self.violation(
                    f"offset {_pos(at)} of {topic}/{name} stored ahead of its acks"
                    f" ({_pos(missing[0])})"
                )
        else:
            top = max(a.acked_pos for a in apps)
            if at > max(top, base) and not self._era_start(topic, at):
                self.violation(
                    f"offset {_pos(at)} of {topic}/{name} stored, acknowledged only {_pos(top)}"
                )

    def _era_start(self, topic: str, at: Pos) -> bool:
        """A durable subscription handed on to era ``at[0]`` is stored at that era's start
        (its ``after``): nothing of the era acknowledged yet, everything before it was."""
        h = self.slot_history(topic) if self.slot_history is not None else None
        if h is None or not h.moved or at[0] == 0 or at[0] > h.era:
            return False
        after = h.history[at[0]].after if at[0] < h.era else h.after
        return at[1] <= after

    def _holder(self, topic: str, p: Pos) -> str | None:
        """The group a record at ``p`` is stored in (None: the topic's slot never moved)."""
        h = self.slot_history(topic) if self.slot_history is not None else None
        if h is None or not h.moved:
            return None
        try:
            return h.group_of_era(p[0])
        except SlotHistoryError:
            return None

    def purged(self, topic: str, upto: int, by: str | None = None) -> None:
        """Nothing a durable subscription has not yet received may be purged (``by``: the
        group that purged; of a moved slot, only its eras' records)."""
        group = self.topic_pos.get(topic, {})
        subs: dict[str, list[App]] = {}
        for a in self.apps.values():
            if a.topic == topic and a.subscription:
                subs.setdefault(a.subscription, []).append(a)
        for name, apps in sorted(subs.items()):
            base = self.sub_bases.get((topic, name))
            if base is None:
                continue
            got = set().union(*(a.pos for a in apps))
            for p in sorted(group):
                if base < p and p[1] <= upto and p not in got:
                    holder = self._holder(topic, p)
                    if by is not None and holder is not None and holder != by:
                        continue  # another group's record: not what this purge removed
                    self.violation(
                        f"{topic} purged up to {upto}{f' in {by}' if holder else ''};"
                        f" {name} never received {_pos(p)}"
                    )
                    return

    # --- subscribers --------------------------------------------------------------

    def subscriber(self, app: str, topic: str, subscription: str | None, mode: str) -> None:
        self.apps[app] = App(topic, subscription, mode)

    def sub_started(self, app: str, next_ts: int, era: int = 0) -> None:
        self.apps[app].base = next_ts

    def sub_acked(self, app: str, ts: int, era: int = 0) -> None:
        a = self.apps[app]
        a.acked_upto = max(a.acked_upto, ts)
        a.acked_pos = max(a.acked_pos, (era, ts))

    def shared_acked(self, app: str, ts: list[int], era: int = 0) -> None:
        self.apps[app].acked.update(ts)
        self.apps[app].acked_at.update((era, t) for t in ts)

    def client_error(self, app: str, text: str) -> None:
        self.apps[app].errors.append(text)

    def app_away(self, app: str, now: float) -> None:
        self.app_away_from(self.apps[app], now)
        self.apps[app].broker = None

    def app_away_from(self, a: App, now: float) -> None:
        if a.away_since is None:
            a.away_since = now

    def app_back(self, app: str, now: float, broker: str, group: str | None = None) -> None:
        """``app`` subscribed at ``broker`` of ``group`` (its topic's group if None). Only
        at the group's primary is it back: at a deposed one (that has not heard of the
        new epoch yet) it is still away from the group, whose primary hands what it held
        to the others after the grace."""
        a = self.apps[app]
        a.broker = broker
        a.group = group or group_of_topic(a.topic)
        if self.primaries.get(a.group, broker) != broker:
            self.app_away_from(a, now)
            return
        if a.away_since is not None and now - a.away_since > self.shared_grace:
            a.vanished = True
        a.away_since = None

    def _vanished(self, a: App, now: float) -> bool:
        away = a.away_since is not None and now - a.away_since > self.shared_grace
        return a.vanished or away

    def app_received(
        self, app: str, group: str, rec: Record, now: float = 0.0, era: int = 0
    ) -> None:
        a = self.apps[app]
        ts, uuid = rec[0], rec[1]
        if uuid in a.uuids:
            self.violation(f"{app} received {rec[3].decode()} twice (now at ts {ts})")
        elif a.mode == "shared":
            for other, o in self.apps.items():
                if o is not a and (o.topic, o.subscription) == (a.topic, a.subscription):
                    if uuid in o.uuids and not self._vanished(o, now):
                        self.violation(
                            f"{app} received {rec[3].decode()} (ts {ts}), which {other} of"
                            f" shared subscription {a.subscription} had received"
                        )
        a.uuids.add(uuid)
        a.ts.add(ts)
        pos = self._delivered_at(app, a.topic, group, ts, era)
        if pos is None:
            return
        a.pos.add(pos)
        acked = self.acked_pos.get(uuid)
        if acked is not None and acked != pos:
            self.violation(
                f"{app} received {rec[3].decode()} at {_pos(pos)}, acknowledged at {_pos(acked)}"
            )
        producer, seq = rec[3].decode().rsplit(":", 1)
        if a.mode != "shared":
            last = a.last_seq.get(producer, 0)
            if int(seq) <= last:
                self.violation(f"{app} received {producer}:{seq} after {producer}:{last}")
            a.last_seq[producer] = int(seq)

    def _delivered_at(self, app: str, topic: str, group: str, ts: int, era: int) -> Pos | None:
        """Where a record ``group`` delivered as (``era``, ``ts``) lies: the era must be
        one of the group's and hold ``ts`` (as a ``puback``'s, :meth:`_position`); None
        after a violation."""
        h = self.slot_history(topic) if self.slot_history is not None else None
        if h is None or not h.moved:
            if era:
                self.violation(f"{app} got {topic} ts {ts} from {group} in era {era}: never moved")
                return None
            return (0, ts)
        try:
            holder = h.group_of_era(era)
        except SlotHistoryError as e:
            self.violation(f"{app} got {topic} ts {ts} from {group} in era {era}: {e}")
            return None
        if holder != group or h.era_of(group, ts) != era:
            self.violation(
                f"{app} got {topic} ts {ts} from {group} in era {era}, outside the eras"
                f" {group} held: {h.encode().decode()}"
            )
            return None
        return (era, ts)

    # --- after healing ------------------------------------------------------------

    def check_liveness(self, waiting: Mapping[str, int]) -> None:
        """Every acked record reached every durable subscription; every unnamed subscriber
        got every acked record between the first and last it saw; no producer is stuck."""
        for producer, n in sorted(waiting.items()):
            if n:
                self.violation(f"after healing, {producer} still waits for {n} batch(es)")
                return
        subs: dict[tuple[str, str], list[App]] = {}
        for app, a in sorted(self.apps.items()):
            subs.setdefault((a.topic, a.subscription or app), []).append(a)
        for (topic, name), apps in sorted(subs.items()):
            acked = self.topic_pos.get(topic, {})
            got = set().union(*(a.pos for a in apps))
            durable = apps[0].subscription is not None
            lo: Pos
            hi: Pos
            if durable:
                base = self.sub_bases.get((topic, name))
                lo, hi = (base if base is not None else TOP), TOP
            elif any("PURGED" in e for a in apps for e in a.errors):
                continue  # told that records are gone: a gap it knows of is no silent skip
            else:
                first = min(got) if got else (0, 0)
                lo, hi = ((first[0], first[1] - 1), max(got)) if got else ((0, 0), (0, 0))
            for p in sorted(acked):
                if lo < p <= hi and p not in got:
                    kind = "durable subscription" if durable else "unnamed subscriber"
                    self.violation(
                        f"after healing, {kind} {name} of {topic} never received acked {_pos(p)}"
                    )
                    return

    def check_group_whole(self, group: str, isr: Sequence[str], brokers: Sequence[str]) -> None:
        """After healing and a quiet period every replica of a group is in sync again: a
        broker that never re-joins (e.g. waits on a stale suspicion) leaves the group one
        fault from refusing writes."""
        if self.violations:
            return
        missing = sorted(set(brokers) - set(isr))
        if missing:
            self.violation(
                f"after healing, {group}'s ISR is {list(isr)}: {missing} never re-joined"
            )


def _pos(p: tuple[int, int]) -> str:
    return f"ts {p[1]}" if p[0] == 0 else f"era {p[0]} ts {p[1]}"


def _holds(log: GroupLog, ts: int, uuid: bytes | None) -> bool:
    """Does ``log`` hold record ``ts`` (or has it purged it, which only happens once every
    subscription has acknowledged it)?"""
    if ts < log.base_ts:
        return True
    i = ts - log.base_ts
    if i >= len(log.entries):
        return False
    e = log.entries[i]
    return e is None or uuid is None or e[1][1] == uuid
