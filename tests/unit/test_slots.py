"""Topics to slots to groups."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonmq.core.slots import SlotMap, slot_of


@given(st.text(min_size=1, max_size=50), st.integers(1, 256))
def test_a_topic_always_lands_in_the_same_slot(topic: str, slots: int) -> None:
    assert slot_of(topic, slots) == zlib.crc32(topic.encode()) % slots
    assert 0 <= slot_of(topic, slots) < slots


def test_spread_deals_slots_evenly_and_everyone_agrees() -> None:
    a = SlotMap.spread(["g2", "g1", "g3"], 64)
    b = SlotMap.spread(["g3", "g1", "g2"], 64)
    assert a == b and a.slots == 64 and a.groups == ["g1", "g2", "g3"]
    counts = [a.owners.count(g) for g in a.groups]
    assert max(counts) - min(counts) <= 1


def test_moving_a_slot_moves_only_its_topics() -> None:
    before = SlotMap.spread(["g1", "g2"], 8)
    owners = list(before.owners)
    owners[3] = "g2" if owners[3] == "g1" else "g1"
    after = SlotMap(tuple(owners), before.version + 1)
    for topic in (f"t{i}" for i in range(200)):
        moved = before.group_of(topic) != after.group_of(topic)
        assert moved == (slot_of(topic, 8) == 3)


def test_round_trip_and_bad_maps() -> None:
    m = SlotMap.spread(["g1"], 4)
    assert SlotMap.from_dict(m.as_dict()) == m
    for bad in ({}, {"owners": []}, {"owners": [1, 2]}):
        with pytest.raises(ValueError):
            SlotMap.from_dict(bad)
    with pytest.raises(ValueError):
        SlotMap.spread([], 4)
