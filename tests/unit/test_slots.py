"""Topics to slots to groups."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonmq.core.slothistory import Era, Move, SlotHistory, SlotState
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


def test_a_map_carries_the_histories_of_moved_slots_and_era_0_for_the_rest() -> None:
    moved = SlotHistory("g2", 1, (Era("g1", 0, 0, 30),))
    sealed = SlotHistory("g1", 0, (), SlotState.SEALED, Move("g2", 12))
    histories = [SlotHistory("g1"), moved, sealed, SlotHistory("g2")]
    m = SlotMap.of_histories(histories, 7)
    assert m.owners == ("g1", "g2", "g1", "g2") and m.moved == ((1, moved), (2, sealed))
    assert SlotMap.from_dict(m.as_dict()) == m
    assert "moved" not in SlotMap(("g1", "g2")).as_dict(), "a map that never moved: as before"
    topic = next(t for t in (f"t{i}" for i in range(1000)) if slot_of(t, 4) == 1)
    assert m.history_of(topic) == moved
    other = next(t for t in (f"t{i}" for i in range(1000)) if slot_of(t, 4) == 3)
    assert m.history_of(other) == SlotHistory("g2")
    for bad in ({"9": moved.as_json()}, {"1": {"group": 3}}, ["x"]):
        with pytest.raises(ValueError, match="moved"):
            SlotMap.from_dict({**m.as_dict(), "moved": bad})
