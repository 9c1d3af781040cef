"""Which slots to move so that every group owns an even share (`tritonmq rebalance`).

Pure: the slot map as it is, the groups that should own slots, and out comes the
fewest moves that leave each of those groups with ``slots // groups`` or one more
(a group left out, being drained before it is removed, gives every slot away).
Deterministic, so a dry run shows exactly what ``--execute`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tritonmq.core.slothistory import SlotHistory, SlotState


@dataclass(frozen=True, slots=True)
class PlannedMove:
    slot: int
    source: str
    to: str


def even_plan(slots: Sequence[SlotHistory], groups: Sequence[str]) -> list[PlannedMove]:
    """Moves that spread ``slots`` evenly over ``groups``. A slot already moving counts
    for its target and is not planned again; the groups that own most already get the
    larger shares (fewer moves), and a group gives away its highest-numbered slots."""
    if not groups:
        raise ValueError("rebalancing needs at least one group")
    moving = [h.state is not SlotState.NORMAL and h.move is not None for h in slots]
    where = [h.move.to if m and h.move else h.owner for h, m in zip(slots, moving, strict=True)]
    count = {g: sum(1 for w in where if w == g) for g in groups}
    base, extra = divmod(len(slots), len(groups))
    order = sorted(groups, key=lambda g: (-count[g], g))
    quota = {g: base + (1 if i < extra else 0) for i, g in enumerate(order)}
    give: list[int] = []
    kept: dict[str, int] = {}
    for g in groups:
        fixed = sum(1 for n, w in enumerate(where) if w == g and moving[n])
        mine = [n for n, w in enumerate(where) if w == g and not moving[n]]
        room = max(0, quota[g] - fixed)
        give += mine[room:]
        kept[g] = fixed + min(room, len(mine))
    give += [n for n, w in enumerate(where) if w not in quota and not moving[n]]  # drained
    takers = [g for g in sorted(groups) for _ in range(quota[g] - kept[g])]
    return [PlannedMove(n, slots[n].owner, to) for n, to in zip(sorted(give), takers, strict=False)]
