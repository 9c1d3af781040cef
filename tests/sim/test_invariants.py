"""Invariants checked by the simulator, on hand-made histories."""

from __future__ import annotations

from tritonmq.sim.invariants import History


def test_a_replica_that_never_rejoined_the_isr_after_healing_is_a_violation() -> None:
    h = History(min_insync=2)
    h.check_group_whole("g0", ("g0b0", "g0b1", "g0b2"), ["g0b0", "g0b1", "g0b2"])
    assert h.violations == []
    h.check_group_whole("g0", ("g0b0", "g0b2"), ["g0b0", "g0b1", "g0b2"])
    assert h.violations == ["after healing, g0's ISR is ['g0b0', 'g0b2']: ['g0b1'] never re-joined"]


def _moved() -> History:
    """g0.m's slot: era 0 in g0 up to ts 10, era 1 in g1 since."""
    from tritonmq.core.slothistory import SlotHistory, begin_move, complete, seal

    h = History(min_insync=2)
    done = complete(seal(begin_move(SlotHistory("g0"), "g1"), "g0", 10), "g1")
    h.slot_history = lambda topic: done if topic == "g0.m" else None
    return h


def test_a_record_of_a_moved_slot_is_placed_by_the_era_its_puback_names() -> None:
    h = _moved()
    h.pub_acked("g0", "g0.m", "p", b"u1", 1, 9)
    h.pub_acked("g1", "g0.m", "p", b"u1", 1, 9, era=0)  # the handover's dedup answer
    h.pub_acked("g1", "g0.m", "p", b"u2", 2, 3)  # era 1, g1's ts 3: after (0, 9)
    assert h.violations == []
    assert h.acked == {"g0": {9: b"u1"}, "g1": {3: b"u2"}}


def test_an_era_named_after_the_slots_only_move_was_rolled_back_is_its_owners() -> None:
    """Seed 584 of `--groups 2 --moves 8 --faults 8 --refusals`: g1.m's first move (to g0)
    was rolled back just after g0 answered a retry from g1's handover with (era 0, ts 22);
    the checker, finding a slot that never moved, put ts 22 in g0 and reported it missing
    from g0's replicas. Era 0 of a slot that never moved is its owner's."""
    from tritonmq.core.slothistory import SlotHistory

    h = History(min_insync=2)
    h.slot_history = lambda topic: SlotHistory("g1") if topic == "g1.m" else None
    h.pub_acked("g0", "g1.m", "p", b"u1", 1, 22, era=0)
    h.pub_acked("g1", "g1.m", "p", b"u2", 2, 23)
    assert h.violations == []
    assert h.acked == {"g1": {22: b"u1", 23: b"u2"}}


def test_a_record_of_a_moved_slot_stored_twice_or_out_of_its_eras_is_a_violation() -> None:
    h = _moved()
    h.pub_acked("g0", "g0.m", "p", b"u1", 1, 9)
    h.pub_acked("g1", "g0.m", "p", b"u1", 1, 4)  # stored again by the new group
    assert h.violations == ["p:1 acknowledged twice, at g0 ts 9 and g1 ts 4"]
    h = _moved()
    h.pub_acked("g0", "g0.m", "p", b"u1", 1, 11)  # the old group wrote past its seal point
    assert h.violations and "outside the eras g0 held" in h.violations[0]
    h = _moved()
    h.pub_acked("g1", "g0.m", "p", b"u1", 1, 9, era=2)
    assert h.violations == [
        "g1 acknowledged g0.m ts 9 in era 2: era 2 does not exist (the slot is at era 1)"
    ]


def test_each_producers_order_is_kept_across_eras() -> None:
    h = _moved()
    h.pub_acked("g1", "g0.m", "p", b"u2", 2, 1)  # era 1, ts 1
    h.pub_acked("g0", "g0.m", "p", b"u1", 1, 5)  # era 0, ts 5: before it, in order
    assert h.violations == []
    h.pub_acked("g0", "g0.m", "p", b"u3", 3, 7)  # era 0 after an era-1 record
    assert h.violations == ["p's order broken: seq 2 at era 1 ts 1, seq 3 at ts 7"]
