"""Topics map to logical slots, slots to groups.

``slot = crc32(topic) % slots``. A topic's slot never changes, so moving a slot
between groups (a later change) moves its topics without rehashing the rest.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import SlotHistoryError

DEFAULT_SLOTS = 64


def slot_of(topic: str, slots: int) -> int:
    return zlib.crc32(topic.encode()) % slots


@dataclass(frozen=True, slots=True)
class SlotMap:
    """Which group owns each slot; ``version`` grows with every change."""

    owners: tuple[str, ...]
    version: int = 0
    # (slot, history) of every slot that ever moved or is moving: readers of a moved topic
    # need its eras (docs/replication.md M3); the others are era 0 at their owner
    moved: tuple[tuple[int, SlotHistory], ...] = ()
    _cache: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def slots(self) -> int:
        return len(self.owners)

    def group_of(self, topic: str) -> str:
        g = self._cache.get(topic)
        if g is None:
            g = self.owners[slot_of(topic, len(self.owners))]
            if len(self._cache) < 100_000:
                self._cache[topic] = g
        return g

    @property
    def groups(self) -> list[str]:
        return sorted(set(self.owners))

    def history_of(self, topic: str) -> SlotHistory:
        """The history of ``topic``'s slot (a slot that never moved: era 0 at its owner)."""
        n = slot_of(topic, len(self.owners))
        for slot, h in self.moved:
            if slot == n:
                return h
        return SlotHistory(self.owners[n])

    @classmethod
    def of_histories(cls, slots: Sequence[SlotHistory], version: int) -> SlotMap:
        return cls(
            tuple(h.owner for h in slots),
            version,
            tuple((n, h) for n, h in enumerate(slots) if h.moved),
        )

    @classmethod
    def spread(cls, groups: Sequence[str], slots: int = DEFAULT_SLOTS) -> SlotMap:
        """Slots dealt round-robin over ``groups`` (sorted, so every caller agrees)."""
        if not groups or slots < 1:
            raise ValueError("a slot map needs at least one group and one slot")
        order = sorted(groups)
        return cls(tuple(order[i % len(order)] for i in range(slots)))

    def as_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "slots": self.slots,
            "owners": list(self.owners),
            "version": self.version,
        }
        if self.moved:
            d["moved"] = {str(n): h.as_json() for n, h in self.moved}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> SlotMap:
        owners = d.get("owners")
        version = d.get("version", 0)
        if (
            not isinstance(owners, list | tuple)
            or not owners
            or not all(isinstance(o, str) for o in owners)
        ):
            raise ValueError("a slot map needs a non-empty list of owners")
        moved_d = d.get("moved") or {}
        if not isinstance(moved_d, Mapping):
            raise ValueError("a slot map's 'moved' is a map of slot -> history")
        try:
            pairs = ((int(n), SlotHistory.from_json(h)) for n, h in moved_d.items())
            moved = tuple(sorted(pairs, key=lambda p: p[0]))
        except (TypeError, ValueError, SlotHistoryError) as e:
            raise ValueError(f"a slot map's 'moved' is not slot -> history: {e}") from None
        if any(not 0 <= n < len(owners) for n, _ in moved):
            raise ValueError("a slot map's 'moved' names a slot it does not have")
        return cls(tuple(owners), int(version) if isinstance(version, int) else 0, moved)
