"""Which slots to move so that every group owns an even share (`tritonmq rebalance`).

Pure: the slot map as it is, the groups that should own slots, and out comes the
fewest moves that leave each of those groups with ``slots // groups`` or one more
(a group left out, being drained before it is removed, gives every slot away).
Deterministic, so a dry run shows exactly what ``--execute`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def rate_plan(
    slots: Sequence[SlotHistory], groups: Sequence[str], rates: Mapping[int, float]
) -> list[PlannedMove]:
    """Moves that even out the groups' summed publish rate (``rates``: slot -> records/s,
    as measured). A group left out gives every slot away (busiest first, each to the
    group least busy then); then, while the busiest group's rate exceeds the least busy
    one's by more than some slot of it carries, its slot nearest half that difference
    moves there (each such move narrows the gap). Slots that carry nothing stay; a slot
    already moving counts for its target and is not planned again."""
    if not groups:
        raise ValueError("rebalancing needs at least one group")
    moving = [h.state is not SlotState.NORMAL and h.move is not None for h in slots]
    where = [h.move.to if m and h.move else h.owner for h, m in zip(slots, moving, strict=True)]
    load = {g: 0.0 for g in sorted(groups)}
    for n, g in enumerate(where):
        if g in load:
            load[g] += rates.get(n, 0.0)
    plan: list[PlannedMove] = []

    def move(n: int, to: str) -> None:
        plan.append(PlannedMove(n, slots[n].owner, to))
        if where[n] in load:
            load[where[n]] -= rates.get(n, 0.0)
        load[to] += rates.get(n, 0.0)
        where[n] = to

    drained = [n for n, g in enumerate(where) if g not in load and not moving[n]]
    for n in sorted(drained, key=lambda n: (-rates.get(n, 0.0), n)):
        move(n, min(load, key=lambda g: (load[g], g)))
    planned = {m.slot for m in plan}
    for _ in range(len(slots)):
        hi = max(load, key=lambda g: (load[g], g))
        lo = min(load, key=lambda g: (load[g], g))
        gap = load[hi] - load[lo]
        fits = [
            n
            for n, g in enumerate(where)
            if g == hi and not moving[n] and n not in planned and 0 < rates.get(n, 0.0) < gap
        ]
        if not fits:
            break
        n = min(fits, key=lambda n: (abs(rates.get(n, 0.0) - gap / 2), n))
        move(n, lo)
        planned.add(n)
    return plan
