"""What a group's primary does with a write or a read of a slot, given the slot's history.

The decisions of docs/replication.md M2, M4 and M8, pure: :func:`write_verdict` for a
``pub``, :func:`read_verdict` for a reader at an era. Not yet called by
:class:`~tritonmq.core.broker.BrokerCore` (which still routes by the owner alone,
``SlotMap``): they are the rules the live path will follow once moves run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tritonmq.core.slothistory import SlotHistory


class Verdict(enum.Enum):
    ACCEPT = "accept"  # store the batch (we are the slot's writer)
    DEDUP = "dedup"  # answer from the uuid table with the original ts, whatever the slot
    WRONG_GROUP = "wrong-group"  # retriable: send it to ``group``
    MOVING_HERE = "moving-here"  # retriable UNAVAILABLE: the slot is moving to us, not ours yet
    SERVE = "serve"  # read ``after < ts <= until`` (``until`` None: no end yet)
    ENDED = "ended"  # the reader has everything of its era here: go on at ``group``, ``era``
    NO_SUCH_ERA = "no-such-era"  # non-retriable: the reader names an era the slot never had


@dataclass(frozen=True, slots=True)
class SlotDecision:
    verdict: Verdict
    group: str | None = None  # where to go (WRONG_GROUP, ENDED)
    era: int | None = None  # the era to read (SERVE) or go on with (ENDED)
    after: int = 0  # SERVE, ENDED: the era's records are ts > after ...
    until: int | None = None  # ... and ts <= until (None: the era is still being written)


def write_verdict(h: SlotHistory, group: str, *, already_stored: bool) -> SlotDecision:
    """A ``pub`` of the slot's topic reaching ``group``'s primary.

    ``already_stored``: every record of the batch is in our uuid table (ours or handed
    over, M2.3): a retry is answered with its original ts before any slot check (M8).
    """
    if already_stored:
        return SlotDecision(Verdict.DEDUP)
    if h.writer == group:
        return SlotDecision(Verdict.ACCEPT, group, h.era, h.after)
    if h.move is not None and h.owner == group:  # we are sealing or sealed (M2.1)
        return SlotDecision(Verdict.WRONG_GROUP, h.move.to)
    if h.move is not None and h.move.to == group:  # not ours until `complete` (M2.4)
        return SlotDecision(Verdict.MOVING_HERE, group)
    return SlotDecision(Verdict.WRONG_GROUP, h.owner)


def read_verdict(h: SlotHistory, group: str, era: int, delivered: int) -> SlotDecision:
    """A reader of the slot's topic at era ``era`` reaching ``group``, having been handed
    everything of that era up to ``ts = delivered`` (M4)."""
    if era < 0 or era > h.era:
        return SlotDecision(Verdict.NO_SUCH_ERA, None, era)
    holder = h.group_of_era(era)
    if holder != group:
        return SlotDecision(Verdict.WRONG_GROUP, holder, era)
    after, until = h.after_of(era), h.until_of(era)
    if until is not None and delivered >= until:
        if era < h.era:
            nxt = era + 1
            return SlotDecision(Verdict.ENDED, h.group_of_era(nxt), nxt, h.after_of(nxt))
        # sealed, not completed: the next era has no writer yet; the reader waits here
    return SlotDecision(Verdict.SERVE, group, era, after, until)
