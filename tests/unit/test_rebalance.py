"""The even spread `tritonmq rebalance` plans: fewest moves, deterministic, drains a group
left out, leaves slots already moving alone."""

from __future__ import annotations

from collections import Counter

import pytest

from tritonmq.core.rebalance import PlannedMove, even_plan
from tritonmq.core.slothistory import SlotHistory, begin_move
from tritonmq.core.slots import SlotMap


def owners(*gs: str) -> list[SlotHistory]:
    return [SlotHistory(g) for g in gs]


def after(slots: list[SlotHistory], plan: list[PlannedMove]) -> Counter[str]:
    where = [h.move.to if h.move else h.owner for h in slots]
    for m in plan:
        assert where[m.slot] == m.source
        where[m.slot] = m.to
    return Counter(where)


def test_a_third_group_gets_its_share_from_the_two_others_with_the_fewest_moves() -> None:
    slots = owners(*SlotMap.spread(["g1", "g2"], 64).owners)
    plan = even_plan(slots, ["g1", "g2", "g3"])
    assert after(slots, plan) == {"g1": 22, "g2": 21, "g3": 21}
    assert len(plan) == 21 and {m.to for m in plan} == {"g3"}
    assert plan == even_plan(slots, ["g3", "g2", "g1"]), "the same plan whatever the order"


def test_an_even_map_needs_no_move() -> None:
    slots = owners(*SlotMap.spread(["g1", "g2", "g3"], 64).owners)
    assert even_plan(slots, ["g1", "g2", "g3"]) == []


def test_a_group_left_out_gives_every_slot_away() -> None:
    slots = owners("g1", "g2", "g3", "g3", "g1", "g2")
    plan = even_plan(slots, ["g1", "g2"])
    assert after(slots, plan) == {"g1": 3, "g2": 3}
    assert sorted(m.slot for m in plan) == [2, 3] and {m.source for m in plan} == {"g3"}


def test_a_slot_already_moving_counts_for_its_target_and_is_not_planned_again() -> None:
    slots = owners("g1", "g1", "g1", "g1")
    slots[3] = begin_move(slots[3], "g2")
    plan = even_plan(slots, ["g1", "g2"])
    assert plan == [PlannedMove(2, "g1", "g2")]


def test_no_group_is_refused() -> None:
    with pytest.raises(ValueError):
        even_plan(owners("g1"), [])


def test_by_rate_the_hot_slots_are_split_between_the_groups() -> None:
    from tritonmq.core.rebalance import rate_plan

    slots = owners("g1", "g1", "g1", "g1", "g2", "g2")
    rates = {0: 900.0, 1: 800.0, 2: 100.0, 3: 50.0, 4: 10.0, 5: 0.0}
    plan = rate_plan(slots, ["g1", "g2"], rates)
    load = {"g1": 0.0, "g2": 0.0}
    where = {n: h.owner for n, h in enumerate(slots)}
    for m in plan:
        where[m.slot] = m.to
    for n, g in where.items():
        load[g] += rates[n]
    assert abs(load["g1"] - load["g2"]) < 200, (plan, load)
    assert all(m.source == "g1" and m.to == "g2" for m in plan)
    assert plan == rate_plan(slots, ["g2", "g1"], rates)


def test_by_rate_a_group_left_out_is_drained_and_idle_slots_stay_where_they_are() -> None:
    from tritonmq.core.rebalance import rate_plan

    slots = owners("g1", "g2", "g3", "g3")
    plan = rate_plan(slots, ["g1", "g2"], {0: 10.0, 1: 10.0, 2: 30.0})
    assert {m.slot for m in plan if m.source == "g3"} == {2, 3}
    assert {m.to for m in plan} <= {"g1", "g2"}
    assert rate_plan(owners("g1", "g1"), ["g1", "g2"], {}) == []
