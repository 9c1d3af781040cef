"""Readers of a moved slot's topics (docs/replication.md M3-M6), part of BrokerCore.

A reader of a moved slot reads one era in one group: the era's records are that group's
``after < ts <= until``. :meth:`SlotReaders.admit` decides what a ``sub`` reads here
(from :func:`~tritonmq.core.slotguard.read_verdict`), :meth:`SlotReaders.check` sends a
reader on once its era ended (the move completed) and it was handed every record up to
the seal point: ``WRONG_GROUP`` with its ``sid``, naming the next era's group and the
``(era, after)`` to go on from. While the slot is only sealed the reader waits here (a
roll back continues its era). A slot that never moved is not decided here (M1).

Durable subscriptions (M5, M6) are served by the group of their stored offset's era: it
serves them up to the era's seal point and, once everything up to it is acknowledged,
writes the offset at the next era (that era's ``after``) and lets them go (their hold on
purge goes with them), ending its consumers with ``WRONG_GROUP`` naming the next era's
group. The owner loads one stored at an older era as *pending*: acknowledged nothing of
its era (it holds every record of it), not written by it, its consumers sent to the
stored era's group, and reads ZooKeeper again until the offset reaches its era.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from tritonmq.core.actions import Action, LoadSubscriptions, SendError
from tritonmq.core.consumers import Consumer, Durable, Mode
from tritonmq.core.delivery import Delivery
from tritonmq.core.events import SubscriptionRegistered, SubscriptionsLoaded
from tritonmq.core.log import GroupLog
from tritonmq.core.moves import SlotMoves
from tritonmq.core.presence import PresenceTable
from tritonmq.core.slotguard import SlotDecision, Verdict, read_verdict
from tritonmq.core.slothistory import SlotHistory
from tritonmq.wire.frames import ErrorCode, From, Sub

MAX_TS = 2**53 - 1  # above every ts (the wire's integer bound)
RELOAD_S = 1.0  # a pending durable subscription's offset is read again this often

# admit's answer for a named ``sub`` this group must read ZooKeeper for first (the
# subscription may have reached or left our era since we loaded it)
RELOAD = "reload"


@dataclass(frozen=True, slots=True)
class Admitted:
    """A ``sub`` of a moved slot served here: ``frame`` (its start within the era), the
    era it reads and that era's seal point (None: still being written)."""

    frame: Sub
    era: int
    until: int | None


class SlotReaders:
    """Which era each reader of a moved slot reads here, and when it is sent on."""

    def __init__(self, moves: SlotMoves) -> None:
        self.moves = moves
        self.capped = False  # some reader here is held at a seal point (a roll back lifts it)
        self.asked: set[tuple[str, str]] = set()  # named subs waiting for a fresh load
        self.reload_at = 0.0  # pending durables: when to read ZooKeeper again
        self.owned: frozenset[tuple[int, int]] = frozenset()  # (slot, era) of moved slots we own
        # durable subscriptions we handed on and let go -> the era their offset was stored at
        # then: a load that finds one at an older era read ZooKeeper before that store
        self.handed: dict[tuple[str, str], int] = {}

    # --- durable subscriptions (M5, M6) ---------------------------------------------------

    def gained_ownership(self) -> bool:
        """Did this group become the owner of a moved slot's era since the last view? Its
        owner must read the subscriptions again (a moved slot's new era is ours from
        ``complete`` on, and one stored at an older era holds purge here, M5)."""
        hs = self.moves.histories or ()
        group = self.moves.group
        now = frozenset((n, h.era) for n, h in enumerate(hs) if h.moved and h.owner == group)
        gained, self.owned = bool(now - self.owned), now
        return gained

    def ahead_of_view(self, ev: SubscriptionsLoaded) -> bool:
        """Does ``ev`` name an era of a slot our view has not seen? Eras only grow, so the
        view is older than the subscriptions: read as of it, one handed on past our era
        looks like ours at that era's offset, an other group's ts (simulator scenario
        ``test_a_load_naming_an_era_the_view_has_not_seen_is_read_again``)."""
        for topic, name, _, _ in ev.found or ():
            era = ev.eras.get((topic, name), 0)
            if era and era > (h.era if (h := self._history(topic)) is not None else 0):
                return True
        return False

    def load(self, delivery: Delivery, ev: SubscriptionsLoaded, start_ts: int) -> None:
        """What ZooKeeper holds, by era: a subscription whose offset is of an era we held
        is served here from it; one at an older era than the owner's current one is pending
        here (the owner); any other is another group's."""
        keep, eras = [], {}
        pending: dict[tuple[str, str], tuple[int, int]] = {}  # key -> (our era, its after)
        for topic, name, mode, offset in ev.found or ():
            era = ev.eras.get((topic, name), 0)
            if era < self.handed.get((topic, name), 0):
                # read before the store of our hand-on: we let it go (or hold it pending)
                # since; taken as found, it was ours again at its old offset, and what its
                # members had acknowledged went out again (simulator scenario
                # test_a_load_read_before_a_stored_hand_on_does_not_bring_the_subscription_back)
                continue
            found = self.moves.history_of(topic)
            if found is None:
                keep.append((topic, name, mode, offset))
                continue
            h = found[1]
            if era <= h.era and h.group_of_era(era) == self.moves.group:
                keep.append((topic, name, mode, offset))
                eras[(topic, name)] = era
            elif (ours := _next_era_of(h, self.moves.group, era)) is not None:
                keep.append((topic, name, mode, h.after_of(ours)))
                eras[(topic, name)] = era
                pending[(topic, name)] = (ours, h.after_of(ours))
        before = {k for k, d in delivery.durables.items() if not d.pending}
        delivery.load(keep, ev.now, start_ts=start_ts, eras=eras)
        for key, era in eras.items():
            d = delivery.durables.get(key)
            if d is None or (key in before and d.era != era):
                continue  # served here already (perhaps handed on, not yet stored): ours
            if key in pending:
                ours, after = pending[key]
                d.era, d.stored_era, d.stored, d.pending = ours, era, None, True
                d.start_afresh(after)  # not its offset here: another era's ts
            else:
                was_pending, d.pending = d.pending, False
                d.era = d.stored_era = era
                if was_pending:  # its offset reached our era: ours from here on
                    d.start_afresh(d.stored if d.stored is not None else d.offset)
                elif key not in before:
                    self._handed_before(delivery, d)

    def _handed_before(self, delivery: Delivery, d: Durable) -> None:
        """A new primary's subscription that our previous primary had handed on to another
        group's era (its mirror says the next era) while the store of that hand-on was
        lost: everything of the era ZooKeeper holds is acknowledged, so it is handed on
        again, not served from ZooKeeper's offset. Served, its members were handed the
        era's records a second time (simulator scenario
        ``test_a_new_primary_hands_on_again_what_its_predecessor_handed_on_and_did_not_store``;
        before the mirror said its era, a restore took the next era's ``after`` as this
        era's offset, right only by chance)."""
        snap = delivery.mirror.subs.get((d.topic, d.name))
        h = self._history(d.topic)
        if snap is None or h is None or not d.era < snap.era <= h.era:
            return
        if h.group_of_era(d.era) == self.moves.group != h.group_of_era(snap.era):
            d.era, d.offset = snap.era, h.after_of(snap.era)  # written, then let go (M5)

    def held_elsewhere(self, delivery: Delivery, ev: SubscriptionRegistered) -> bool:
        """Did ZooKeeper answer our registration with an offset of another era than the
        one we declared it at? Another group created it meanwhile: its offset is that
        group's ts (or ours of an older era), and taken as ours it skipped every record of
        our era below it (M9). Our declaration is forgotten and its ``sub``s are decided
        on the fresh load that follows, at the era it is at (pending here, sent on)."""
        key = (ev.topic, ev.name)
        d = delivery.durables.get(key)
        if d is None or d.stored is not None or d.era == ev.era:
            return False
        del delivery.durables[key]
        self.asked.add(key)
        return True

    def current_era(self, topic: str) -> int:
        """The era a durable subscription of ``topic`` created here (a ``commit``) is at:
        a moved slot's current era when we own it, else 0."""
        h = self._history(topic)
        return h.era if h is not None and h.owner == self.moves.group else 0

    def _history(self, topic: str) -> SlotHistory | None:
        found = self.moves.history_of(topic)
        return found[1] if found else None

    def _admit_named(
        self, delivery: Delivery, conn: Any, frame: Sub, h: SlotHistory
    ) -> SendError | Admitted | str:
        """A durable subscription is served by the group of its offset's era (M5)."""
        key = (frame.topic, frame.subscription or "")
        group = self.moves.group
        d = delivery.durables.get(key)
        fresh = key in self.asked
        self.asked.discard(key)
        if d is not None and not d.pending and d.era <= h.era and h.group_of_era(d.era) == group:
            until = h.until_of(d.era)
            d.until = until
            self.capped = self.capped or until is not None
            after = h.after_of(d.era)
            if isinstance(frame.start, int) and frame.era != d.era:
                frame = replace(frame, start=From.LATEST)  # its ts is another era's
            elif isinstance(frame.start, int) and frame.start <= after:
                # our ts up to ``after`` are older eras' records (we held the slot before)
                frame = replace(frame, start=after + 1)
            if d.mode is Mode.BROADCAST:  # a shared one joins at its cursor
                frame = _earliest_of_era(delivery.log, frame, after, d.offset)
            return Admitted(frame, d.era, until)
        if not fresh:
            self.asked.add(key)
            return RELOAD
        if d is not None:  # pending here, or handed on by us and not let go yet
            holder = h.group_of_era(d.stored_era if d.pending else min(d.era, h.era))
            msg = f"subscription {frame.subscription!r} of {frame.topic!r} is at group {holder}"
            return SendError(conn, ErrorCode.WRONG_GROUP, msg, sid=frame.sid, group=holder)
        if h.owner != group:
            msg = f"topic {frame.topic!r} belongs to group {h.owner}"
            return SendError(conn, ErrorCode.WRONG_GROUP, msg, sid=frame.sid, group=h.owner)
        if h.move is not None:
            return moving_away(conn, frame.topic, h, sid=frame.sid)
        until = h.until_of(h.era)  # a new subscription: created at the current era (M5)
        self.capped = self.capped or until is not None
        return Admitted(_earliest_of_era(delivery.log, frame, h.after), h.era, until)

    def _check_durable(
        self, delivery: Delivery, d: Durable, h: SlotHistory, lifted: set[str]
    ) -> list[Action]:
        """Hand a durable subscription of an ended era on once everything up to the seal
        point is acknowledged; let it go once that is stored (M5, M6)."""
        group = self.moves.group
        if d.pending or d.era > h.era:
            return []
        if h.group_of_era(d.era) == group:
            d.until = until = h.until_of(d.era)
            for c in d.consumers:
                _set_until(c, until, lifted)
            self.capped = self.capped or until is not None
            if d.era == h.era or until is None:
                return []
            if d.offset < until and not _handed_all(delivery.log, d.topic, d.offset + 1, until):
                return []
            # everything of its era is acknowledged: its consumers go on at the next era's
            # group (first: an ack or dispatch here would move the offset again), and the
            # offset is that era's from its start
            to = h.group_of_era(d.era + 1)
            out: list[Action] = []
            for c in list(d.consumers):
                msg = f"subscription {d.name!r} of {d.topic!r} goes on at group {to}"
                out.append(SendError(c.conn, ErrorCode.WRONG_GROUP, msg, sid=c.sid, group=to))
                out.extend(delivery.unsubscribe(c.conn, c.sid))
            d.era += 1
            d.offset = h.after_of(d.era)
            return out
        self._let_go(delivery, d, h, group)
        return []

    def stored(self, delivery: Delivery, offsets: Iterable[tuple[str, str, int]]) -> None:
        """``offsets`` were just stored: a hand-on among them is let go (or held pending,
        when we hold a later era) now, before the purge that follows the store. Until then
        its offset is the next era's ``after``, another group's ts, and purge held only
        that: it purged the records of our later era the subscription still needs
        (simulator scenario ``test_a_stored_hand_on_purges_nothing_of_a_later_era_we_hold_for_it``)."""
        group = self.moves.group
        for topic, name, _ in offsets:
            d = delivery.durables.get((topic, name))
            h = self._history(topic) if d is not None else None
            if (
                d is None
                or h is None
                or d.pending
                or d.era > h.era
                or h.group_of_era(d.era) == group
            ):
                continue
            self._let_go(delivery, d, h, group)

    def _let_go(self, delivery: Delivery, d: Durable, h: SlotHistory, group: str) -> None:
        """``d``, handed on by us to another group's era: once that is stored, we let it go,
        unless we held the slot again later: stored at an older era, it is pending here (it
        needs every record of our era) until its offset reaches it. A load still on its way
        may have read ZooKeeper before that store: :meth:`load` skips what it finds of ``d``
        below the era stored."""
        if d.stored_era != d.era or d.stored != d.offset:
            return  # the hand-on is not stored yet: we still write it
        self.handed[(d.topic, d.name)] = d.era
        ours = _next_era_of(h, group, d.era)
        if ours is not None:
            d.era, d.stored_era, d.stored, d.pending = ours, d.era, None, True
            d.start_afresh(h.after_of(ours))
        else:
            delivery.durables.pop((d.topic, d.name), None)

    def admit(self, delivery: Delivery, conn: Any, frame: Sub) -> SendError | Admitted | str | None:
        """A ``sub`` of ``frame.topic``: None when its slot never moved (the owner decided),
        else a refusal (WRONG_GROUP naming where its era is, or where to go on), what to
        read here, or RELOAD (read the durable subscriptions again, then decide)."""
        found = self.moves.history_of(frame.topic)
        if found is None:
            return None
        n, h = found
        group = self.moves.group
        log = delivery.log
        if frame.subscription:
            return self._admit_named(delivery, conn, frame, h)
        if frame.start == From.EARLIEST and h.era > 0:
            # the oldest record still retained, whichever group holds it: from era 0 on, as
            # an integer ``from`` reads (an era with nothing of the topic left passes on)
            frame = replace(frame, start=h.history[0].after + 1, era=0, resume=False)
        if isinstance(frame.start, From):
            # a new position (latest; earliest before any move completed): the current era
            if h.owner != group:
                msg = f"topic {frame.topic!r} (slot {n}) belongs to group {h.owner}"
                return SendError(conn, ErrorCode.WRONG_GROUP, msg, sid=frame.sid, group=h.owner)
            until = h.until_of(h.era)
            if frame.start == From.EARLIEST:
                frame = replace(frame, start=h.after + 1)
            self.capped = self.capped or until is not None
            return Admitted(frame, h.era, until)
        start = frame.start
        d = read_verdict(h, group, frame.era, start - 1)
        if d.verdict is Verdict.NO_SUCH_ERA:
            msg = f"slot {n} of topic {frame.topic!r} has no era {frame.era} (it is at {h.era})"
            return SendError(conn, ErrorCode.BAD_REQUEST, msg, sid=frame.sid)
        if d.verdict is Verdict.WRONG_GROUP:  # the era is another group's: read it there
            assert d.group is not None
            return _send_on(conn, frame.sid, frame.topic, d.group, frame.era, start - 1)
        if d.verdict is Verdict.SERVE:
            start = max(start, d.after + 1)
            if d.until is not None and _handed_all(log, frame.topic, start, d.until):
                if frame.resume and log.last_purged(frame.topic) >= start:
                    return _purged(conn, frame, start)
                d = read_verdict(h, group, frame.era, d.until)
        if d.verdict is Verdict.ENDED:
            assert d.group is not None and d.era is not None
            return _send_on(conn, frame.sid, frame.topic, d.group, d.era, d.after)
        self.capped = self.capped or d.until is not None
        return Admitted(replace(frame, start=start), frame.era, d.until)

    def check(
        self,
        delivery: Delivery,
        presence: PresenceTable,
        now: float,
        load: Callable[[], LoadSubscriptions],
    ) -> list[Action]:
        """Every reader of a moved slot here: its era's end follows the view (a seal caps
        it, a roll back lifts the cap), and one that has everything of an ended era is sent
        on. ``load``: asks for a reload of pending durable subscriptions."""
        moves = self.moves
        if not moves.any_moved and not self.capped:
            return []
        out: list[Action] = []
        capped, self.capped = self.capped, False
        pending = False
        lifted: set[str] = set()  # topics whose readers a seal point no longer caps
        for dur in list(delivery.durables.values()):
            dh = self._history(dur.topic)
            if dh is None:
                dur.until = None
                continue
            pending = pending or dur.pending
            out.extend(self._check_durable(delivery, dur, dh, lifted))
        if pending and now >= self.reload_at:
            self.reload_at = now + RELOAD_S
            out.append(load())
        for topic, consumers in list(delivery.by_topic.items()):
            found = moves.history_of(topic)
            if found is None:  # never moved, or a move rolled back: no end
                for c in consumers if capped else ():
                    _set_until(c, None, lifted)
                continue
            h = found[1]
            for c in list(consumers):
                if c.durable is not None:
                    continue
                d = self._verdict(delivery.log, h, c)
                if d.verdict is Verdict.SERVE:
                    _set_until(c, d.until, lifted)
                    self.capped = self.capped or d.until is not None
                    continue
                era, after = (
                    (d.era, d.after) if d.verdict is Verdict.ENDED else (c.era, c.next_ts - 1)
                )
                to = d.group or h.owner
                out.append(_send_on(c.conn, c.sid, topic, to, era or 0, after))
                out.extend(delivery.unsubscribe(c.conn, c.sid, now))
                out.extend(presence.leave(c.conn, c.sid))
        # a record committed while the cap held was pushed to nobody (a roll back's first
        # writes): push it now, as no later commit may come to (simulator scenario
        # test_a_roll_back_delivers_what_was_written_before_the_cap_was_lifted)
        out.extend(delivery.pump(sorted(lifted), now))
        return out

    def _verdict(self, log: GroupLog, h: SlotHistory, c: Consumer) -> SlotDecision:
        group = self.moves.group
        d = read_verdict(h, group, c.era, c.next_ts - 1)
        if (
            d.verdict is Verdict.SERVE
            and d.until is not None
            and c.era < h.era
            and _handed_all(log, c.topic, c.next_ts, d.until)
        ):
            return read_verdict(h, group, c.era, d.until)
        return d


def moving_away(
    conn: Any, topic: str, h: SlotHistory, *, sid: int | None = None, id: int | None = None
) -> SendError:
    """A new durable subscription (a named ``sub`` or a ``commit``) of a slot moving away
    from us: created here, at the era that ends, the new owner may never learn of it (its
    reload at ``complete`` may read ZooKeeper before the registration landed) and purge
    its era for nobody. Retriable: once the move completed the client reaches the new
    owner, after a roll back us again (M5)."""
    to = h.move.to if h.move is not None else "?"
    msg = f"topic {topic!r} is moving to group {to}: a new subscription waits for the move"
    return SendError(conn, ErrorCode.UNAVAILABLE, msg, id=id, sid=sid)


def _set_until(c: Consumer, until: int | None, lifted: set[str]) -> None:
    """Cap ``c`` at ``until`` (None: no cap); note its topic when that lifts a cap."""
    if c.until is not None and (until is None or until > c.until):
        lifted.add(c.topic)
    c.until = until


def _next_era_of(h: SlotHistory, group: str, era: int) -> int | None:
    """Our first era of the slot after ``era``, ended or current: a durable subscription
    stored at ``era`` needs every record of it, so it is pending here (holding them from
    the era's start) until its offset reaches it. Not only the owner's: a group that held
    a later era and moved the slot on purged that era for nobody (simulator scenario
    ``test_a_group_that_moved_its_era_on_keeps_it_for_a_subscription_of_an_older_era``, a
    subscription at era 0 while the slot went g0 -> g1 -> g2)."""
    return next((e for e in range(era + 1, h.era + 1) if h.group_of_era(e) == group), None)


def _earliest_of_era(log: GroupLog, frame: Sub, after: int, offset: int = -1) -> Sub:
    """``earliest`` of a durable subscription read at an era whose records are this group's
    ``ts > after``: the oldest of them retained, else as ``latest``. The group's log may
    still hold an older era's records of the topic (it held the slot before): not this
    era's, and handed out as its they would skip the eras between. Above the ``offset``
    of an existing one it is as ``latest`` too (the same records, from its offset on):
    taken as a position, it would move the offset over other topics' ts, ahead of every
    acknowledgement."""
    if frame.start != From.EARLIEST:
        return frame
    t = log.topics.get(frame.topic)
    first = t.between(after + 1, MAX_TS, 1) if t is not None else []
    if not first or (offset >= 0 and first[0][0] > offset):
        return replace(frame, start=From.LATEST)
    return replace(frame, start=first[0][0])


def _handed_all(log: GroupLog, topic: str, start: int, until: int) -> bool:
    """No record of ``topic`` with ``start <= ts <= until`` is left to hand out."""
    t = log.topics.get(topic)
    return t is None or not t.between(start, until, 1)


def _send_on(conn: Any, sid: int, topic: str, group: str, era: int, after: int) -> SendError:
    msg = f"topic {topic!r}: read era {era} at group {group} after ts {after}"
    return SendError(conn, ErrorCode.WRONG_GROUP, msg, sid=sid, group=group, era=era, after=after)


def _purged(conn: Any, frame: Sub, start: int) -> SendError:
    msg = f"records of topic {frame.topic!r} from ts {start} on were purged"
    return SendError(conn, ErrorCode.PURGED, msg, sid=frame.sid, first=start)
