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


def _shared_pair() -> History:
    """Two members of g0.t's shared subscription, both at g0b0, the primary; m1 has
    received g0p0:17 (ts 37) and both lose their connection at 3.92."""
    h = History(min_insync=2)
    h.shared_grace = 1.0
    for m in ("m1", "m2"):
        h.subscriber(m, "g0.t", "shared", "shared")
    h.primary_elected("g0", "g0b0", 0.0)
    h.app_back("m1", 0.1, "g0b0", "g0")
    h.app_back("m2", 0.1, "g0b0", "g0")
    h.app_received("m1", "g0", (37, b"u37", None, b"g0p0:17", None), 3.85)
    h.app_away("m1", 3.92)
    h.app_away("m2", 3.92)
    h.primary_elected("g0", "g0b1", 4.25)
    return h


def test_a_shared_member_back_at_a_deposed_primary_is_still_away_from_the_group() -> None:
    """Seed 70 of `--groups 2 --refusals --check-whole` (with readers on moved topics):
    m1 re-subscribed at g0b0, deposed by g0b1's election but not yet told, and the checker
    counted it back in the group; g0b1 handed what m1 held to m2 after the grace (m1 away
    from g0b1 since 3.92), which the checker reported as one record to two members."""
    h = _shared_pair()
    h.app_back("m1", 4.39, "g0b0", "g0")  # the deposed primary
    h.app_back("m2", 4.53, "g0b1", "g0")
    h.app_received("m2", "g0", (37, b"u37", None, b"g0p0:17", None), 5.35)
    assert h.violations == []
    # back at the group's primary within the grace, it is in the group: a violation
    h = _shared_pair()
    h.app_back("m1", 4.39, "g0b1", "g0")
    h.app_back("m2", 4.53, "g0b1", "g0")
    h.app_received("m2", "g0", (37, b"u37", None, b"g0p0:17", None), 5.35)
    assert h.violations == [
        "m2 received g0p0:17 (ts 37), which m1 of shared subscription shared had received"
    ]
