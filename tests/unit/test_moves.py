"""Slot moves through BrokerCore (docs/replication.md M1, M2, M7, M8): what a ``pub`` of a
moving slot gets, the old primary's seal, the new primary's handover and completion, and
each crash point of M7 (a later primary picks the move up); the old group's answer to a
handover ask is in test_moves_handover.py."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

from tritonmq.config import BrokerConfig
from tritonmq.core.actions import (
    Action,
    AskHandover,
    LoadSubscriptions,
    ProposeSlotStep,
    ProposeState,
    ReadState,
    SendEntries,
    SendError,
    SendLeader,
    SendPubAck,
    SendPurge,
    SendToPrimary,
    SlotStep,
    StartFollowing,
)
from tritonmq.core.broker import BrokerCore, Role
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    ClientGone,
    FollowerFrame,
    FollowerGone,
    HandoverAnswered,
    PrimaryFrame,
    SlotStepDone,
    SubscriptionsLoaded,
    Tick,
    ZkView,
)
from tritonmq.core.group import GroupState, Member
from tritonmq.core.handover import (
    HANDOVER_TOPIC,
    encode_entry,
    handover_uuid,
)
from tritonmq.core.slothistory import (
    Position,
    SlotHistory,
    begin_move,
    complete,
    roll_back,
    seal,
)
from tritonmq.core.slots import SlotMap, slot_of
from tritonmq.wire.frames import (
    Append,
    ErrorCode,
    Fetch,
    Follow,
    HandoverPairs,
    Pub,
    PubRecord,
    ReplAck,
)

SLOTS = 2
T0 = next(f"t{i}" for i in range(100) if slot_of(f"t{i}", SLOTS) == 0)  # slot 0: moves
T1 = next(f"t{i}" for i in range(100) if slot_of(f"t{i}", SLOTS) == 1)  # slot 1: stays
NORMAL = (SlotHistory("g1"), SlotHistory("g1"))


def member(m: str) -> Member:
    return Member(m, f"ws://{m}:1", f"boot-{m}")


def state(epoch: int, primary: str, isr: str, start_ts: int = 1, version: int = 1) -> GroupState:
    return GroupState(epoch, primary, tuple(isr), {m: f"boot-{m}" for m in isr}, start_ts, version)


def only(actions: Sequence[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


def recs(*uuids: str) -> list[PubRecord]:
    return [(u.encode(), None, b"v-" + u.encode(), None) for u in uuids]


READS = itertools.count(1)  # map versions: each view or step of a test is later than the last


def view(
    c: BrokerCore,
    hs: Sequence[SlotHistory],
    now: float,
    st: GroupState | None = None,
    version: int | None = None,
) -> list[Action]:
    """A fresh read: the group as it was (or ``st``), and the slots as ``hs`` (at map
    ``version``: by default a later one than any before)."""
    smap = SlotMap(tuple(h.owner for h in hs), next(READS) if version is None else version)
    ev = ZkView(st or c.state, dict(c.members), smap, now, tuple(hs))
    return c.handle(ev)


def leading(me: str, group: str = "g1", isr: str | None = None, **cfg: object) -> BrokerCore:
    """The primary of ``group`` (alone in its ISR unless ``isr``), slots as NORMAL."""
    isr = isr or me
    settings = {"id": me, "group": group, "min_insync": 1, "replica_lag_timeout": 2.0, **cfg}
    c = BrokerCore(BrokerConfig(**settings), member(me))  # type: ignore[arg-type]
    live = {m: member(m) for m in isr}
    [prop] = only(c.handle(ZkView(None, live, None, 0.0)), ProposeState)
    out = c.handle(
        CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=0), 0.0)
    )
    [load] = only(out, LoadSubscriptions)
    c.handle(SubscriptionsLoaded(load.request, [], 0.0))
    hs = NORMAL if group == "g1" else (SlotHistory("g1"), SlotHistory("g1"))
    view(c, hs, 0.0, state(1, me, isr))
    assert c.role is Role.LEADING
    return c


def pub(c: BrokerCore, pid: int, topic: str, *uuids: str, now: float = 0.1) -> list[Action]:
    return c.handle(ClientFrameIn("prod", Pub(pid, topic, recs(*uuids)), now))


def moving() -> tuple[SlotHistory, SlotHistory]:
    return (begin_move(SlotHistory("g1"), "g2"), SlotHistory("g1"))


# --- M1: a cluster whose slots never moved ---------------------------------------------


def test_with_histories_of_slots_that_never_moved_a_pub_is_routed_by_the_owner_as_before() -> None:
    c = leading("a")
    hs = (SlotHistory("g2"), SlotHistory("g1"))
    view(c, hs, 0.1)
    [err] = only(pub(c, 1, T0, "u1"), SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g2")
    assert only(pub(c, 2, T1, "u2"), SendPubAck) == [SendPubAck("prod", 2, (1,))]


# --- M2.1, M8: the old primary once it sees `moving` ---------------------------------------


def test_the_old_primary_refuses_new_writes_of_a_moving_slot_naming_the_new_group() -> None:
    c = leading("a")
    assert only(pub(c, 1, T0, "u1"), SendPubAck) == [SendPubAck("prod", 1, (1,))]
    view(c, moving(), 0.2)
    [err] = only(pub(c, 2, T0, "u2", now=0.3), SendError)
    assert (err.code, err.group, err.id) == (ErrorCode.WRONG_GROUP, "g2", 2)
    assert err.code.retriable
    # other slots are written as before
    assert only(pub(c, 3, T1, "u3", now=0.3), SendPubAck) == [SendPubAck("prod", 3, (2,))]


def test_a_retry_of_a_batch_the_old_primary_stored_is_answered_from_its_uuid_table_first() -> None:
    """M8: the dedup lookup comes before the slot check, during the move and after it."""
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, moving(), 0.2)
    assert only(pub(c, 2, T0, "u1", "u2", now=0.3), SendPubAck) == [SendPubAck("prod", 2, (1, 2))]
    # after the move completed, the old era's records say which era they are
    done = complete(seal(moving()[0], "g1", 2), "g2")
    view(c, (done, SlotHistory("g1")), 0.4)
    [ack] = only(pub(c, 3, T0, "u1", now=0.5), SendPubAck)
    assert (ack.ts, ack.eras) == ((1,), (0,))


# --- M2.2: the seal ---------------------------------------------------------------------


def follower_of(primary: BrokerCore, me: str, isr: str) -> BrokerCore:
    c = BrokerCore(
        BrokerConfig(id=me, group=primary.cfg.group, min_insync=1),  # type: ignore[arg-type]
        member(me),
    )
    st = primary.state
    assert st is not None
    c.handle(ZkView(st, {m: member(m) for m in isr}, None, 0.0))
    assert c.role is Role.FOLLOWING
    return c


def carry(
    p: BrokerCore, b: BrokerCore, out: Sequence[Action], now: float, link: str = "link-b"
) -> list[Action]:
    """Carry what primary ``p`` sends follower ``b`` (on ``link``) until both are quiet;
    returns ``p``'s other actions (what it sends other links among them)."""
    rest: list[Action] = []
    todo = list(out)
    while todo:
        a = todo.pop(0)
        frame: object
        if isinstance(a, (SendEntries, SendPurge)) and link in a.links:
            others = tuple(x for x in a.links if x != link)
            if others:  # theirs, for another carry
                rest.append(dataclasses.replace(a, links=others))
        if isinstance(a, SendEntries) and link in a.links:
            entries, published = p.entries_for(a.start, a.end)
            frame = Append(a.epoch, a.commit, a.start, entries, tuple(published))
        elif isinstance(a, SendLeader) and a.link == link:
            frame = a.leader
        elif isinstance(a, SendPurge) and link in a.links:
            frame = a.purge
        else:
            rest.append(a)
            continue
        assert b.follow is not None
        for back in b.handle(PrimaryFrame(b.follow.id, frame, now)):  # type: ignore[arg-type]
            if isinstance(back, SendToPrimary):
                todo.extend(p.handle(FollowerFrame(link, back.frame, now)))
    return rest


def pair(group: str = "g1") -> tuple[BrokerCore, BrokerCore]:
    """Primary a and in-sync backup b of ``group``, b following on "link-b"."""
    a = leading("a", group, isr="ab", min_insync=2)
    b = follower_of(a, "b", "ab")
    hello = Follow(group, "b", "boot-b", 1, 0, [])
    carry(a, b, a.handle(FollowerFrame("link-b", hello, 0.0)), 0.0)
    return a, b


def test_the_seal_point_is_the_last_ts_when_moving_was_seen_and_waits_for_its_commit() -> None:
    a, b = pair()
    out = pub(a, 1, T0, "u1") + pub(a, 2, T1, "u2")  # accepted, not yet acknowledged by b
    assert not only(out, SendPubAck)
    assert not only(view(a, moving(), 0.2), ProposeSlotStep), "2 is not committed yet"
    out += pub(a, 3, T1, "u3", now=0.25)  # later writes elsewhere do not move the seal point
    assert not only(a.handle(Tick(0.3)), ProposeSlotStep)
    rest = carry(a, b, [*out, *a.handle(Tick(0.35))], 0.4)
    [step] = only([*rest, *a.handle(Tick(0.5))], ProposeSlotStep)
    assert (step.slot, step.step, step.until) == (0, SlotStep.SEAL, 2)
    assert not only(a.handle(Tick(0.6)), ProposeSlotStep), "one step in flight at a time"


def test_a_later_primary_of_the_old_group_finding_moving_seals_at_its_own_last_ts() -> None:
    """M7: the old primary died in `moving`; its backup b, elected, refuses the slot's
    writes and seals at its own last_ts once its new epoch has committed it."""
    a, b = pair()
    carry(a, b, pub(a, 1, T0, "u1", "u2"), 0.1)
    view(b, moving(), 0.2)
    # a is gone: b claims and leads epoch 2, alone
    out = b.handle(ZkView(state(1, "a", "ab"), {"b": member("b")}, b.slots, 1.0, moving()))
    [claim] = only(out, ProposeState)
    out = b.handle(
        CasDone(claim.request, CasOutcome.OK, dataclasses.replace(claim.state, version=2), 1.1)
    )
    [load] = only(out, LoadSubscriptions)
    out += b.handle(SubscriptionsLoaded(load.request, [], 1.1))
    assert b.primary is not None
    out += b.handle(ZkView(claim.state, {"b": member("b")}, b.slots, 1.15, moving()))  # M7
    [err] = only(pub(b, 3, T0, "u9", now=1.2), SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g2")
    steps = only([*out, *b.handle(Tick(1.4))], ProposeSlotStep)
    assert [(s.step, s.until) for s in steps] == [(SlotStep.SEAL, 2)]


def test_a_later_primary_of_the_old_group_seals_only_once_its_isr_followed_it() -> None:
    """M7, found by the simulator (scenario `tests/sim/test_scenarios.py::test_a_new_primary_seals_only_once_every_isr_member_followed_it`): g1's primary stored a record of the slot at ts 32 on one
    backup only and died; the other backup, elected with last_ts 31 and commit point 31,
    sealed at 31 at once. The backup holding ts 32 had not followed it (so not truncated
    it), was elected next, and committed ts 32: a record of the slot above the seal point,
    acknowledged to the producer's retry. A new primary's inherited commit point says
    nothing of an ISR member's tail from an earlier epoch: it seals only once every ISR
    member followed it (and cut that tail)."""
    a = leading("a", isr="abc", min_insync=2)
    b, c = follower_of(a, "b", "abc"), follower_of(a, "c", "abc")
    for x, link in ((b, "link-b"), (c, "link-c")):
        hello = Follow("g1", x.cfg.id, f"boot-{x.cfg.id}", 1, 0, [])
        carry(a, x, a.handle(FollowerFrame(link, hello, 0.0)), 0.0, link)
    out = pub(a, 1, T0, "u1")
    carry(a, c, carry(a, b, out, 0.1), 0.1, "link-c")
    beat = a.handle(Tick(0.15))  # the commit point, 1, reaches both
    carry(a, c, carry(a, b, beat, 0.15), 0.15, "link-c")
    a.handle(FollowerGone("link-b", 0.2))  # b is cut off from a, still in the ISR
    carry(a, c, pub(a, 2, T0, "u2", now=0.2), 0.2, "link-c")
    assert (b.log.last_ts, c.log.last_ts, a.commit_ts) == (1, 2, 1)
    # a is gone; the slot begins to move; b claims epoch 2 with c, which it cannot reach
    live = {"b": member("b"), "c": member("c")}
    gone = ZkView(state(1, "a", "abc"), live, b.slots, 1.0, moving())
    [claim] = only(b.handle(gone), ProposeState)
    assert claim.state.isr == ("b", "c")
    st = dataclasses.replace(claim.state, version=2)
    [load] = only(b.handle(CasDone(claim.request, CasOutcome.OK, st, 1.1)), LoadSubscriptions)
    out = b.handle(SubscriptionsLoaded(load.request, [], 1.1))
    out += b.handle(ZkView(st, live, b.slots, 1.15, moving()))
    assert b.commit_ts == 1
    out += b.handle(Tick(1.2))
    assert not only(out, ProposeSlotStep), "sealed at 1 while c holds ts 2 of the slot"
    # c follows b: it cuts ts 2, and b seals
    c.handle(ZkView(st, live, c.slots, 1.3, moving()))
    hello = Follow("g1", "c", "boot-c", 2, c.log.last_ts, list(c.log.epochs))
    rest = carry(b, c, b.handle(FollowerFrame("link-c", hello, 1.3)), 1.3, "link-c")
    rest = carry(b, c, [*rest, *b.handle(Tick(1.4))], 1.4, "link-c")
    assert c.log.last_ts == 1
    [step] = only([*rest, *b.handle(Tick(1.5))], ProposeSlotStep)
    assert (step.step, step.until) == (SlotStep.SEAL, 1)


def test_a_roll_back_lets_the_old_primary_write_the_slot_again_in_the_same_era() -> None:
    c = leading("a")
    pub(c, 1, T0, "u1")
    sealed = seal(moving()[0], "g1", 1)
    view(c, (sealed, SlotHistory("g1")), 0.2)
    assert only(pub(c, 2, T0, "u2", now=0.3), SendError)
    view(c, (roll_back(sealed), SlotHistory("g1")), 0.4)
    # (another connection: on "prod" a batch behind the refused one waits for its resend)
    out = c.handle(ClientFrameIn("prod2", Pub(3, T0, recs("u3")), 0.5))
    assert only(out, SendPubAck) == [SendPubAck("prod2", 3, (2,))]


# --- M2.3, M2.4: the new primary ----------------------------------------------------------


def sealed_to_g2(until: int = 2) -> tuple[SlotHistory, SlotHistory]:
    return (seal(moving()[0], "g1", until), SlotHistory("g1"))


def test_the_new_primary_asks_for_the_handover_writes_it_and_completes_once_committed() -> None:
    x = leading("x", "g2")
    [err] = only(view(x, moving(), 0.1) + pub(x, 1, T0, "n1", now=0.1), SendError)
    assert err.code is ErrorCode.UNAVAILABLE, "moving here: the producer waits for it"
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    assert (ask.slot, ask.group, ask.until) == (0, "g1", 2)
    [err] = only(pub(x, 2, T0, "n2", now=0.25), SendError)
    assert (err.code, err.message) == (ErrorCode.UNAVAILABLE, "slot 0 is moving here; retry")
    assert err.code.retriable
    assert not only(x.handle(Tick(0.3)), AskHandover), "one ask at a time"
    pairs = HandoverPairs(0, 2, ((1, b"u1"), (2, b"u2")))
    out = x.handle(HandoverAnswered(ask.request, pairs, 0.4))
    assert handover_uuid(0, 0, 2) in x.log.uuids
    [step] = only([*out, *x.handle(Tick(0.5))], ProposeSlotStep)  # committed at once: alone
    assert (step.slot, step.step) == (0, SlotStep.COMPLETE)
    x.handle(ClientGone("prod", 0.5))  # refused, the producer reconnects (client rule 4)
    # a retry of a record the old group stored is answered with its position there, at once
    [ack] = only(pub(x, 3, T0, "u2", "u1", now=0.55), SendPubAck)
    assert (ack.ts, ack.eras) == ((2, 1), (0, 0))
    done = complete(sealed_to_g2()[0], "g2")
    x.handle(SlotStepDone(step.request, CasOutcome.OK, done, 0.6, next(READS)))
    view(x, (done, SlotHistory("g1")), 0.7)
    # new records are the new era's (no eras in the puback), mixed with handed-over ones
    [ack] = only(pub(x, 4, T0, "u1", "n4", now=0.8), SendPubAck)
    assert ack.ts[0] == 1 and ack.eras == (0, 1) and ack.ts[1] == x.log.last_ts
    [ack] = only(pub(x, 5, T0, "n5", now=0.9), SendPubAck)
    assert ack.eras == ()


def test_an_unanswered_handover_is_asked_again_later() -> None:
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    x.handle(HandoverAnswered(ask.request, None, 0.3))
    assert not only(x.handle(Tick(0.4)), AskHandover)
    [again] = only(x.handle(Tick(0.9)), AskHandover)
    assert again.request != ask.request


def test_the_handover_entry_replicates_and_commits_before_the_move_completes() -> None:
    x, y = pair("g2")
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    out = x.handle(HandoverAnswered(ask.request, HandoverPairs(0, 2, ((2, b"u2"),)), 0.3))
    assert not only(x.handle(Tick(0.4)), ProposeSlotStep), "y has not acknowledged it"
    rest = carry(x, y, [*out, *x.handle(Tick(0.45))], 0.5)
    [step] = only([*rest, *x.handle(Tick(0.6))], ProposeSlotStep)
    assert step.step is SlotStep.COMPLETE
    assert handover_uuid(0, 0, 2) in y.log.uuids
    # read as it arrived: elected, y answers the first retry without reading every page
    # of a hot slot's handover at once (1.4 s of its loop for 2,000,000 uuids)
    assert y.moves._table.table.lookup(b"u2", 0) == Position(0, 2)


def test_a_later_new_primary_that_holds_the_handover_completes_without_asking_again() -> None:
    """M7: the new primary died before `complete`; its backup, elected, holds the entry."""
    x, y = pair("g2")
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    out = x.handle(HandoverAnswered(ask.request, HandoverPairs(0, 2, ((2, b"u2"),)), 0.3))
    carry(x, y, [*out, *x.handle(Tick(0.4))], 0.4)
    view(y, sealed_to_g2(), 0.5)
    gone = ZkView(state(1, "a", "ab"), {"b": member("b")}, y.slots, 1.0, sealed_to_g2())
    out = y.handle(gone)
    [claim] = only(out, ProposeState)
    out = y.handle(
        CasDone(claim.request, CasOutcome.OK, dataclasses.replace(claim.state, version=2), 1.1)
    )
    assert y.primary is not None
    out += y.handle(ZkView(claim.state, {"b": member("b")}, y.slots, 1.15, sealed_to_g2()))
    out += y.handle(Tick(1.2))
    assert not only(out, AskHandover)
    [step] = only(out, ProposeSlotStep)
    assert step.step is SlotStep.COMPLETE
    [ack] = only(pub(y, 9, T0, "u2", now=1.3), SendPubAck)  # after complete too
    assert (ack.ts, ack.eras) == ((2,), (0,))


def test_a_later_new_primary_without_the_handover_asks_again_and_adopts_it_once() -> None:
    """M7: the new primary died before its entry reached the backup: the next one asks;
    a repeated answer writes nothing twice (the entry's uuid dedups)."""
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    x.handle(HandoverAnswered(ask.request, HandoverPairs(0, 2, ((2, b"u2"),)), 0.3))
    last = x.log.last_ts
    x.moves.lead_changed()  # as after a re-election: decided afresh
    x.moves.asking[0] = 99
    x.handle(HandoverAnswered(99, HandoverPairs(0, 2, ((2, b"u2"),)), 0.4))
    assert x.log.last_ts == last


def test_the_handed_over_uuids_are_forgotten_after_the_dedup_window() -> None:
    x = leading("x", "g2", dedup_window_s=1.0, ephemeral_grace=0.0)
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    x.handle(HandoverAnswered(ask.request, HandoverPairs(0, 2, ((2, b"u2"),)), 0.3))
    x.handle(Tick(0.4))
    assert x.moves.handed(x.log).lookup(b"u2") is not None
    for i in range(5, 40):  # purge and forget run on ticks, offsets stored or not
        x.handle(Tick(i / 10))
    assert x.moves.handed(x.log).lookup(b"u2") is None
    assert HANDOVER_TOPIC not in x.log.topics or not x.log.topics[HANDOVER_TOPIC].records


def test_the_handover_entry_stays_out_of_the_topics_meta_and_stats_list() -> None:
    from tritonmq.core.actions import SendMeta, SendStats
    from tritonmq.wire.frames import Meta, Stats

    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(), 0.2), AskHandover)
    x.handle(HandoverAnswered(ask.request, HandoverPairs(0, 2, ()), 0.3))
    [meta] = only(x.handle(ClientFrameIn("c", Meta(1), 0.4)), SendMeta)
    assert HANDOVER_TOPIC not in meta.info["topics"]
    [stats] = only(x.handle(ClientFrameIn("c", Stats(2), 0.4)), SendStats)
    assert HANDOVER_TOPIC not in {t.topic for t in stats.stats.topics}


def test_a_view_read_before_our_completing_step_landed_does_not_undo_the_move() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_view_read_before_our_completing_step_landed_does_not_undo_the_move`: the new group's primary completed the move, then a view read before
    its CAS landed arrived. It took that view's histories (the slot still sealed, the new
    era unknown), read its subscriptions against them, and its group purged records of
    the new era a subscription still needed. Histories older than the map version held,
    ours included, are not taken (M1); here a producer of the slot is served at once."""
    x = leading("x", "g2")
    sealed_at, done_at = next(READS), next(READS)  # map versions: the seal's, then ours
    [ask] = only(view(x, sealed_to_g2(), 0.2, version=sealed_at), AskHandover)
    out = x.handle(
        HandoverAnswered(ask.request, HandoverPairs(0, 2, ((1, b"u1"), (2, b"u2"))), 0.3)
    )
    [step] = only([*out, *x.handle(Tick(0.4))], ProposeSlotStep)
    done = complete(sealed_to_g2()[0], "g2")
    x.handle(SlotStepDone(step.request, CasOutcome.OK, done, 0.5, done_at))
    stale = view(x, sealed_to_g2(), 0.6, version=sealed_at)  # read before our CAS landed
    assert not only(stale, AskHandover), "nothing asked again"
    [ack] = only(pub(x, 1, T0, "n1", now=0.7), SendPubAck)
    assert ack.ts == (x.log.last_ts,) and not ack.eras, "the new era's own record"
    view(x, (done, SlotHistory("g1")), 0.8, version=done_at)  # the read after it: the same
    [ack] = only(pub(x, 2, T0, "n2", now=0.9), SendPubAck)
    assert ack.ts == (x.log.last_ts,) and not ack.eras


# --- reads of the old era -------------------------------------------------------------------


def test_a_group_that_held_an_era_of_a_slot_still_serves_fetches_of_its_own_ts() -> None:
    from tritonmq.core.actions import SendFetched

    c = leading("a", retention_s=60.0)
    pub(c, 1, T0, "u1")
    done = complete(seal(moving()[0], "g1", 1), "g2")
    view(c, (done, SlotHistory("g1")), 0.2)
    [got] = only(c.handle(ClientFrameIn("r", Fetch(7, T0, 1, 10, 100), 0.3)), SendFetched)
    assert [r[0] for r in got.records] == [1]
    # a slot that never moved and is another group's is still refused
    view(c, (done, SlotHistory("g2")), 0.4)
    [err] = only(c.handle(ClientFrameIn("r", Fetch(8, T1, 1, 10, 100), 0.5)), SendError)
    assert err.code is ErrorCode.WRONG_GROUP
    _ = StartFollowing, ReplAck  # imported for the helpers' types


def test_a_move_sealed_again_after_a_roll_back_is_handed_over_afresh() -> None:
    """Same era, a later seal point: the old group wrote more of the slot after the roll
    back, so the first handover entry is not enough (found in review: with one entry per
    (slot, era) the new primary completed on the stale one)."""
    x = leading("x", "g2")
    [ask] = only(view(x, sealed_to_g2(2), 0.2), AskHandover)
    x.handle(HandoverAnswered(ask.request, HandoverPairs(0, 2, ((2, b"u2"),)), 0.3))
    view(x, (roll_back(sealed_to_g2(2)[0]), SlotHistory("g1")), 0.4)
    out = view(x, sealed_to_g2(5), 0.5)
    assert not only(out, ProposeSlotStep)
    [again] = only(out, AskHandover)
    assert again.until == 5


def test_the_old_primary_seals_only_while_its_isr_is_min_insync_strong() -> None:
    """Found by the simulator (scenario
    `tests/sim/test_scenarios.py::test_the_old_primary_seals_only_while_its_isr_is_min_insync_strong`): a primary
    whose ISR shrank below min_insync commits alone; sealed there, it handed the new group
    uuids of records held by one copy, and a retry was acknowledged from them (one copy,
    min_insync 2). The seal waits until the ISR is min_insync strong again, as a puback does."""
    a, b = pair()
    carry(a, b, pub(a, 1, T0, "u1"), 0.1)
    pub(a, 2, T0, "u2", now=0.2)  # b never acknowledges it
    [prop] = only(a.handle(Tick(3.0)), ProposeState)  # b lags: the ISR shrinks to a alone
    assert prop.state.isr == ("a",)
    a.handle(CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=2), 3.1))
    assert a.commit_ts == 2  # committed on one copy
    out = view(a, moving(), 3.2) + a.handle(Tick(3.3))
    assert not only(out, ProposeSlotStep), "sealed with one copy of ts 2"
    # b follows again and catches up: once it is back in the ISR, a seals
    a.handle(FollowerGone("link-b", 3.4))
    hello = Follow("g1", "b", "boot-b", 1, 1, [(1, 1)])
    rest = carry(a, b, a.handle(FollowerFrame("link-b", hello, 3.5)), 3.5)
    rest = carry(a, b, [*rest, *a.handle(Tick(3.6))], 3.6)
    [grow] = only(rest, ProposeState)
    assert grow.state.isr == ("a", "b")
    done = dataclasses.replace(grow.state, version=3)
    out = a.handle(CasDone(grow.request, CasOutcome.OK, done, 3.7)) + a.handle(Tick(3.8))
    [step] = only(out, ProposeSlotStep)
    assert (step.step, step.until) == (SlotStep.SEAL, 2)


def test_a_retry_is_answered_with_its_own_slots_position_not_that_of_the_handover_carrying_it() -> (
    None
):
    """Found by the simulator with moves (scenario `tests/sim/test_scenarios.py::test_a_retry_is_answered_with_its_own_slot_s_era_not_the_handover_s`), when a
    handover carried every purged uuid of the old group, other slots' too (a handover entry
    written then may still be in a log): a uuid of slot 1 that came with slot 0's handover
    (era 1) answered a retry of slot 1 with era 1, an era slot 1 never had (its record is
    era 0's, in g1)."""

    x = leading("x", "g2")
    back = complete(seal(begin_move(SlotHistory("g2"), "g1"), "g2", 0), "g1")  # era 1: g1's
    hs = (seal(begin_move(back, "g2"), "g1", 5), seal(begin_move(SlotHistory("g1"), "g2"), "g1", 5))
    entry = encode_entry(0, 1, ((2, b"t0-2"), (3, b"o3")))  # b"o3": slot 1's, purged in g1
    x.log.append_new(HANDOVER_TOPIC, handover_uuid(0, 1, 5), None, entry, None)
    view(x, hs, 0.1)
    [ack] = only(pub(x, 1, T0, "t0-2", now=0.2), SendPubAck)
    assert (ack.ts, ack.eras) == ((2,), (1,))
    [err] = only(pub(x, 2, T1, "o3", now=0.2), SendError)
    assert err.code is ErrorCode.UNAVAILABLE, "slot 1's handover has not come yet"
    own = encode_entry(1, 0, ((3, b"o3"),))
    x.log.append_new(HANDOVER_TOPIC, handover_uuid(1, 0, 5), None, own, None)
    [ack] = only(pub(x, 3, T1, "o3", now=0.3), SendPubAck)
    assert ack.ts == (3,) and ack.eras in ((), (0,))


def test_a_batch_behind_one_refused_for_a_moving_slot_is_refused_too_on_that_connection() -> None:
    """Found by the simulator with moves (scenario `tests/sim/test_scenarios.py::test_a_batch_behind_one_refused_for_a_moving_slot_is_refused_too_on_that_connection`): a producer's batch 1 got "moving here"; batch 2, right behind it on
    the same connection, arrived after the move completed and was stored; the producer
    resent batch 1, which was stored after batch 2 (its order broken). A slot's refusal
    refuses every later batch on the connection, as any refusal does."""
    x = leading("x", "g2")
    view(x, sealed_to_g2(), 0.1)
    [err] = only(pub(x, 1, T0, "n1", now=0.2), SendError)
    assert err.code is ErrorCode.UNAVAILABLE
    view(x, (complete(sealed_to_g2()[0], "g2"), SlotHistory("g1")), 0.3)  # completed here
    out = pub(x, 2, T0, "n2", now=0.3)
    assert not only(out, SendPubAck) and [e.code for e in only(out, SendError)] == [
        ErrorCode.UNAVAILABLE
    ]
    # on a new connection, in order: 1 then 2
    acks = [
        *only(x.handle(ClientFrameIn("prod2", Pub(3, T0, recs("n1")), 0.4)), SendPubAck),
        *only(x.handle(ClientFrameIn("prod2", Pub(4, T0, recs("n2")), 0.4)), SendPubAck),
    ]
    assert [a.ts for a in acks] == [(1,), (2,)]


def test_a_batch_behind_one_refused_wrong_group_waits_for_its_resend_across_a_roll_back() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_batch_behind_one_refused_wrong_group_waits_for_its_resend_across_a_roll_back`: batch 1 was
    refused with WRONG_GROUP (slot sealed, moving to g2); the move was rolled back (the
    slot's first: it has no history again) and batch 3, sent right behind batch 1 on that
    connection, was stored here; batch 1, re-routed, was stored after it. Now a later batch
    of the topic on that connection is refused until the producer resends a refused one;
    then it is written again, in order, and a retry of a stored batch is answered at once."""
    c = leading("a")
    pub(c, 1, T0, "u1")
    sealed = seal(moving()[0], "g1", 1)
    view(c, (sealed, SlotHistory("g1")), 0.2)
    [err] = only(pub(c, 2, T0, "u2", now=0.3), SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g2")
    view(c, (roll_back(sealed), SlotHistory("g1")), 0.4)
    [held] = only(pub(c, 3, T0, "u3", now=0.5), SendError)
    assert (held.code, held.group, held.id) == (ErrorCode.WRONG_GROUP, "g1", 3)
    assert only(pub(c, 4, T0, "u1", now=0.5), SendPubAck) == [SendPubAck("prod", 4, (1,))]
    assert only(pub(c, 5, T1, "v1", now=0.5), SendPubAck), "other topics are not held back"
    acks = [*only(pub(c, 6, T0, "u2", now=0.6), SendPubAck), *only(pub(c, 7, T0, "u3"), SendPubAck)]
    assert [a.ts for a in acks] == [(3,), (4,)], "the refused batch first, then the one behind"
    other = c.handle(ClientFrameIn("prod2", Pub(8, T0, recs("w1")), 0.7))
    assert only(other, SendPubAck), "another connection was never held back"


def test_a_batch_held_back_lifts_the_hold_when_it_is_resent() -> None:
    """The refused batch may be re-routed elsewhere and stored there, never to come back
    here (the slot moved on, then back): the resend of a batch that was held back shows
    the producer has seen every refusal before it, as a resend of the refused one does."""
    c = leading("a")
    sealed = seal(moving()[0], "g1", 0)
    view(c, (sealed, SlotHistory("g1")), 0.2)
    assert only(pub(c, 1, T0, "u1", now=0.3), SendError)  # u1 goes to g2 and is stored there
    view(c, (roll_back(sealed), SlotHistory("g1")), 0.4)
    assert only(pub(c, 2, T0, "u2", now=0.5), SendError), "held back"
    assert only(pub(c, 3, T0, "u2", now=0.6), SendPubAck), "its resend is written"
    assert only(pub(c, 4, T0, "u3", now=0.6), SendPubAck)


def test_a_new_primary_takes_no_write_before_it_read_the_map_as_primary() -> None:
    """M7: a later primary reads the slots' state before it serves. Elected on a view read
    before its old primary sealed a slot (a suspicion of that primary; watches late), it
    wrote the slot another group owned by then: two writers (simulator scenario `tests/sim/test_scenarios.py::test_a_new_primary_takes_no_write_before_it_read_the_map_as_primary`:
    g2b0's last view showed the slot
    normal). It asks for a view, and until one read after its election (the group state
    names it primary at its epoch) refuses every `pub` with the retriable UNAVAILABLE."""
    c = BrokerCore(BrokerConfig(id="a", group="g1", min_insync=1), member("a"))
    smap = SlotMap(tuple(h.owner for h in NORMAL))
    [prop] = only(c.handle(ZkView(None, {"a": member("a")}, smap, 0.0, NORMAL)), ProposeState)
    done = dataclasses.replace(prop.state, version=0)
    out = c.handle(CasDone(prop.request, CasOutcome.OK, done, 0.0))
    assert only(out, ReadState), "it asks for the map as primary"
    [load] = only(out, LoadSubscriptions)
    c.handle(SubscriptionsLoaded(load.request, [], 0.0))
    [err] = only(pub(c, 1, T1, "u1"), SendError)
    assert (err.code, err.code.retriable) == (ErrorCode.UNAVAILABLE, True)
    hs = (seal(moving()[0], "g1", 0), SlotHistory("g1"))
    view(c, hs, 0.3, done)
    [moved] = only(pub(c, 3, T0, "u3", now=0.4), SendError)
    assert (moved.code, moved.group) == (ErrorCode.WRONG_GROUP, "g2")
