"""What a primary tells its backups about its shared subscriptions, and what a backup keeps.

A shared subscription's stored offset is only its low watermark: which records above
it members hold or acknowledged lives in the primary's memory. The primary sends it to
its backups (a :class:`~tritonmq.wire.frames.SharedState` whenever it changed, at most
once a tick), as ranges of ts so that a window of thousands of records costs a few
pairs. The backup keeps the latest per subscription; if it is elected it restores each
shared subscription from it (:meth:`tritonmq.core.delivery.Delivery.load`).

What the primary did after its last frame reached the backup is unknown to the new
primary: it treats every record the old one may have handed out since (those at or
above the frame's ``cursor``, and its ``free`` ones) as possibly held by some member
it knew, until every such member came back or ``ephemeral_grace`` passed.

A primary hands a shared record to a member only once every in-sync backup has
answered a frame that says that member holds it (:class:`SharedGate`, replication.md
S8). A primary deposed while alive has no in-sync backup left to answer it, so it
hands out nothing its successor does not know of.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonmq.core.actions import Deliver
from tritonmq.core.consumers import Consumer
from tritonmq.core.log import TopicLog
from tritonmq.wire.frames import SharedState, SharedSub, TsRanges


def ranges_of(t: TopicLog, ts: Iterable[int]) -> TsRanges:
    """Records of ``t`` (ascending ts) as ranges: neighbours in the topic's log merge."""
    out: list[tuple[int, int]] = []
    last_i = -2
    recs = t.records
    for one in ts:
        nxt = last_i + 1  # a run of neighbours (what dispatch hands out) costs no search
        i = nxt if 0 <= nxt < len(recs) and recs[nxt][0] == one else t.index_of(one)
        if out and i == last_i + 1:
            out[-1] = (out[-1][0], one)
        else:
            out.append((one, one))
        last_i = i
    return tuple(out)


def range_minus(lo: int, hi: int, skip: Iterable[int]) -> TsRanges:
    """``[lo, hi]`` without the ts of ``skip`` (ascending), as ranges."""
    out: list[tuple[int, int]] = []
    at = lo
    for s in skip:
        if s < at or s > hi:
            continue
        if s > at:
            out.append((at, s - 1))
        at = s + 1
    if at <= hi:
        out.append((at, hi))
    return tuple(out)


def expand(t: TopicLog | None, ranges: TsRanges, upto: int) -> list[int]:
    """The ts of ``t``'s records the ranges name, at most ``upto``."""
    if t is None:
        return []
    out: list[int] = []
    for lo, hi in ranges:
        hi = min(hi, upto)
        if lo > hi:
            continue
        i, j = t.index_of(lo), t.index_of(hi + 1)
        out.extend(r[0] for r in t.records[i:j])
    return out


class SharedMirror:
    """A backup's copy of its primary's shared subscriptions; the primary's last frame sent."""

    def __init__(self) -> None:
        self.subs: dict[tuple[str, str], SharedSub] = {}
        self._sent: tuple[tuple[SharedSub, ...], frozenset[int]] | None = None
        self.seq = 0  # the last frame sent (they grow for as long as this broker runs)

    def adopt(self, frame: SharedState) -> None:
        self.keep(frame.subs)

    def keep(self, subs: Iterable[SharedSub]) -> None:
        """Our primary's state (:meth:`adopt`), or our own as we stop being primary: better
        than an older primary's."""
        for s in subs:
            self.subs[(s.topic, s.name)] = s

    def due(
        self, epoch: int, subs: tuple[SharedSub, ...], links: Iterable[int]
    ) -> SharedState | None:
        """The frame to send, if it differs from the last one or a link is new."""
        key = (subs, frozenset(links))
        if not subs or key == self._sent:
            return None
        self._sent = key
        self.seq += 1
        return SharedState(epoch, subs, self.seq)

    def sent_nothing(self) -> None:
        """We start a new epoch as primary, or have no backup: send everything next time."""
        self._sent = None


@dataclass(slots=True)
class SharedGate:
    """A primary's shared records on their way to members, held until the in-sync backups
    know who holds them (S8): ``waiting`` are in no frame yet, ``pending`` in frame ``seq``."""

    waiting: list[tuple[Consumer, Deliver]] = field(default_factory=list)
    pending: list[tuple[int, Consumer, Deliver]] = field(default_factory=list)
    acked: dict[str, int] = field(default_factory=dict)  # backup id -> the last seq it has

    def acked_by(self, backup: str, seq: int) -> None:
        self.acked[backup] = max(self.acked.get(backup, 0), seq)

    def confirmed(self, backups: Iterable[str], sent: int) -> int:
        """The newest frame every one of ``backups`` has (``sent``, the last frame sent,
        when there is no backup to wait for)."""
        return min((self.acked.get(b, 0) for b in backups), default=sent)

    def unanswered(self) -> int:
        """Frames sent whose records still wait for answers."""
        return len({seq for seq, _, _ in self.pending})

    def framed(self, seq: int) -> None:
        """Frame ``seq`` (sent, or the last one if nothing changed since) holds ``waiting``."""
        self.pending.extend((seq, c, d) for c, d in self.waiting)
        self.waiting.clear()

    def release(self, upto: int, consumers: Mapping[tuple[int, int], Consumer]) -> list[Deliver]:
        """What frames up to ``upto`` hold, as still in flight with its member: a member
        that left, or a record that timed out or was acknowledged meanwhile, is dropped."""
        out: list[Deliver] = []
        keep: list[tuple[int, Consumer, Deliver]] = []
        for seq, c, d in self.pending:
            if seq > upto:
                keep.append((seq, c, d))
                continue
            recs = _still_with(c, d, consumers)
            if recs:
                out.append(
                    d
                    if len(recs) == len(d.records)
                    else Deliver(d.conn, d.sid, d.topic, recs, d.era)
                )
        self.pending = keep
        return out

    def clear(self) -> None:
        self.waiting.clear()
        self.pending.clear()
        self.acked.clear()


def _still_with(c: Consumer, d: Deliver, consumers: Mapping[tuple[int, int], Any]) -> list[Any]:
    if consumers.get((id(c.conn), c.sid)) is not c or c.durable is None:
        return []
    inflight = c.durable.inflight
    return [r for r in d.records if (h := inflight.get(r[0])) is not None and h[0] is c]
