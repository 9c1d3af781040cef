"""A primary's decisions on a slot's writes and reads, from its history (replication.md M2, M4, M8)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tritonmq.core.handover import HandedOver, handover_pairs
from tritonmq.core.log import GroupLog
from tritonmq.core.slotguard import SlotDecision, Verdict, read_verdict, write_verdict
from tritonmq.core.slothistory import (
    Position,
    SlotHistory,
    SlotState,
    begin_move,
    complete,
    roll_back,
    seal,
    segments_from,
)
from tritonmq.core.slots import slot_of

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


# --- the decisions composed: a producer across moves back and forth (M2, M8) ------------


STRADDLE = [("send", True), ("begin", False), ("seal", False), ("complete", False)]


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["send", "refresh", "begin", "seal", "complete", "roll_back", "other"]),
            st.booleans(),
        ),
        max_size=120,
    )
)
@example(steps=[*STRADDLE, ("refresh", False), ("send", False)])  # the retry reaches g2
@example(steps=[*STRADDLE, ("send", False)])  # it reaches g1, sealed
@example(steps=[*STRADDLE, ("refresh", False), *STRADDLE[1:], ("send", False)])  # moved back
def test_a_producer_across_moves_has_each_acknowledged_record_stored_once_in_order(
    steps: list[tuple[str, bool]],
) -> None:
    """One producer sends records one at a time to the group its (possibly stale) view
    names, resending the same uuid when an answer is lost or refused; the slot moves
    between g1 and g2 (and back, or rolls back) with the dedup handover before `complete`.
    Reading the slot from its start gives the acknowledged records once, in the producer's
    order (the last one may be stored with its answer lost)."""
    logs = {"g1": GroupLog(), "g2": GroupLog()}
    handed = {"g1": HandedOver(), "g2": HandedOver()}
    h = SlotHistory("g1")
    view = "g1"  # where the producer sends: the owner as it last read the map
    n, acked = 0, []  # record n is in flight (uuid n+1)
    for kind, flag in steps:
        g = h.owner
        if kind == "send":
            u = (n + 1).to_bytes(16, "big")
            log = logs[view]
            stored = log.lookup(u) is not None or handed[view].all_known([u])
            d = write_verdict(h, view, already_stored=stored)
            if d.verdict is Verdict.ACCEPT:
                log.append_new("t", u, None, b"", None)
            if d.verdict in (Verdict.ACCEPT, Verdict.DEDUP) and not flag:  # flag: answer lost
                acked.append(u)
                n += 1
            elif d.verdict is Verdict.WRONG_GROUP and d.group is not None:
                view = d.group
        elif kind == "refresh":
            view = h.owner
        elif kind == "other":
            logs["g2" if flag else "g1"].append_new("o", b"o%d" % len(logs["g1"]), None, b"", None)
        elif kind == "begin" and h.state is SlotState.NORMAL:
            h = begin_move(h, "g2" if g == "g1" else "g1")
        elif kind == "seal" and h.state is SlotState.MOVING:
            h = seal(h, g, logs[g].last_ts)  # every write the owner accepted is below it
        elif kind == "complete" and h.state is SlotState.SEALED and h.move is not None:
            until, to = h.move.until, h.move.to
            assert until is not None
            handed[to].adopt(h.era, handover_pairs(logs[g], slot_of("t", 64), 64, until), 1e9)
            h = complete(h, to)
        elif kind == "roll_back" and h.state is not SlotState.NORMAL:
            h = roll_back(h)
    read = [
        rec[1]
        for seg in segments_from(h, Position(0, 0))
        for rec in (logs[seg.group].topics["t"].records if "t" in logs[seg.group].topics else [])
        if seg.holds(rec[0])
    ]
    in_flight = (n + 1).to_bytes(16, "big")
    assert read in (acked, [*acked, in_flight])
