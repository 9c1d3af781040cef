"""The dedup state a moving slot hands from its old group to its new one (replication.md M2.3, M8).

The old group selects, from its log, the ``(ts, uuid)`` of the slot's records up to the
seal point that still deduplicate (:func:`handover_pairs`); the new group keeps them in
a :class:`HandedOver` table of their own, not in its log's uuid table: those ``ts`` are
the old group's, so a retry that hits one is answered with the record's position (era,
ts in the old group), and the table forgets a handover at a deadline the caller passes
in (the dedup window after the seal), never by the new group's own ``ts``.

Pure, and not yet called by the broker: the handover wire step and the replicated entry
that carries it to the new group's backups come with the move itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from tritonmq.core.log import GroupLog
from tritonmq.core.slothistory import Position


def handover_pairs(
    log: GroupLog, in_slot: Callable[[str], bool], until: int
) -> tuple[tuple[int, bytes], ...]:
    """``(ts, uuid)``, ascending, of every record at or below ``until`` that a retry may
    still name: the slot's retained records (``in_slot(topic)``), and every purged record
    the log still remembers. The log keeps no topic for purged records, so those of other
    slots come too; uuids are unique, so the extra ones match no retry of this slot."""
    retained = [
        (rec[0], rec[1])
        for name, t in log.topics.items()
        if in_slot(name)
        for rec in t.records
        if rec[0] <= until
    ]
    purged = [p for p in log.purged if p[0] <= until]
    return tuple(sorted({*retained, *purged}))


@dataclass(slots=True)
class HandedOver:
    """uuids another group stored before a slot moved here: uuid -> its position there."""

    positions: dict[bytes, Position] = field(default_factory=dict)
    # (deadline, era, uuids) per handover, in the order adopted
    batches: list[tuple[float, int, tuple[bytes, ...]]] = field(default_factory=list)

    def adopt(
        self, era: int, pairs: Iterable[tuple[int, bytes]], forget_at: float
    ) -> tuple[bytes, ...]:
        """Remember ``pairs`` (old group's ts, uuid) of ``era`` until ``forget_at``; a uuid
        already known keeps its first position (adopting the same handover twice, as a new
        primary repeating it does, changes nothing). Returns the uuids newly adopted."""
        fresh = []
        for ts, uuid in pairs:
            if uuid not in self.positions:
                self.positions[uuid] = Position(era, ts)
                fresh.append(uuid)
        if fresh:
            self.batches.append((forget_at, era, tuple(fresh)))
        return tuple(fresh)

    def lookup(self, uuid: bytes) -> Position | None:
        return self.positions.get(uuid)

    def all_known(self, uuids: Sequence[bytes]) -> bool:
        """Every uuid of a batch was handed over: the retry is answered, not stored (M8)."""
        return bool(uuids) and all(u in self.positions for u in uuids)

    def forget(self, now: float) -> int:
        """Drop every handover whose deadline has passed; returns how many uuids went."""
        keep, gone = [], 0
        for batch in self.batches:
            if batch[0] <= now:
                for u in batch[2]:
                    del self.positions[u]
                gone += len(batch[2])
            else:
                keep.append(batch)
        self.batches = keep
        return gone
