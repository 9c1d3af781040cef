"""Readers of a moved slot's topics (docs/replication.md M3, M4), part of BrokerCore.

A reader of a moved slot reads one era in one group: the era's records are that group's
``after < ts <= until``. :meth:`SlotReaders.admit` decides what a ``sub`` reads here
(from :func:`~tritonmq.core.slotguard.read_verdict`), :meth:`SlotReaders.check` sends a
reader on once its era ended (the move completed) and it was handed every record up to
the seal point: ``WRONG_GROUP`` with its ``sid``, naming the next era's group and the
``(era, after)`` to go on from. While the slot is only sealed the reader waits here (a
roll back continues its era). A slot that never moved is not decided here (M1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tritonmq.core.actions import Action, SendError
from tritonmq.core.consumers import Consumer
from tritonmq.core.delivery import Delivery
from tritonmq.core.log import GroupLog
from tritonmq.core.moves import SlotMoves
from tritonmq.core.presence import PresenceTable
from tritonmq.core.slotguard import SlotDecision, Verdict, read_verdict
from tritonmq.core.slothistory import SlotHistory, SlotState
from tritonmq.wire.frames import ErrorCode, From, Sub


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

    def admit(self, log: GroupLog, conn: Any, frame: Sub) -> SendError | Admitted | None:
        """A ``sub`` of ``frame.topic``: None when its slot never moved (the owner decided),
        else a refusal (WRONG_GROUP naming where its era is, or where to go on) or what to
        read here."""
        found = self.moves.history_of(frame.topic)
        if found is None:
            return None
        n, h = found
        group = self.moves.group
        if frame.subscription or isinstance(frame.start, From):
            # a new position (latest, earliest) and durable subscriptions: the current era
            if h.owner != group:
                msg = f"topic {frame.topic!r} (slot {n}) belongs to group {h.owner}"
                return SendError(conn, ErrorCode.WRONG_GROUP, msg, sid=frame.sid, group=h.owner)
            until = _until_now(h)
            if frame.start == From.EARLIEST or (isinstance(frame.start, int)):
                start = frame.start if isinstance(frame.start, int) else 0
                frame = replace(frame, start=max(start, h.after + 1))
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

    def check(self, delivery: Delivery, presence: PresenceTable, now: float) -> list[Action]:
        """Every unnamed reader of a moved slot here: its era's end follows the view (a seal
        caps it, a roll back lifts the cap), and one that has everything of an ended era
        is sent on."""
        moves = self.moves
        if not moves.any_moved and not self.capped:
            return []
        out: list[Action] = []
        capped = False
        for topic, consumers in list(delivery.by_topic.items()):
            found = moves.history_of(topic)
            if found is None:  # never moved, or a move rolled back: no end
                for c in consumers if self.capped else ():
                    c.until = None
                continue
            h = found[1]
            for c in list(consumers):
                if c.durable is not None:
                    continue
                d = self._verdict(delivery.log, h, c)
                if d.verdict is Verdict.SERVE:
                    c.until = d.until
                    capped = capped or d.until is not None
                    continue
                era, after = (
                    (d.era, d.after) if d.verdict is Verdict.ENDED else (c.era, c.next_ts - 1)
                )
                to = d.group or h.owner
                out.append(_send_on(c.conn, c.sid, topic, to, era or 0, after))
                out.extend(delivery.unsubscribe(c.conn, c.sid, now))
                out.extend(presence.leave(c.conn, c.sid))
        self.capped = capped
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


def _until_now(h: SlotHistory) -> int | None:
    """The current era's seal point, once sealed."""
    return h.move.until if h.state is SlotState.SEALED and h.move is not None else None


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
