"""Slot moves through BrokerCore, the handover (docs/replication.md M2.3, M8): the old group
answering a new group's ask a page at a time, what it carries (the slot's retained and purged
uuids, earlier eras forwarded), and who may ask."""

from __future__ import annotations

import dataclasses

from tests.unit.test_moves import (
    READS,
    T0,
    T1,
    carry,
    leading,
    member,
    moving,
    only,
    pair,
    pub,
    sealed_to_g2,
    view,
)
from tritonmq.config import BrokerConfig
from tritonmq.core.actions import (
    AskHandover,
    CloseLink,
    ProposeSlotStep,
    SendHandover,
    SendPubAck,
    SlotStep,
)
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import (
    CasOutcome,
    HandoverAnswered,
    HandoverAsked,
    SlotStepDone,
    Tick,
)
from tritonmq.core.handover import HANDOVER_TOPIC
from tritonmq.core.peerauth import handover_proof
from tritonmq.core.slothistory import (
    SlotHistory,
    begin_move,
    complete,
    seal,
)
from tritonmq.wire.frames import (
    ErrorCode,
    HandoverAsk,
    HandoverPairs,
)


def ask_frame(
    secret: bytes | None, nonce: bytes, until: int = 2, after: int | None = None
) -> HandoverAsk:
    proof = handover_proof(secret, nonce, "g2", "x", "boot-x", 0, until)
    return HandoverAsk("g2", "x", "boot-x", 0, until, proof, after)


def test_a_retry_straddling_two_moves_is_answered_at_the_third_group() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_retry_straddling_two_moves_is_answered_at_the_third_group`:
    a record stored in era 0 (g1) whose producer had no puback retried after the slot
    moved to g2 and then to g0; g2's handover carried only its own era's uuids, and g0
    stored the record again. g2 forwards what it was handed (era 0's) with its own."""
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    out = x.handle(
        HandoverAnswered(ask.request, HandoverPairs(0, 2, ((1, b"u1"), (2, b"u2"))), 0.3)
    )
    [step] = only([*out, *x.handle(Tick(0.4))], ProposeSlotStep)
    done = complete(sealed_to_g2()[0], "g2")
    x.handle(SlotStepDone(step.request, CasOutcome.OK, done, 0.5, next(READS)))
    view(x, (done, SlotHistory("g1")), 0.6)
    pub(x, 1, T0, "n1", now=0.7)  # era 1's own record
    x.handle(Tick(0.8))
    sealed = seal(begin_move(done, "g0"), "g2", x.log.last_ts)
    view(x, (sealed, SlotHistory("g1")), 0.9)
    asked = HandoverAsked("l", ask_frame(None, b"n", x.log.last_ts, 0), 1.0, b"n")
    [ans] = only(x.handle(asked), SendHandover)
    assert ans.pairs.earlier == ((0, ((1, b"u1"), (2, b"u2"))),)
    y = leading("y", "g0")
    [ask] = only(view(y, (sealed, SlotHistory("g1")), 1.1), AskHandover)
    out = y.handle(HandoverAnswered(ask.request, ans.pairs, 1.2))
    [step] = only([*out, *y.handle(Tick(1.3))], ProposeSlotStep)
    y.handle(SlotStepDone(step.request, CasOutcome.OK, complete(sealed, "g0"), 1.4, next(READS)))
    view(y, (complete(sealed, "g0"), SlotHistory("g1")), 1.5)
    [ack] = only(pub(y, 9, T0, "u1", "n1", now=1.6), SendPubAck)
    assert ack.eras == (0, 1) and ack.ts[0] == 1, "each stored once, where it was"
    assert not y.log.topics.get(T0), "nothing stored again"


def asked_by(ask: AskHandover, now: float) -> HandoverAsked:
    """The old group's event for ``ask``, as the shell frames it."""
    frame = dataclasses.replace(ask_frame(None, b"n", ask.until, ask.after), earlier=ask.earlier)
    return HandoverAsked("l", frame, now, b"n")


def test_earlier_eras_uuids_are_forwarded_a_page_at_a_time_after_the_slots_own() -> None:
    """A hot slot moved twice within a dedup window: the group between forwards era 0's
    uuids. Sorted and sent whole in the last page, 2,000,000 held its event loop 0.25 s
    and the next group's 0.7 s, in a 48 MB frame (replication.md M2.3): they go a page
    at a time after the slot's own pairs, each page its own entry, and a retry of any of
    them reaching the third group is still answered where it was stored."""
    era0 = tuple((n, f"u{n}".encode()) for n in range(1, 6))
    x = leading("x", "g2", dedup_page=2)
    [ask] = only(view(x, sealed_to_g2(5), 0.2), AskHandover)
    out = x.handle(HandoverAnswered(ask.request, HandoverPairs(0, 5, era0), 0.3))
    [step] = only([*out, *x.handle(Tick(0.4))], ProposeSlotStep)
    done = complete(sealed_to_g2(5)[0], "g2")
    x.handle(SlotStepDone(step.request, CasOutcome.OK, done, 0.5, next(READS)))
    view(x, (done, SlotHistory("g1")), 0.6)
    pub(x, 1, T0, "n1", "n2", now=0.7)  # era 1's own records
    x.handle(Tick(0.8))
    sealed = seal(begin_move(done, "g0"), "g2", x.log.last_ts)
    view(x, (sealed, SlotHistory("g1")), 0.9)
    y = leading("y", "g0")
    [ask] = only(view(y, (sealed, SlotHistory("g1")), 1.0), AskHandover)
    answers, now = [], 1.1
    while True:
        [ans] = only(x.handle(asked_by(ask, now)), SendHandover)
        got = ans.pairs
        answers.append(([u for _, u in got.pairs], [[u for _, u in p] for _, p in got.earlier]))
        out = y.handle(HandoverAnswered(ask.request, got, now))
        now += 0.01
        if not got.more:
            break
        assert not only([*out, *y.handle(Tick(now))], ProposeSlotStep), "not before the last"
        [ask] = only(out, AskHandover)
    assert answers == [
        ([b"n1", b"n2"], []),
        ([], [[b"u1", b"u2"]]),
        ([], [[b"u3", b"u4"]]),
        ([], [[b"u5"]]),
    ]
    [step] = only([*out, *y.handle(Tick(now))], ProposeSlotStep)
    y.handle(SlotStepDone(step.request, CasOutcome.OK, complete(sealed, "g0"), now, next(READS)))
    view(y, (complete(sealed, "g0"), SlotHistory("g1")), now)
    [ack] = only(pub(y, 9, T0, "u1", "u4", "u5", "n2", now=now), SendPubAck)
    assert ack.eras == (0, 0, 0, 1) and ack.ts[:3] == (1, 4, 5), "each stored once, where it was"
    assert not y.log.topics.get(T0), "nothing stored again"


def test_a_group_the_slot_came_back_to_hands_its_older_eras_records_in_their_own_era() -> None:
    """g1 held slot 0 in era 0 (to ts 1) and, after g2's era 1, again in era 2; sealing era
    2 it hands over every retained record of the slot. A retry of era 0's record at the
    next group is answered with era 0, where it was stored, not with era 2."""
    back = complete(seal(begin_move(complete(sealed_to_g2(1)[0], "g2"), "g1"), "g2", 7), "g1")
    sealed = seal(begin_move(back, "g3"), "g1", 3)
    x = leading("x", "g3", dedup_page=1)
    [ask] = only(view(x, (sealed, SlotHistory("g1")), 0.2), AskHandover)
    page = HandoverPairs(0, 3, ((1, b"u1"),), 0, True)  # a page of era 0's record alone
    [nxt] = only(x.handle(HandoverAnswered(ask.request, page, 0.3)), AskHandover)
    out = x.handle(HandoverAnswered(nxt.request, HandoverPairs(0, 3, ((3, b"u3"),), 1), 0.4))
    [step] = only([*out, *x.handle(Tick(0.5))], ProposeSlotStep)
    x.handle(SlotStepDone(step.request, CasOutcome.OK, complete(sealed, "g3"), 0.6, next(READS)))
    view(x, (complete(sealed, "g3"), SlotHistory("g1")), 0.7)
    [ack] = only(pub(x, 9, T0, "u1", "u3", now=0.8), SendPubAck)
    assert (ack.eras, ack.ts) == ((0, 2), (1, 3))
    assert not x.log.topics.get(T0), "nothing stored again"


def test_a_hot_slot_is_handed_over_a_page_at_a_time_and_completes_after_the_last_page() -> None:
    """One slot's 2,000,000 uuids in one frame and one entry held the new primary's event
    loop about 3 s and each replica's 1.4 s (replication.md M2.3): they go a page at a
    time, each page its own answer (an event) and its own entry."""
    c = leading("a", dedup_page=2)
    for n, u in enumerate(("u1", "u2", "u3", "u4", "u5"), 1):
        pub(c, n, T0, u)
    view(c, sealed_to_g2(5), 0.2)
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(5), 0.2), AskHandover)
    pages, now = [], 0.3
    while True:
        asked = HandoverAsked("l", ask_frame(None, b"n", 5, ask.after), now, b"n")
        [ans] = only(c.handle(asked), SendHandover)
        pages.append((ask.after, ans.pairs.pairs, ans.pairs.more))
        out = x.handle(HandoverAnswered(ask.request, ans.pairs, now))
        now += 0.01
        if not ans.pairs.more:
            assert not only(out, AskHandover)
            break
        assert not only([*out, *x.handle(Tick(now))], ProposeSlotStep), "not before the last"
        [ask] = only(out, AskHandover)
    assert pages == [
        (0, ((1, b"u1"), (2, b"u2")), True),
        (2, ((3, b"u3"), (4, b"u4")), True),
        (4, ((5, b"u5"),), False),
    ]
    assert len(x.log.topics[HANDOVER_TOPIC].records) == 3
    [step] = only([*out, *x.handle(Tick(now))], ProposeSlotStep)
    assert step.step is SlotStep.COMPLETE
    [ack] = only(pub(x, 9, T0, "u1", "u3", "u5", now=now), SendPubAck)
    assert (ack.ts, ack.eras) == ((1, 3, 5), (0, 0, 0)), "every page's retries are answered"


def test_a_new_primary_that_took_over_between_pages_asks_from_the_first_again() -> None:
    """M7 between pages: a later primary knows nothing of the pages asked for; it asks
    from the first, an entry it holds is not written twice, and the move completes."""
    c = leading("a", dedup_page=1)
    pub(c, 1, T0, "u1")
    pub(c, 2, T0, "u2")
    view(c, sealed_to_g2(2), 0.2)
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(2), 0.2), AskHandover)
    [ans] = only(c.handle(HandoverAsked("l", ask_frame(None, b"n", 2, 0), 0.3, b"n")), SendHandover)
    assert ans.pairs.more
    [nxt] = only(x.handle(HandoverAnswered(ask.request, ans.pairs, 0.3)), AskHandover)
    assert nxt.after == 1
    x.moves.lead_changed()  # as a new primary's: what it began is decided afresh
    x.moves.map_read = True
    [again] = only(x.handle(Tick(1.0)), AskHandover)
    assert again.after == 0
    [last] = only(x.handle(HandoverAnswered(again.request, ans.pairs, 1.1)), AskHandover)
    assert len(x.log.topics[HANDOVER_TOPIC].records) == 1, "the page's entry is not written twice"
    asked = HandoverAsked("l", ask_frame(None, b"n", 2, last.after), 1.2, b"n")
    [ans] = only(c.handle(asked), SendHandover)
    assert not ans.pairs.more
    out = x.handle(HandoverAnswered(last.request, ans.pairs, 1.3))
    [step] = only([*out, *x.handle(Tick(1.4))], ProposeSlotStep)
    assert step.step is SlotStep.COMPLETE


def test_a_backup_of_the_old_group_answers_a_handover_ask_with_the_slots_pairs() -> None:
    a, b = pair()
    carry(a, b, pub(a, 1, T0, "u1") + pub(a, 2, T1, "o2"), 0.1)
    carry(a, b, a.handle(Tick(0.15)), 0.15)  # the commit point reaches b
    view(b, sealed_to_g2(1), 0.2)
    [ans] = only(
        b.handle(HandoverAsked("link-x", ask_frame(None, b"n", 1), 0.3, b"n")), SendHandover
    )
    assert ans.pairs == HandoverPairs(0, 1, ((1, b"u1"),))


def test_the_handover_carries_the_slots_purged_uuids_and_no_other_slots() -> None:
    """It carried every purged uuid of the group: up to ``dedup_max`` (2,000,000) in one
    frame and one entry held both groups' event loops for seconds (replication.md M2.3)."""
    c = leading("a")
    for n, (topic, u) in enumerate(((T0, "u1"), (T1, "o2"), (T0, "u3"), (T1, "o4")), 1):
        pub(c, n, topic, u)
    c.log.purge(T0, 1)
    c.log.purge(T1, 4)  # another slot's records, purged: their uuids still deduplicate
    view(c, sealed_to_g2(4), 0.2)
    [ans] = only(c.handle(HandoverAsked("l", ask_frame(None, b"n", 4), 0.3, b"n")), SendHandover)
    assert ans.pairs == HandoverPairs(0, 4, ((1, b"u1"), (3, b"u3")))


def test_a_handover_ask_for_a_slot_not_sealed_here_or_not_committed_is_refused_retriably() -> None:
    c = leading("a")
    pub(c, 1, T0, "u1")
    view(c, moving(), 0.1)
    [close] = only(c.handle(HandoverAsked("l", ask_frame(None, b"n", 1), 0.2, b"n")), CloseLink)
    assert close.code is ErrorCode.UNAVAILABLE
    view(c, sealed_to_g2(5), 0.3)  # a seal point past what we hold committed
    [close] = only(c.handle(HandoverAsked("l", ask_frame(None, b"n", 5), 0.4, b"n")), CloseLink)
    assert close.code is ErrorCode.UNAVAILABLE


def test_a_handover_ask_without_the_cluster_proof_is_refused() -> None:
    secret = b"s" * 32
    c = BrokerCore(BrokerConfig(id="a", min_insync=1), member("a"), secret)  # type: ignore[arg-type]
    c.moves.viewed(sealed_to_g2(0), 1)
    bad = ask_frame(b"other" * 8, b"n", 0)
    [close] = only(c.handle(HandoverAsked("l", bad, 0.1, b"n")), CloseLink)
    assert close.code is ErrorCode.UNAUTHENTICATED
    good = ask_frame(secret, b"n", 0)
    assert only(c.handle(HandoverAsked("l", good, 0.1, b"n")), SendHandover)


def test_an_answer_that_hands_nothing_on_yet_says_more_is_asked_again_later_not_at_once() -> None:
    """Found in review: a page saying ``more`` with no pairs of ours and no forwarded uuid
    past the last one (a broken or hostile answerer) was taken, and the same page asked
    for again at once, for good."""
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    empty = HandoverPairs(0, 2, (), 0, True, ((0, ()),))
    out = x.handle(HandoverAnswered(ask.request, empty, 0.3))
    assert not only(out, AskHandover), "no progress: not asked again at once"
    assert not only(x.handle(Tick(0.4)), AskHandover)
    [again] = only(x.handle(Tick(0.9)), AskHandover)  # ASK_AGAIN_S later
    assert (again.after, again.earlier) == (0, (0, 0))


def test_a_move_sealed_again_after_a_roll_back_is_handed_over_from_the_first_page() -> None:
    """Found in review: the pages asked for were kept per slot, not per handover; sealed
    anew at a later point, the new handover's first ask began where the last one ended."""
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(2), 0.2), AskHandover)
    page = HandoverPairs(0, 2, ((1, b"u1"),), 0, True)
    [nxt] = only(x.handle(HandoverAnswered(ask.request, page, 0.3)), AskHandover)
    assert nxt.after == 1
    view(x, sealed_to_g2(5), 0.4)  # rolled back, and sealed again at 5 meanwhile
    stale = HandoverPairs(0, 2, ((2, b"u2"),), 1, False)  # the answer to the old ask
    assert not only(x.handle(HandoverAnswered(nxt.request, stale, 0.5)), ProposeSlotStep)
    [first] = only(x.handle(Tick(1.1)), AskHandover)
    assert (first.until, first.after, first.earlier) == (5, 0, (0, 0))
