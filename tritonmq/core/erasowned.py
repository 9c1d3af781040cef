"""Which moved slots' eras this group owns, so that it notices a new one (M5), part of
BrokerCore.

The new group of a move learns of the slot's durable subscriptions only by reading
ZooKeeper; until it has, nothing holds the records it writes of the slot, and a purge
would drop them before a subscription stored at the old era (pending here: it holds every
record of the new era) was read. So on owning a new era the primary reads the
subscriptions again, and purges nothing until it has.
"""

from __future__ import annotations

from tritonmq.core.moves import SlotMoves


class OwnedEras:
    """The (slot, era) pairs of moved slots whose current era is ours, as last viewed."""

    def __init__(self) -> None:
        self.eras: frozenset[tuple[int, int]] = frozenset()

    def update(self, moves: SlotMoves) -> bool:
        """Note the latest view; True when it brings an era of ours not seen before."""
        hs = moves.histories or ()
        now = frozenset((n, h.era) for n, h in enumerate(hs) if h.era and h.owner == moves.group)
        new = bool(now - self.eras)
        self.eras = now
        return new
