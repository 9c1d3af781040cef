"""The dedup state a moving slot hands over (replication.md M2.3, M8)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonmq.core.handover import (
    HANDOVER_TOPIC,
    Forwarded,
    HandedOver,
    LogTable,
    decode_entry,
    encode_entry,
    handover_page_uuid,
    handover_pairs,
    handover_uuid,
    select_slot,
    table_of,
)
from tritonmq.core.log import UNKNOWN_SLOT, GroupLog
from tritonmq.core.moves import SlotMoves
from tritonmq.core.replication import DedupFeed
from tritonmq.core.slotguard import Verdict, write_verdict
from tritonmq.core.slothistory import Position, SlotHistory, begin_move, complete, seal
from tritonmq.core.slots import slot_of

SLOTS = 64
A, B = slot_of("a", SLOTS), slot_of("b", SLOTS)  # 3 and 57


def uid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def old_group_log() -> GroupLog:
    """Topic ``a`` is in the moving slot, ``b`` in another; ts 1..8 alternate a, b."""
    log = GroupLog()
    log.slots = SLOTS
    for n in range(1, 9):
        log.append_new("a" if n % 2 else "b", uid(n), None, b"v", None)
    log.purge("a", 3)  # a's ts 1 and 3 are purged, their uuids still deduplicate
    log.purge("b", 2)
    return log


def test_the_old_group_hands_over_only_the_slots_records_up_to_the_seal_retained_or_purged() -> (
    None
):
    log = old_group_log()
    pairs = handover_pairs(log, A, SLOTS, until=6)
    # a's retained 5 (7 is past the seal), a's purged 1 and 3; none of b's, purged or not
    assert pairs == ((1, uid(1)), (3, uid(3)), (5, uid(5)))
    assert handover_pairs(log, B, SLOTS, until=6) == ((2, uid(2)), (4, uid(4)), (6, uid(6)))
    log.forget_uuids_upto(1)  # past the dedup window: no retry can name it any more
    assert (1, uid(1)) not in handover_pairs(log, A, SLOTS, until=6)


def test_a_backup_that_learned_purged_uuids_from_its_primary_hands_over_only_the_slots() -> None:
    """A backup synced after the purge holds the uuids only (no records): once primary, a
    move of slot A must still hand over A's, and only A's."""
    primary = old_group_log()
    backup = GroupLog(primary.base_ts)
    backup.adopt_dedup(DedupFeed(primary, 0).page(1_000))  # the leader answer's
    assert handover_pairs(backup, A, SLOTS, until=6) == ((1, uid(1)), (3, uid(3)))
    assert handover_pairs(backup, B, SLOTS, until=6) == ((2, uid(2)),)


def test_uuids_purged_before_the_slot_count_was_known_go_with_every_slots_handover() -> None:
    log = GroupLog()  # a primary that purged before it had read the slot map
    log.append_new("b", uid(1), None, b"v", None)
    log.purge("b", 1)
    log.slots = SLOTS
    log.append_new("b", uid(2), None, b"v", None)
    log.purge("b", 2)
    assert handover_pairs(log, A, SLOTS, until=2) == ((1, uid(1)),)
    assert handover_pairs(log, B, SLOTS, until=2) == ((1, uid(1)), (2, uid(2)))
    log.forget_uuids_upto(2)
    assert handover_pairs(log, B, SLOTS, until=2) == () and log.purged_count == 0


def test_a_retry_straddling_the_seal_reaching_the_new_group_is_answered_not_stored() -> None:
    h = complete(seal(begin_move(SlotHistory("g1"), "g2"), "g1", 6), "g2")
    handed = HandedOver()
    assert handed.adopt(0, handover_pairs(old_group_log(), A, SLOTS, 6), 60.0)
    retry = [uid(3), uid(5)]  # accepted by g1 before the seal, answer lost
    assert handed.all_known(retry)
    assert write_verdict(h, "g2", already_stored=handed.all_known(retry)).verdict is Verdict.DEDUP
    assert [handed.lookup(u) for u in retry] == [Position(0, 3), Position(0, 5)]
    fresh = [uid(5), uid(99)]  # one record is new: the batch is not a pure retry
    assert not handed.all_known(fresh) and not handed.all_known([])
    assert write_verdict(h, "g2", already_stored=False).verdict is Verdict.ACCEPT
    assert handed.lookup(uid(7)) is None  # above the seal: g1 never stored it in era 0


def test_adopting_the_same_handover_twice_changes_nothing() -> None:
    pairs = ((1, uid(1)), (5, uid(5)))
    handed = HandedOver()
    assert handed.adopt(0, pairs, 60.0) == (uid(1), uid(5))
    assert handed.adopt(0, pairs, 90.0) == ()  # a new primary repeating the handover
    assert handed.adopt(2, ((9, uid(5)),), 90.0) == ()  # a uuid keeps its first position
    assert handed.lookup(uid(5)) == Position(0, 5) and len(handed.batches) == 1


def test_a_handover_is_forgotten_at_its_deadline_not_before() -> None:
    handed = HandedOver()
    handed.adopt(0, ((1, uid(1)),), 60.0)
    handed.adopt(2, ((4, uid(4)),), 120.0)
    assert handed.forget(59.9) == 0 and handed.lookup(uid(1)) == Position(0, 1)
    assert handed.forget(60.0) == 1 and handed.lookup(uid(1)) is None
    assert handed.lookup(uid(4)) == Position(2, 4)
    assert handed.forget(500.0) == 1 and handed.batches == []


def test_a_handover_entry_round_trips_and_is_read_back_as_the_table() -> None:
    pairs = ((3, b"u" * 16), (9, b"x"), (2**40, b"y" * 64))
    value = encode_entry(5, 2, pairs)
    assert decode_entry(value) == (5, 2, {u: ts for ts, u in pairs})
    earlier = b"TMQH1" + msgpack.packb((5, 2, pairs))  # as a broker before TMQH2 wrote it
    assert decode_entry(earlier) == decode_entry(value)
    log = GroupLog()
    log.append_new(HANDOVER_TOPIC, handover_uuid(5, 2, 7), None, value, None)
    table = table_of(log)
    assert table.lookup(b"x") == Position(2, 9) and table.lookup(b"z") is None
    # no client uuid (1..64 bytes) can be an entry's, and each (slot, era) has its own
    assert len(handover_uuid(5, 2, 7)) > 64 and handover_uuid(5, 2, 7) != handover_uuid(5, 3, 7)


def test_a_value_that_is_not_a_handover_entry_is_refused() -> None:
    import pytest

    from tritonmq.core.handover import decode_entry, encode_entry
    from tritonmq.errors import SlotHistoryError

    with pytest.raises(SlotHistoryError):
        decode_entry(b"hello")
    with pytest.raises(SlotHistoryError):
        decode_entry(encode_entry(1, 0, ((1, b"abc"),))[:-1])


def test_a_uuid_handed_over_for_two_slots_keeps_a_position_per_slot_and_is_forgotten_per_handover() -> (
    None
):
    handed = HandedOver()
    handed.adopt(1, ((8, uid(8)),), 60.0, slot=1)  # carried by slot 1's handover (era 1)
    assert handed.lookup(uid(8), 16) is None and not handed.all_known([uid(8)], 16)
    handed.adopt(0, ((8, uid(8)),), 90.0, slot=16)  # slot 16's own (era 0)
    assert handed.lookup(uid(8), 16) == Position(0, 8) and handed.lookup(uid(8), 1) == Position(
        1, 8
    )
    assert handed.forget(60.0) == 1 and handed.lookup(uid(8), 1) is None
    assert handed.lookup(uid(8), 16) == Position(0, 8)
    assert handed.forget(90.0) == 1 and handed.batches == []


def whole_selection(log: GroupLog, slot: int, until: int) -> tuple[tuple[int, bytes], ...]:
    """What the old group handed over before pages were cut from runs: every pair built
    and sorted at once (0.39 s of its event loop for 2,000,000)."""
    retained = [
        (rec[0], rec[1])
        for name, t in log.topics.items()
        if slot_of(name, SLOTS) == slot
        for rec in t.records
        if rec[0] <= until
    ]
    held = [*log.purged_by_slot.get(slot, ()), *log.purged_by_slot.get(UNKNOWN_SLOT, ())]
    return tuple(sorted(retained + [p for p in held if p[0] <= until]))


def paged(log: GroupLog, slot: int, until: int, size: int) -> list[tuple[int, bytes]]:
    sel = select_slot(log, slot, SLOTS, until)
    got: list[tuple[int, bytes]] = []
    after, more = 0, True
    while more:
        page, more = sel.page(after, size)
        assert len(page) <= size and (page or not more)
        assert all(ts > after for ts, _ in page), "a page goes back"
        got.extend(page)
        after = page[-1][0] if page else after
    return got


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "x", "t20", "b"]), min_size=1, max_size=40),
    st.lists(
        st.tuples(st.sampled_from(["a", "x", "t20", "b", "forget"]), st.integers(0, 45)),
        max_size=10,
    ),
    st.integers(0, 45),
    st.integers(1, 7),
)
def test_pages_cut_from_runs_hand_over_what_the_whole_selection_did(
    topics: list[str], purges: list[tuple[str, int]], until: int, size: int
) -> None:
    """Topics a, x and t20 share slot A (b does not); purges in any order leave a slot's
    purged uuids out of ts order across its topics, and the dedup window forgets from
    the left. Page after page, whatever the page size, the old group hands over exactly
    the pairs the whole selection held, in order; and so does a backup that learned the
    purged uuids from it a page at a time (in its order, out of ts order)."""
    assert slot_of("x", SLOTS) == slot_of("t20", SLOTS) == A
    log = GroupLog()
    log.slots = SLOTS
    for n, topic in enumerate(topics, start=1):
        log.append_new(topic, uid(n), None, b"v", None)
    for topic, upto in purges:
        if topic == "forget":
            log.forget_uuids_upto(upto)
        else:
            log.purge(topic, upto)
    assert paged(log, A, until, size) == list(whole_selection(log, A, until))
    assert handover_pairs(log, A, SLOTS, until) == whole_selection(log, A, until)
    backup, feed = GroupLog(log.base_ts), DedupFeed(log, 0)
    while not feed.done:
        backup.adopt_dedup(feed.page(size))
    purged = sorted(p for p in log.purged_by_slot.get(A, ()) if p[0] <= until)
    assert paged(backup, A, until, size) == purged


def test_a_purge_between_pages_hands_over_the_selection_taken_at_the_first() -> None:
    log = old_group_log()  # a: ts 1, 3 purged, 5 and 7 retained
    sel = select_slot(log, A, SLOTS, until=7)
    first, more = sel.page(0, 2)
    assert first == ((1, uid(1)), (3, uid(3))) and more
    log.purge("a", 7)  # 5 and 7 leave the topic for the purged uuids
    log.forget_uuids_upto(5)  # and the dedup window passes 1, 3 and 5
    assert sel.page(3, 2) == (((5, uid(5)), (7, uid(7))), False)


def test_the_table_reads_a_later_pages_entries_on_top_of_what_it_holds() -> None:
    """A new page's entry is decoded alone: read again whole after each page, a hot slot's
    twenty pages cost the replicas twenty times the decoding."""
    log = GroupLog()
    page1, page2 = ((1, b"a"), (2, b"b")), ((3, b"c"),)
    log.append_new(
        HANDOVER_TOPIC, handover_page_uuid(5, 2, 3, 0, 2), None, encode_entry(5, 2, page1), None
    )
    kept = LogTable()
    table = kept.follow(log)
    log.append_new(HANDOVER_TOPIC, handover_uuid(5, 2, 3), None, encode_entry(5, 2, page2), None)
    grown = kept.follow(log)
    assert grown is table and len(table.batches) == 1, "a later page joins its first page"
    assert [table.lookup(u, 5) for u in (b"a", b"c")] == [Position(2, 1), Position(2, 3)]
    assert len(handover_page_uuid(5, 2, 3, 0, 2)) > 64
    assert handover_page_uuid(5, 2, 3, 0, 2) not in (
        handover_uuid(5, 2, 3),
        handover_page_uuid(5, 2, 3, 0, 1),
    )


def test_the_handed_over_table_follows_its_entries_a_page_at_a_time() -> None:
    """Pages arrive and leave (at the forget point) one by one: read whole each time, a
    hot slot's handover would cost the primary's loop a full rebuild per page."""
    moves, log = SlotMoves("g2", None), GroupLog()
    entries = (
        (handover_page_uuid(0, 0, 4, 0, 2), 0, ((1, b"u1"), (2, b"u2"))),
        (handover_uuid(0, 0, 4), 0, ((4, b"u4"),)),
        (handover_uuid(1, 0, 4), 1, ((3, b"o3"),)),  # another slot's handover
    )
    for uuid, slot, page in entries:
        log.append_new(HANDOVER_TOPIC, uuid, None, encode_entry(slot, 0, page), None)
        table = moves.handed(log)
    assert [table.lookup(u, 0) for u in (b"u1", b"u4")] == [Position(0, 1), Position(0, 4)]
    log.purge(HANDOVER_TOPIC, 1)  # slot 0's first page left
    assert moves.handed(log) is table and table.lookup(b"u1", 0) == Position(0, 1)
    log.purge(HANDOVER_TOPIC, 2)  # and its last
    assert moves.handed(log).lookup(b"u4", 0) is None, "none of its entries is left"
    assert moves.handed(log).lookup(b"o3", 1) == Position(0, 3)


def test_the_handed_over_table_drops_entries_a_truncation_took_and_reads_those_written_again() -> (
    None
):
    """A backup truncates (a new primary's `leader`) before it reads its table again: the
    entry it held above the cut was never committed, and the new primary writes another
    at the same ts. Read from the old last ts on, the table kept the one that went and
    missed the one that came (a retry of its uuid would be stored again once elected)."""
    moves, log = SlotMoves("g2", None), GroupLog()
    first = (handover_page_uuid(0, 0, 9, 0, 1), ((1, b"u1"),))
    gone = (handover_page_uuid(0, 0, 9, 1, 2), ((2, b"u2"),))
    for uuid, page in (first, gone):
        log.append_new(HANDOVER_TOPIC, uuid, None, encode_entry(0, 0, page), None)
    assert moves.handed(log).lookup(b"u2", 0) == Position(0, 2)
    assert log.truncate_after(1) == 1
    again = (handover_page_uuid(0, 0, 9, 1, 3), ((2, b"v2"), (3, b"v3")))
    last = (handover_uuid(0, 0, 9), ((4, b"v4"),))
    for uuid, page in (again, last):
        log.append_new(HANDOVER_TOPIC, uuid, None, encode_entry(0, 0, page), None)
    table = moves.handed(log)
    assert [table.lookup(u, 0) for u in (b"u1", b"v2", b"v3", b"v4")] == [
        Position(0, 1),
        Position(0, 2),
        Position(0, 3),
        Position(0, 4),
    ]
    assert table.lookup(b"u2", 0) is None, "its entry was truncated"


def test_a_truncation_takes_back_the_entries_it_took_and_reads_no_other_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failover that cuts a new group's uncommitted handover page: the replica reads
    again only the page written in its place. Read again whole, a hot slot's 2,000,000
    uuids held its event loop over a second (M2.3)."""
    import tritonmq.core.handover as handover

    moves, log = SlotMoves("g2", None), GroupLog()
    pages = [((1, b"u1"), (2, b"u2")), ((3, b"u3"),), ((4, b"u4"),)]
    for n, page in enumerate(pages):
        uuid = handover_page_uuid(0, 0, 9, n, n + 1)
        log.append_new(HANDOVER_TOPIC, uuid, None, encode_entry(0, 0, page), None)
    assert moves.handed(log).lookup(b"u4", 0) == Position(0, 4)
    decoded: list[bytes] = []
    real = handover.decode_entry
    monkeypatch.setattr(handover, "decode_entry", lambda v: decoded.append(v) or real(v))
    assert log.truncate_after(1) == 2  # the entries at ts 2 and 3 were never committed
    again = encode_entry(0, 0, ((3, b"v3"),))
    log.append_new(HANDOVER_TOPIC, handover_uuid(0, 0, 9), None, again, None)
    table = moves.handed(log)
    assert len(decoded) == 1, "only the entry written after the truncation is read"
    assert [table.lookup(u, 0) for u in (b"u1", b"u2", b"v3")] == [
        Position(0, 1),
        Position(0, 2),
        Position(0, 3),
    ]
    assert table.lookup(b"u3", 0) is None and table.lookup(b"u4", 0) is None


# an entry: (slot, era, its uuids), drawn from a few so that pages repeat some; an era
# gives a uuid one ts
ENTRIES = st.tuples(
    st.sampled_from([0, 1]), st.sampled_from([0, 2]), st.lists(st.integers(0, 11), max_size=4)
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.one_of(ENTRIES, st.integers(0, 12), st.just("record")), max_size=16),
    st.lists(st.booleans(), min_size=16, max_size=16),
)
def test_the_table_kept_in_step_holds_what_one_read_whole_from_the_log_does(
    steps: list[tuple[int, int, list[int]] | int | str], reads: list[bool]
) -> None:
    """Entries written, a client's records between them, and truncations (an int: the ts
    to truncate after), in any order, read now and then: every lookup of the table kept
    in step is the one a table read whole from the same log gives. (A truncation followed
    by a record and a new entry above the one it took: read then, the table took the
    entry taken for one purged, and kept its uuids; found in review.)"""
    moves, log = SlotMoves("g2", None), GroupLog()
    for n, step in enumerate(steps):
        if isinstance(step, int):
            log.truncate_after(step)
        elif isinstance(step, str):
            log.append_new("t", uid(100 + n), None, b"v", None)
        else:
            slot, era, uuids = step
            pairs = [(3 * u + era + 1, uid(u)) for u in uuids]
            uuid = handover_page_uuid(slot, era, 99, n, n)
            log.append_new(HANDOVER_TOPIC, uuid, None, encode_entry(slot, era, pairs), None)
        if not reads[n]:
            continue
        kept, whole = moves.handed(log), table_of(log)
        for u in (uid(n) for n in range(12)):
            for slot in (0, 1, None):
                assert kept.lookup(u, slot) == whole.lookup(u, slot)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from([0, 1, 2, 4]), st.sampled_from([3, 5])),
        st.lists(st.integers(1, 40), unique=True, max_size=9),
        max_size=5,
    ),
    st.integers(1, 5),
)
def test_forwarded_pages_hand_over_every_earlier_eras_uuid_once_in_order(
    eras: dict[tuple[int, int], list[int]], size: int
) -> None:
    """Earlier eras (0, 1, 2) of slot 3 and 5, their pages adopted in any ts order (a
    page answered afresh joins the end of its era's map): paged after the last cursor,
    whatever the page size, they are every uuid of the slot's eras before 4, each once,
    ascending by (era, ts), and ``whole`` is the same."""
    table = HandedOver()
    for (era, slot), ts in eras.items():
        table.adopt(era, [(t, uid(100 * era + t)) for t in ts], 60.0, slot)
    fwd = Forwarded.of(table, 3, before=4)
    want = sorted(
        (era, t, uid(100 * era + t))
        for (era, slot), ts in eras.items()
        if slot == 3 and era < 4
        for t in ts
    )
    got: list[tuple[int, int, bytes]] = []
    after, more = (0, 0), True
    while more:
        page, more = fwd.page(after, size)
        assert sum(len(p) for _, p in page) <= size and (page or not more)
        for era, pairs in page:
            got.extend((era, t, u) for t, u in pairs)
            after = (era, pairs[-1][0])
    assert got == want
    assert [(e, t, u) for e, ps in fwd.whole() for t, u in ps] == want
    assert Forwarded.of(table, 3, before=1).whole() == tuple(
        (e, ps) for e, ps in fwd.whole() if e == 0
    )


def test_an_entry_truncated_below_the_first_entry_written_again_is_taken_back() -> None:
    """Found in review: the group's first handover page, uncommitted, is cut at a new
    primary's `leader` (the backup reads its table only on `append`); the new primary
    writes a record, then the page again. Below the first entry left, the cut one was taken
    for one purged at the forget point, and its uuids kept while the page's era had an
    entry: a table the other replicas, which never held it, lack."""
    moves, log = SlotMoves("g2", None), GroupLog()
    page = encode_entry(0, 0, ((1, b"u1"),))
    log.append_new(HANDOVER_TOPIC, handover_page_uuid(0, 0, 9, 0, 1), None, page, None)
    assert moves.handed(log).lookup(b"u1", 0) == Position(0, 1)
    log.truncate_after(0)
    log.append_new("t", b"r1", None, b"v", None)  # ts 1 again, a client's record
    again = encode_entry(0, 0, ((2, b"u2"),))
    log.append_new(HANDOVER_TOPIC, handover_page_uuid(0, 0, 9, 0, 2), None, again, None)
    table = moves.handed(log)
    assert table.lookup(b"u2", 0) == Position(0, 2)
    assert table.lookup(b"u1", 0) is None, "its entry was truncated"
