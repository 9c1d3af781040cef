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
"""

from __future__ import annotations

from collections.abc import Iterable

from tritonmq.core.log import TopicLog
from tritonmq.wire.frames import SharedState, SharedSub, TsRanges


def ranges_of(t: TopicLog, ts: Iterable[int]) -> TsRanges:
    """Records of ``t`` (ascending ts) as ranges: neighbours in the topic's log merge."""
    out: list[tuple[int, int]] = []
    last_i = -2
    for one in ts:
        i = t.index_of(one)
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
        return SharedState(epoch, subs)

    def sent_nothing(self) -> None:
        """We start a new epoch as primary, or have no backup: send everything next time."""
        self._sent = None
