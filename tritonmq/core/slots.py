"""Topics map to logical slots, slots to groups.

``slot = crc32(topic) % slots``. A topic's slot never changes, so moving a slot
between groups (a later change) moves its topics without rehashing the rest.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_SLOTS = 64


def slot_of(topic: str, slots: int) -> int:
    return zlib.crc32(topic.encode()) % slots


@dataclass(frozen=True, slots=True)
class SlotMap:
    """Which group owns each slot; ``version`` grows with every change."""

    owners: tuple[str, ...]
    version: int = 0
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

    @classmethod
    def spread(cls, groups: Sequence[str], slots: int = DEFAULT_SLOTS) -> SlotMap:
        """Slots dealt round-robin over ``groups`` (sorted, so every caller agrees)."""
        if not groups or slots < 1:
            raise ValueError("a slot map needs at least one group and one slot")
        order = sorted(groups)
        return cls(tuple(order[i % len(order)] for i in range(slots)))

    def as_dict(self) -> dict[str, object]:
        return {"slots": self.slots, "owners": list(self.owners), "version": self.version}

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
        return cls(tuple(owners), int(version) if isinstance(version, int) else 0)
