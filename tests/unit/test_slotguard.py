"""A primary's decisions on a slot's writes and reads, from its history (replication.md M2, M4, M8)."""

from __future__ import annotations

from tritonmq.core.slotguard import SlotDecision, Verdict, read_verdict, write_verdict
from tritonmq.core.slothistory import SlotHistory, begin_move, complete, roll_back, seal

NEVER_MOVED = SlotHistory("g1")
MOVING = begin_move(NEVER_MOVED, "g2")
SEALED = seal(MOVING, "g1", 100)
MOVED = complete(SEALED, "g2")  # era 0: g1 (0, 100]; era 1: g2 above 0
BACK = complete(seal(begin_move(MOVED, "g1"), "g2", 40), "g1")  # era 2: g1 above 100


def test_a_slot_that_never_moved_is_written_by_its_owner_only_as_today() -> None:
    assert write_verdict(NEVER_MOVED, "g1", already_stored=False).verdict is Verdict.ACCEPT
    assert write_verdict(NEVER_MOVED, "g2", already_stored=False) == SlotDecision(
        Verdict.WRONG_GROUP, "g1"
    )


def test_a_sealing_or_sealed_owner_sends_writes_to_the_new_group() -> None:
    for h in (MOVING, SEALED):
        assert write_verdict(h, "g1", already_stored=False) == SlotDecision(
            Verdict.WRONG_GROUP, "g2"
        )


def test_the_new_group_refuses_retriably_until_the_move_completes_then_accepts() -> None:
    for h in (MOVING, SEALED):
        assert write_verdict(h, "g2", already_stored=False).verdict is Verdict.MOVING_HERE
    d = write_verdict(MOVED, "g2", already_stored=False)
    assert (d.verdict, d.era, d.after) == (Verdict.ACCEPT, 1, 0)
    assert write_verdict(MOVED, "g1", already_stored=False) == SlotDecision(
        Verdict.WRONG_GROUP, "g2"
    )
    # a third group is never a writer during someone else's move
    assert write_verdict(SEALED, "g3", already_stored=False) == SlotDecision(
        Verdict.WRONG_GROUP, "g1"
    )


def test_a_retry_straddling_the_seal_is_answered_from_the_uuid_table_on_either_side() -> None:
    for h in (MOVING, SEALED, MOVED):
        for g in ("g1", "g2"):
            assert write_verdict(h, g, already_stored=True).verdict is Verdict.DEDUP


def test_a_rolled_back_move_gives_the_slot_back_to_its_owner_in_the_same_era() -> None:
    h = roll_back(SEALED)
    d = write_verdict(h, "g1", already_stored=False)
    assert (d.verdict, d.era) == (Verdict.ACCEPT, 0)
    assert write_verdict(h, "g2", already_stored=False).verdict is Verdict.WRONG_GROUP


def test_a_reader_of_the_old_era_gets_the_remainder_then_is_sent_on_to_the_new_group() -> None:
    d = read_verdict(MOVED, "g1", 0, delivered=57)
    assert (d.verdict, d.after, d.until) == (Verdict.SERVE, 0, 100)
    assert read_verdict(MOVED, "g1", 0, delivered=100) == SlotDecision(Verdict.ENDED, "g2", 1, 0)
    # at the new group, era 1 is open-ended
    d = read_verdict(MOVED, "g2", 1, delivered=0)
    assert (d.verdict, d.after, d.until) == (Verdict.SERVE, 0, None)


def test_a_reader_of_a_sealed_era_waits_at_the_old_group_until_the_move_completes() -> None:
    d = read_verdict(SEALED, "g1", 0, delivered=100)
    assert (d.verdict, d.until) == (Verdict.SERVE, 100)  # nothing more, but no next era yet
    assert read_verdict(MOVING, "g1", 0, delivered=10**6).verdict is Verdict.SERVE


def test_a_reader_at_the_wrong_group_or_an_unknown_era_is_told_where_or_refused() -> None:
    assert read_verdict(MOVED, "g2", 0, delivered=0) == SlotDecision(Verdict.WRONG_GROUP, "g1", 0)
    assert read_verdict(MOVED, "g1", 1, delivered=0) == SlotDecision(Verdict.WRONG_GROUP, "g2", 1)
    assert read_verdict(MOVED, "g2", 2, delivered=0).verdict is Verdict.NO_SUCH_ERA
    assert read_verdict(MOVED, "g2", -1, delivered=0).verdict is Verdict.NO_SUCH_ERA


def test_moving_back_reads_each_era_in_its_own_ts_range() -> None:
    # g1 holds eras 0 and 2 of the slot: era 2 starts above era 0's seal point
    assert read_verdict(BACK, "g1", 0, delivered=100) == SlotDecision(Verdict.ENDED, "g2", 1, 0)
    assert read_verdict(BACK, "g2", 1, delivered=40) == SlotDecision(Verdict.ENDED, "g1", 2, 100)
    d = read_verdict(BACK, "g1", 2, delivered=100)
    assert (d.verdict, d.after, d.until) == (Verdict.SERVE, 100, None)
