"""Readers of a moved slot through BrokerCore (docs/replication.md M3, M4): the old group
serves an era until its seal point and then sends the reader on with WRONG_GROUP naming the
next era's group and where to go on from; the new group serves the next era from there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tests.unit.test_moves import NORMAL, T0, T1, leading, member, moving, only, pub, state, view
from tritonmq.config import BrokerConfig
from tritonmq.core.actions import (
    Action,
    Deliver,
    LoadSubscriptions,
    ProposeSlotStep,
    ProposeState,
    ReadState,
    RegisterSubscription,
    SendError,
    SendPurge,
    SendSubOk,
    StoreOffsets,
)
from tritonmq.core.broker import BrokerCore
from tritonmq.core.delivery import Delivery
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    OffsetsStored,
    SubscriptionRegistered,
    SubscriptionsLoaded,
    Tick,
    ZkView,
)
from tritonmq.core.log import GroupLog
from tritonmq.core.moves import SlotMoves
from tritonmq.core.readers import SlotReaders
from tritonmq.core.slothistory import SlotHistory, begin_move, complete, roll_back, seal
from tritonmq.core.slots import SlotMap
from tritonmq.wire.frames import Ack, Commit, ErrorCode, From, SharedState, SharedSub, Sub


def sub(c: BrokerCore, frame: Sub, now: float = 0.1, conn: str = "reader") -> list[Action]:
    return c.handle(ClientFrameIn(conn, frame, now))


def delivered(out: Sequence[Action]) -> list[tuple[int, int]]:
    """(era, ts) of every record delivered."""
    return [(d.era, r[0]) for d in only(out, Deliver) for r in d.records]


def sealed(until: int) -> tuple[SlotHistory, SlotHistory]:
    return (seal(moving()[0], "g1", until), SlotHistory("g1"))


def completed(until: int) -> tuple[SlotHistory, SlotHistory]:
    return (complete(sealed(until)[0], "g2"), SlotHistory("g1"))


def test_the_old_group_serves_the_era_to_its_seal_point_then_sends_the_reader_on() -> None:
    c = leading("a")
    sub(c, Sub(1, T0, None, From.LATEST))
    out = pub(c, 1, T0, "u1") + pub(c, 2, T1, "u2") + pub(c, 3, T0, "u3")
    assert delivered(out) == [(0, 1), (0, 3)]
    view(c, moving(), 0.2)
    view(c, sealed(3), 0.3)
    assert not only(c.handle(Tick(0.4)), SendError), "sealed only: it waits (a roll back goes on)"
    view(c, completed(3), 0.5)
    [err] = only(c.handle(Tick(0.6)), SendError)
    assert (err.code, err.sid, err.group, err.era, err.after) == (
        ErrorCode.WRONG_GROUP,
        1,
        "g2",
        1,
        0,
    )
    assert c.delivery.consumers == {}, "the subscription ended here"


def test_a_reader_is_sent_on_only_once_it_was_handed_every_record_up_to_the_seal() -> None:
    c = leading("a")
    out = sub(c, Sub(1, T0, None, From.LATEST, window=1))
    pub(c, 1, T0, "u1", "u2")
    view(c, completed(2), 0.2)
    assert not only(c.handle(Tick(0.3)), SendError), "record 2 is not handed out yet"
    out = c.handle(ClientFrameIn("reader", Ack(1, 1), 0.4))
    assert delivered(out) == [(0, 2)]
    [err] = only(c.handle(Tick(0.5)), SendError)
    assert (err.group, err.era, err.after) == ("g2", 1, 0)


def test_a_sealed_era_caps_the_reader_and_a_roll_back_lifts_the_cap() -> None:
    c = leading("a")
    sub(c, Sub(1, T0, None, From.LATEST))
    pub(c, 1, T0, "u1")
    view(c, sealed(1), 0.2)
    c.handle(Tick(0.3))
    view(c, (roll_back(sealed(1)[0]), SlotHistory("g1")), 0.4)
    c.handle(Tick(0.5))
    assert delivered(pub(c, 2, T0, "u2", now=0.6)) == [(0, 2)]


def test_a_late_reader_of_an_ended_era_is_sent_on_at_once_or_after_what_it_still_lacks() -> None:
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, completed(2), 0.2)
    [err] = only(sub(c, Sub(1, T0, None, 3, resume=True)), SendError)
    assert (err.code, err.sid, err.group, err.era, err.after) == (
        ErrorCode.WRONG_GROUP,
        1,
        "g2",
        1,
        0,
    )
    out = sub(c, Sub(2, T0, None, 2, resume=True))
    assert only(out, SendSubOk) == [SendSubOk("reader", 2, 2, 0)]
    assert delivered(out) == [(0, 2)]
    [err] = only(c.handle(Tick(0.3)), SendError)
    assert (err.sid, err.group, err.era) == (2, "g2", 1)


def test_the_new_group_serves_the_next_era_and_sends_a_reader_of_the_old_one_there() -> None:
    x = leading("x", "g2")
    view(x, completed(7), 0.1)
    [err] = only(sub(x, Sub(1, T0, None, 5, resume=True)), SendError)
    assert (err.code, err.group, err.era, err.after) == (ErrorCode.WRONG_GROUP, "g1", 0, 4)
    out = sub(x, Sub(2, T0, None, 1, resume=True, era=1))
    assert only(out, SendSubOk) == [SendSubOk("reader", 2, 1, 1)]
    assert delivered(pub(x, 1, T0, "n1", now=0.2)) == [(1, 1)]
    latest = only(sub(x, Sub(3, T0, None, From.LATEST), now=0.3), SendSubOk)
    assert latest == [SendSubOk("reader", 3, 2, 1)]
    [bad] = only(sub(x, Sub(4, T0, None, 1, era=5), now=0.4), SendError)
    assert bad.code is ErrorCode.BAD_REQUEST


def moved_back(until: int) -> tuple[SlotHistory, SlotHistory]:
    """g1 held era 0 up to ``until``, g2 era 1 (writing nothing), g1 holds era 2."""
    back = seal(begin_move(completed(until)[0], "g1"), "g2", 0)
    return (complete(back, "g1"), SlotHistory("g1"))


def test_a_group_holding_the_slot_again_serves_only_its_new_era() -> None:
    """g1 held era 0 up to ts 2, g2 era 1, g1 era 2 from its ts 2 on: g1's records of
    era 0 are not era 2's."""
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, moved_back(2), 0.2)
    out = sub(c, Sub(1, T0, None, 1, era=2))
    assert only(out, SendSubOk) == [SendSubOk("reader", 1, 3, 2)]
    assert delivered(out + pub(c, 2, T0, "u3", now=0.3)) == [(2, 3)]


# --- "earliest" on a moved slot: the oldest era still retained (M4) ----------------------


def test_earliest_at_the_owner_after_a_completed_move_is_sent_to_era_0s_group() -> None:
    x = leading("x", "g2")
    view(x, completed(7), 0.1)
    pub(x, 1, T0, "n1", now=0.2)
    [err] = only(sub(x, Sub(1, T0, None, From.EARLIEST), now=0.3), SendError)
    assert (err.code, err.sid, err.group, err.era, err.after) == (
        ErrorCode.WRONG_GROUP,
        1,
        "g1",
        0,
        0,
    )
    assert x.delivery.consumers == {}


def test_earliest_at_the_group_of_era_0_is_served_from_era_0_then_sent_on() -> None:
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, completed(2), 0.2)
    out = sub(c, Sub(1, T0, None, From.EARLIEST), now=0.3)
    assert only(out, SendSubOk) == [SendSubOk("reader", 1, 1, 0)]
    assert delivered(out) == [(0, 1), (0, 2)]
    [err] = only(c.handle(Tick(0.4)), SendError)
    assert (err.code, err.group, err.era, err.after) == (ErrorCode.WRONG_GROUP, "g2", 1, 0)


def test_earliest_at_the_group_holding_the_slot_again_reads_era_0_before_its_own() -> None:
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, moved_back(2), 0.2)
    pub(c, 2, T0, "u3", now=0.25)
    out = sub(c, Sub(1, T0, None, From.EARLIEST), now=0.3)
    assert only(out, SendSubOk) == [SendSubOk("reader", 1, 1, 0)]
    assert delivered(out) == [(0, 1), (0, 2)], "era 0 only: era 2's ts 3 comes after era 1"
    [err] = only(c.handle(Tick(0.4)), SendError)
    assert (err.group, err.era, err.after) == ("g2", 1, 0)
    # g2 wrote nothing in era 1 (its seal point is its after): it sends the reader back
    back = only(sub(c, Sub(2, T0, None, 3, era=2, resume=True), now=0.5), SendSubOk)
    assert back == [SendSubOk("reader", 2, 3, 2)]


def test_earliest_while_the_first_move_runs_reads_era_0_at_its_owner_as_before() -> None:
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, sealed(2), 0.2)
    out = sub(c, Sub(1, T0, None, From.EARLIEST), now=0.3)
    assert only(out, SendSubOk) == [SendSubOk("reader", 1, 1, 0)]
    assert delivered(out) == [(0, 1), (0, 2)]
    x = leading("x", "g2")
    view(x, sealed(2), 0.2)
    [err] = only(sub(x, Sub(1, T0, None, From.EARLIEST), now=0.3), SendError)
    assert (err.code, err.group, err.era) == (ErrorCode.WRONG_GROUP, "g1", None), "the owner's"


def test_earliest_passes_an_era_whose_records_are_all_purged_on_at_once() -> None:
    c = leading("a", ephemeral_grace=0.0)
    pub(c, 1, T0, "u1", "u2")
    for i in range(2, 6):  # nobody holds them: purged on ticks
        c.handle(Tick(i / 10))
    assert c.log.last_purged(T0) == 2
    view(c, completed(2), 0.6)
    [err] = only(sub(c, Sub(1, T0, None, From.EARLIEST), now=0.7), SendError)
    assert (err.code, err.group, err.era, err.after) == (ErrorCode.WRONG_GROUP, "g2", 1, 0)
    assert c.delivery.consumers == {}


# --- durable subscriptions (M5, M6) -------------------------------------------------------


def ticks(c: BrokerCore, start: float, n: int = 4) -> list[Action]:
    """``n`` ticks, each past the offset interval, ZooKeeper storing every offset asked."""
    out: list[Action] = []
    for i in range(n):
        now = start + 0.3 * i
        got = c.handle(Tick(now))
        for a in only(got, StoreOffsets):
            got += c.handle(OffsetsStored(a.offsets, True, now, a.eras))
        out += got
    return out


def test_the_old_group_hands_a_durable_subscription_on_once_its_era_is_acknowledged() -> None:
    c = leading("a")
    out = sub(c, Sub(1, T0, "d", From.LATEST))
    [reg] = only(out, RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1", "u2")
    view(c, completed(2), 0.2)
    c.handle(ClientFrameIn("reader", Ack(1, 1), 0.3))
    assert not only(ticks(c, 0.5), SendError), "record 2 is not acknowledged yet"
    assert c.delivery.holds()[T0] <= 1, "the sealed era is kept for it (M6)"
    c.handle(ClientFrameIn("reader", Ack(1, 2), 1.7))
    out = ticks(c, 2.0)
    store = only(out, StoreOffsets)[-1]
    assert (store.offsets, store.eras) == (((T0, "d", 0),), (1,)), "era 1, from its after"
    [err] = only(out, SendError)
    assert (err.code, err.sid, err.group, err.era) == (ErrorCode.WRONG_GROUP, 1, "g2", None)
    assert ("d" not in {n for _, n in c.delivery.durables}) and T0 not in c.delivery.holds()


def test_the_new_group_waits_for_the_offset_to_reach_its_era_before_serving_it() -> None:
    x = leading("x", "g2")
    view(x, completed(9), 0.1)
    [load] = only(sub(x, Sub(1, T0, "d", From.LATEST)), LoadSubscriptions)
    out = x.handle(SubscriptionsLoaded(load.request, [(T0, "d", "broadcast", 5)], 0.2))
    [err] = only(out, SendError)
    assert (err.code, err.group, err.era) == (ErrorCode.WRONG_GROUP, "g1", None)
    d = x.delivery.durables[(T0, "d")]
    assert (d.pending, d.offset, x.delivery.offsets_to_store()) == (True, 0, None)
    pub(x, 1, T0, "n1", now=0.3)
    assert x.delivery.holds()[T0] == 0, "nothing of its era is acknowledged (M5)"
    assert only(ticks(x, 1.5, 1), LoadSubscriptions), "it reads ZooKeeper again"
    [load] = only(sub(x, Sub(2, T0, "d", From.LATEST), now=2.0), LoadSubscriptions)
    moved_on = [(T0, "d", "broadcast", 0)]
    out = x.handle(SubscriptionsLoaded(load.request, moved_on, 2.1, eras={(T0, "d"): 1}))
    assert only(out, SendSubOk) == [SendSubOk("reader", 2, 1, 1)]
    assert delivered(out) == [(1, 1)]


def test_a_new_durable_earliest_at_a_group_holding_the_slot_again_starts_at_its_era() -> None:
    """g1 still holds era 0's ts 1 and 2 and writes era 2 from ts 3: a durable subscription
    it creates with earliest is at era 2, so it starts at ts 3, not at era 0's records
    (they would be handed out as era 2's, and era 1 skipped)."""
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, moved_back(2), 0.2)
    pub(c, 2, T0, "u3", now=0.25)
    for mode, name in (("broadcast", "b"), ("shared", "s")):
        frame = Sub(1, T0, name, From.EARLIEST, None, mode, member="m1")
        [load] = only(sub(c, frame, now=0.3), LoadSubscriptions)
        [reg] = only(c.handle(SubscriptionsLoaded(load.request, [], 0.4)), RegisterSubscription)
        assert (reg.era, reg.offset) == (2, 2), mode
        out = c.handle(SubscriptionRegistered(T0, name, reg.offset, 0.5, era=reg.era))
        assert delivered(out) == [(2, 3)], mode
        again = sub(c, frame, now=0.6)  # attaching again with earliest: the same era
        assert delivered(again) == [(2, 3)], mode


def test_a_durable_subscription_created_during_a_move_is_created_at_the_current_era() -> None:
    x = leading("x", "g2")
    view(x, completed(9), 0.1)
    [load] = only(sub(x, Sub(1, T0, "new", From.LATEST)), LoadSubscriptions)
    [reg] = only(x.handle(SubscriptionsLoaded(load.request, [], 0.2)), RegisterSubscription)
    assert (reg.topic, reg.name, reg.era) == (T0, "new", 1)
    c = leading("a")
    view(c, completed(9), 0.1)
    [load] = only(sub(c, Sub(1, T0, "new", From.LATEST)), LoadSubscriptions)
    [err] = only(c.handle(SubscriptionsLoaded(load.request, [], 0.2)), SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g2"), "not the old group's"


def test_a_shared_subscription_is_handed_on_once_its_low_watermark_passes_the_seal() -> None:
    c = leading("a")
    out = sub(c, Sub(1, T0, "s", From.LATEST, None, "shared", member="m1"))
    [reg] = only(out, RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "s", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1", "u2")
    view(c, completed(2), 0.2)
    assert not only(ticks(c, 0.5), SendError), "nothing acknowledged yet"
    c.handle(ClientFrameIn("reader", Ack(1, 2, (1,)), 1.7))
    out = ticks(c, 2.0)
    assert only(out, StoreOffsets)[-1].eras == (1,)
    [err] = only(out, SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g2")


def test_a_shared_subscription_at_the_new_group_hands_out_its_era_and_stores_it() -> None:
    """Its records say their era (else the client's acks, of another era, are dropped)."""
    x = leading("x", "g2")
    view(x, completed(9), 0.1)
    shared = Sub(1, T0, "work", From.LATEST, None, "shared", member="m1")
    [load] = only(sub(x, shared), LoadSubscriptions)
    x.handle(
        SubscriptionsLoaded(load.request, [(T0, "work", "shared", 0)], 0.2, {}, {(T0, "work"): 1})
    )
    out = pub(x, 1, T0, "n1", "n2", now=0.3) + ticks(x, 0.5, 2)
    assert delivered(out) == [(1, 1), (1, 2)]
    x.handle(ClientFrameIn("reader", Ack(1, 1, (2,)), 1.5))
    assert only(ticks(x, 1.6, 2), StoreOffsets)[-1] == StoreOffsets(
        ((T0, "work", 2),), (1,), fence=1
    )


def test_a_durable_subscription_handed_on_and_not_let_go_is_not_served_by_the_owner_again() -> None:
    """g1 held era 0 and owns era 2: a subscription it handed on to era 1 (g2's), its
    offset not yet stored, is g2's to serve, not a new one of g1's."""
    c = leading("a")
    out = sub(c, Sub(1, T0, "d", From.LATEST))
    [reg] = only(out, RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1")
    c.handle(ClientFrameIn("reader", Ack(1, 1), 0.2))
    back = seal(begin_move(completed(1)[0], "g1"), "g2", 0)
    view(c, (complete(back, "g1"), SlotHistory("g1")), 0.3)
    c.handle(Tick(0.35))  # handed on: era 1, not stored yet
    assert c.delivery.durables[(T0, "d")].era == 1
    [load] = only(sub(c, Sub(2, T0, "d", From.LATEST), now=0.4), LoadSubscriptions)
    out = c.handle(SubscriptionsLoaded(load.request, [(T0, "d", "broadcast", 1)], 0.5))
    [err] = only(out, SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g2")


def test_a_subscription_a_commit_creates_at_the_owner_of_a_moved_slot_is_at_its_era() -> None:
    """Spark's source commits to the owner: its subscription is the owner's, at the current
    era, kept (not taken for an older era's and let go)."""
    x = leading("x", "g2")
    view(x, completed(9), 0.1)
    pub(x, 1, T0, "n1", "n2", now=0.2)
    [load] = only(x.handle(ClientFrameIn("spark", Commit(5, T0, "q", 1), 0.3)), LoadSubscriptions)
    out = x.handle(SubscriptionsLoaded(load.request, [], 0.3))  # not held at an older era
    [reg] = only(out, RegisterSubscription)
    assert reg.era == 1
    x.handle(SubscriptionRegistered(T0, "q", reg.offset, 0.4, era=reg.era))
    ticks(x, 0.5)
    d = x.delivery.durables[(T0, "q")]
    assert (d.era, d.offset) == (1, 1) and x.delivery.holds()[T0] == 1


def test_a_new_owner_reads_the_subscriptions_again_before_it_purges_the_moved_topic() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_the_new_owner_purges_nothing_before_it_reloaded_the_subscriptions`: g2 read ZooKeeper while the move
    ran (subscription d, stored at era 0, was then g1's alone), became the owner on
    `complete` and purged its era's records before d got there. The owner holds one stored
    at an older era pending (M5): it must read the subscriptions again first."""
    x = leading("x", "g2")
    view(x, sealed(9), 0.1)
    out = view(x, completed(9), 0.2)
    pub(x, 1, T0, "n1", "n2", now=0.3)
    out += ticks(x, 40.0, 3)  # past the purge freeze of a new primary and the retention
    assert not [p for p in only(out, SendPurge) if T0 in dict(p.purge.topics)], "d needs them"
    [load] = only(out, LoadSubscriptions)
    found = [(T0, "d", "broadcast", 9)]
    x.handle(SubscriptionsLoaded(load.request, found, 41.0))
    assert x.delivery.durables[(T0, "d")].pending and x.delivery.holds()[T0] == 0


# --- a new era's owner reads the subscriptions before it purges (Spark, retention 0) ---


def purged(out: Sequence[Action]) -> dict[str, int]:
    return {t: upto for p in only(out, SendPurge) for t, upto in p.purge.topics}


def test_the_new_owner_purges_none_of_its_era_before_it_read_the_subscriptions() -> None:
    x = leading("x", "g2", ephemeral_grace=0.0)
    [load] = only(view(x, completed(9), 0.1), LoadSubscriptions)
    pub(x, 1, T0, "n1", "n2", now=0.2)
    assert T0 not in purged(ticks(x, 0.3)), "nothing purged before the subscriptions are read"
    held = [(T0, "q", "broadcast", 5)]  # stored at era 0: g1's until it hands it on
    x.handle(SubscriptionsLoaded(load.request, held, 1.0))
    assert x.delivery.durables[(T0, "q")].pending
    assert T0 not in purged(ticks(x, 1.1)), "its era is kept for the pending subscription"


def test_a_group_that_moved_its_era_on_keeps_it_for_a_subscription_of_an_older_era() -> None:
    """g1 held era 0 (up to ts 9), g2 era 1 (up to ts 2), g3 holds era 2. `q` is stored at
    era 0, so it needs every record of g2's era 1. A primary of g2 elected after the slot
    went on to g3 loaded `q` as another group's and held nothing of era 1 for it, and
    purged it for nobody (simulator scenario `tests/sim/test_scenarios.py::test_a_group_that_moved_its_era_on_keeps_it_for_a_subscription_of_an_older_era`: a subscription still at era 0 while the slot went g0 -> g1 -> g2). It
    is pending at g2's era (M5) until its offset reaches it, then served here."""
    on = complete(seal(begin_move(completed(9)[0], "g3"), "g2", 2), "g3")
    hs = (on, SlotHistory("g1"))
    y = BrokerCore(BrokerConfig(id="y", group="g2", min_insync=1), member("y"))
    smap = SlotMap(tuple(h.owner for h in hs))
    [prop] = only(y.handle(ZkView(None, {"y": member("y")}, smap, 0.0, hs)), ProposeState)
    out = y.handle(CasDone(prop.request, CasOutcome.OK, replace(prop.state, version=0), 0.0))
    [load] = only(out, LoadSubscriptions)
    y.handle(SubscriptionsLoaded(load.request, [(T0, "q", "broadcast", 5)], 0.1))
    q = y.delivery.durables.get((T0, "q"))
    assert q is not None and (q.pending, q.era, q.stored_era) == (True, 1, 0)
    assert y.delivery.holds()[T0] == 0, "every record of era 1 is kept for q"
    assert y.delivery.offsets_to_store() is None, "g1 writes q's offset, not g2"
    [load] = only(ticks(y, 1.5, 1), LoadSubscriptions)  # it reads ZooKeeper again
    handed = SubscriptionsLoaded(
        load.request, [(T0, "q", "broadcast", 0)], 1.6, eras={(T0, "q"): 1}
    )
    y.handle(handed)
    assert (q.pending, q.era, q.offset) == (False, 1, 0), "handed on to era 1: served here"


def test_a_view_that_brings_no_new_era_asks_for_no_load() -> None:
    x = leading("x", "g2", ephemeral_grace=0.0)
    view(x, completed(9), 0.1)
    assert not only(view(x, completed(9), 0.2), LoadSubscriptions)
    c = leading("a", ephemeral_grace=0.0)
    assert not only(view(c, completed(9), 0.1), LoadSubscriptions), "g1 owns no new era"


def handed_on_holding_again() -> tuple[BrokerCore, LoadSubscriptions, StoreOffsets]:
    """g1, which held era 0 of T0's slot (ts 1 acknowledged by durable `d`) and holds era 2
    again after g2's era 1: its reload asked for, and the hand-on of `d` to era 1 on its way
    to ZooKeeper."""
    c = leading("a")
    [reg] = only(sub(c, Sub(1, T0, "d", From.LATEST)), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1")
    c.handle(ClientFrameIn("reader", Ack(1, 1), 0.2))
    back = seal(begin_move(completed(1)[0], "g1"), "g2", 0)
    [load] = only(view(c, (complete(back, "g1"), SlotHistory("g1")), 0.3), LoadSubscriptions)
    [store] = only(c.handle(Tick(0.35)), StoreOffsets)
    return c, load, store


def test_a_group_holding_the_slot_again_keeps_a_subscription_it_handed_on_pending() -> None:
    """g1 held era 0 (up to ts 1), g2 era 1, g1 holds era 2 again. g1 hands `d` on to era 1
    once ts 1 is acknowledged; its reload as the new owner read ZooKeeper before that
    hand-on was stored (era 0 there). Once stored, g1 let `d` go as another group's, and
    purged era 2's records that `d`, stored at era 1, still needs: as the owner it holds
    `d` pending (M5) until the offset reaches its era."""
    c, load, store = handed_on_holding_again()  # handed on: era 1, not stored yet
    assert (store.offsets, store.eras) == (((T0, "d", 0),), (1,))
    c.handle(SubscriptionsLoaded(load.request, [(T0, "d", "broadcast", 1)], 0.4))
    c.handle(OffsetsStored(store.offsets, True, 0.45, store.eras))  # now stored
    out = ticks(c, 0.5) + pub(c, 2, T0, "u2", now=1.8) + ticks(c, 2.0)
    d = c.delivery.durables.get((T0, "d"))
    assert d is not None and d.pending and d.stored_era == 1
    assert c.delivery.holds()[T0] <= 1, "era 2's ts 2 is kept for it"
    assert purged(out).get(T0, 0) <= 1


def test_a_subscription_pending_at_a_group_holding_the_slot_again_writes_no_offset() -> None:
    """As above, but g1's reload reads `d` at era 1 while the write of its hand-on is still
    on its way: pending, it holds era 2 from its start (ts 1, not era 1's ts 0), and the
    hand-on's late `stored` does not make it write (era 2, ts 0), which g1 took for its own
    later and served era 0's records again as era 2's (simulator scenario `tests/sim/test_scenarios.py::test_a_subscription_pending_at_a_group_holding_the_slot_again_writes_no_offset`: `g0s5 received g0p2:10 twice`)."""
    c, load, store = handed_on_holding_again()  # handed on: (era 1, ts 0)
    era1 = {(T0, "d"): 1}
    c.handle(SubscriptionsLoaded(load.request, [(T0, "d", "broadcast", 0)], 0.4, eras=era1))
    d = c.delivery.durables[(T0, "d")]
    assert (d.pending, d.era, d.stored_era, d.offset) == (True, 2, 1, 1)
    c.handle(OffsetsStored(store.offsets, True, 0.45, store.eras))  # the hand-on, stored
    out = ticks(c, 0.5)
    assert not only(out, StoreOffsets), "pending: g2 writes it, not g1"
    assert (d.pending, d.offset) == (True, 1)


def test_the_old_group_creates_no_durable_subscription_while_the_move_runs() -> None:
    """Created at the old group while the slot moves (at the era that ends), a subscription
    the new group's reload (at `complete`) read before its registration landed is unknown
    there: the new owner purges its era for nobody. The old group refuses a new durable
    `sub` of the moving slot with the retriable UNAVAILABLE: the client retries and reaches
    the new owner once the move completed (or this group again after a roll back)."""
    for hs in (moving(), sealed(2)):
        c = leading("a")
        pub(c, 1, T0, "u1", "u2")
        view(c, hs, 0.2)
        for mode in ("broadcast", "shared"):
            frame = Sub(1, T0, f"new-{mode}", From.LATEST, None, mode, member="m1")
            [load] = only(sub(c, frame, now=0.3), LoadSubscriptions)
            out = c.handle(SubscriptionsLoaded(load.request, [], 0.4))
            assert not only(out, RegisterSubscription), (hs[0].state, mode)
            [err] = only(out, SendError)
            assert (err.code, err.sid, err.code.retriable) == (ErrorCode.UNAVAILABLE, 1, True)
            assert (T0, f"new-{mode}") not in c.delivery.durables
    # one that exists is served as before, and after a roll back a new one is created
    c = leading("a")
    [reg] = only(sub(c, Sub(1, T0, "d", From.LATEST)), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.1, era=reg.era))
    view(c, sealed(2), 0.2)
    assert only(sub(c, Sub(2, T0, "d", From.LATEST), now=0.3), SendSubOk)
    view(c, (roll_back(sealed(2)[0]), SlotHistory("g1")), 0.5)
    assert only(sub(c, Sub(3, T0, "new", From.LATEST), now=0.6), RegisterSubscription)


def test_attaching_with_earliest_moves_no_durable_offset_over_other_topics_records() -> None:
    """g1 holds era 2 of T0's slot again. A new durable `earliest` subscription is declared
    while T0 has no record of era 2 (at the commit point, ts 2); before its registration
    lands the group commits T1's ts 3, 4 and T0's ts 5. Attached then, it starts at ts 5,
    but its offset stays 2 until ts 5 is acknowledged: the start was the era's oldest
    record, taken as a position, and the offset jumped to 4, ahead of every
    acknowledgement (simulator scenario `tests/sim/test_scenarios.py::test_attaching_with_earliest_on_a_moved_slot_moves_no_offset_over_other_topics_ts`:
    `offset era 2 ts 24 of g2.m/ml stored, acknowledged only ts 0`)."""
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")  # era 0
    view(c, moved_back(2), 0.2)
    [load] = only(sub(c, Sub(1, T0, "b", From.EARLIEST), now=0.3), LoadSubscriptions)
    [reg] = only(c.handle(SubscriptionsLoaded(load.request, [], 0.4)), RegisterSubscription)
    assert (reg.era, reg.offset) == (2, 2)
    pub(c, 2, T1, "v1", "v2", now=0.45)
    pub(c, 3, T0, "u3", now=0.46)
    out = c.handle(SubscriptionRegistered(T0, "b", reg.offset, 0.5, era=reg.era))
    assert delivered(out) == [(2, 5)]
    assert c.delivery.durables[(T0, "b")].offset == 2
    assert not only(ticks(c, 0.6), StoreOffsets)


def test_a_shared_subscription_pending_at_the_owner_starts_afresh_at_its_era() -> None:
    """g2 owns era 1 (its ts > 0). What its backups last heard of shared subscription
    `work` (replicated, era-less) has g1's ts: offset 30, cursor 31, from when a primary of
    g2 had handed it on. Restored from that when g2 loads it pending (stored at era 0), its
    cursor stayed 31: once the offset reached era 1 its members were handed nothing below
    ts 31 and the offset jumped to 30, over era 1's ts 1..3 (simulator scenario `tests/sim/test_scenarios.py::test_a_shared_subscription_pending_at_the_owner_starts_afresh_at_its_era`:
    `offset era 3 ts 30 of g1.m/mls stored
    ahead of its acks`). Nothing of its era was handed out while it was pending: it starts
    afresh there."""
    from tritonmq.wire.frames import SharedSub

    x = leading("x", "g2", ephemeral_grace=0.0)
    x.delivery.mirror.keep([SharedSub(T0, "work", 30, 31, (), (), (), ())])
    view(x, completed(9), 0.1)
    pub(x, 1, T0, "n1", "n2", "n3", now=0.2)
    shared = Sub(1, T0, "work", From.LATEST, None, "shared", member="m1")
    [load] = only(sub(x, shared, now=0.3), LoadSubscriptions)
    at_era_0 = [(T0, "work", "shared", 5)]
    [err] = only(x.handle(SubscriptionsLoaded(load.request, at_era_0, 0.4)), SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g1")
    [load] = only(sub(x, shared, now=0.5), LoadSubscriptions)
    at_era_1 = [(T0, "work", "shared", 0)]
    out = x.handle(SubscriptionsLoaded(load.request, at_era_1, 0.6, eras={(T0, "work"): 1}))
    out += ticks(x, 0.7, 2)
    assert delivered(out) == [(1, 1), (1, 2), (1, 3)]
    assert x.delivery.durables[(T0, "work")].offset == 0


def test_a_durable_resume_below_its_era_at_a_group_holding_the_slot_again_reads_only_its_era() -> (
    None
):
    """g1 holds era 2 from its ts 2 on and still retains era 0's ts 1, 2. A subscriber of
    durable `d` (at era 2) resumes from (era 2, ts 1), having been handed nothing: g1 served
    ts 1, 2 as era 2's and lowered the offset to 0 (simulator scenario `tests/sim/test_scenarios.py::test_a_durable_resume_below_its_era_at_a_group_holding_the_slot_again_reads_only_its_era`: `g2s9 got g2.m ts 1 from g2 in era 2, outside the eras g2
    held`). A start within the era is no lower than its first ts, as for unnamed readers."""
    c = leading("a")
    pub(c, 1, T0, "u1", "u2")
    view(c, moved_back(2), 0.2)
    [load] = only(sub(c, Sub(1, T0, "d", From.LATEST), now=0.3), LoadSubscriptions)
    [reg] = only(c.handle(SubscriptionsLoaded(load.request, [], 0.4)), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.5, era=reg.era))
    pub(c, 2, T0, "u3", now=0.6)
    out = sub(c, Sub(2, T0, "d", 1, resume=True, era=2), now=0.7, conn="again")
    assert delivered(out) == [(2, 3)]
    assert c.delivery.durables[(T0, "d")].offset == 2


def test_the_old_group_seals_only_once_zookeeper_holds_its_subscriptions_of_the_slot() -> None:
    """A durable subscription declared just before the move began, its registration still
    on its way (a ZooKeeper cut, retried), was unknown to the new owner, whose reload at
    `complete` read ZooKeeper before it landed: the owner purged its era for nobody
    (simulator scenario `tests/sim/test_scenarios.py::test_the_old_group_seals_only_once_zookeeper_holds_its_subscriptions_of_the_slot`: `g0.m purged up to
    66 in g2; ml never received era 1 ts 49`). The old primary seals only once ZooKeeper
    holds every durable subscription of the slot it declared (it declares none after the
    move began), so `complete` and the new owner's reload come after."""
    c = leading("a")
    [reg] = only(sub(c, Sub(1, T0, "d", From.LATEST)), RegisterSubscription)
    pub(c, 1, T0, "u1")
    out = view(c, moving(), 0.2) + c.handle(Tick(0.3)) + c.handle(Tick(0.5))
    assert not only(out, ProposeSlotStep), "d is not in ZooKeeper yet"
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.6, era=reg.era))
    [step] = only(c.handle(Tick(0.7)), ProposeSlotStep)
    assert step.slot == 0


def test_a_roll_back_delivers_what_was_written_before_the_cap_was_lifted() -> None:
    """A sealed era caps its readers at the seal point; rolled back, the old group writes
    the slot again. A record committed after the roll back's view but before the tick that
    lifts the caps was pushed to nobody, and nothing pushed it after: with no later record
    the durable subscriber never got it (simulator scenario `tests/sim/test_scenarios.py::test_a_roll_back_delivers_what_was_written_before_the_cap_was_lifted`: `md of g1.m never received acked era 1 ts 118`). Lifting a
    cap pumps the readers it lifts."""
    c = leading("a")
    [reg] = only(sub(c, Sub(1, T0, "d", From.LATEST)), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.1, era=reg.era))
    unnamed = sub(c, Sub(2, T0, None, From.LATEST), now=0.1, conn="other")
    assert only(unnamed, SendSubOk)
    pub(c, 1, T0, "u1", "u2", now=0.15)
    view(c, sealed(2), 0.2)
    c.handle(Tick(0.3))  # capped at 2
    view(c, (roll_back(sealed(2)[0]), SlotHistory("g1")), 0.4)
    out = pub(c, 2, T0, "u3", now=0.45)  # committed while the caps still hold
    out += c.handle(Tick(0.5))
    assert sorted(delivered(out)) == [(0, 3), (0, 3)]


def test_a_stored_hand_on_purges_nothing_of_a_later_era_we_hold_for_it() -> None:
    """Slot 0: era 0 g2 (up to its ts 5), era 1 g1, era 2 g2 (from its ts 5), era 3 g1 (from
    its ts 1). g1 hands `d` on to era 2 at that era's start, (2, 5): g2's ts. When the write
    of that hand-on came back stored, g1 purged at once, before the tick that holds `d`
    pending for era 3, holding only its offset, 5, in g1's ts: era 3's ts 2 and 3 went, which
    `d` never received (`g0.m purged up to 27 in g2; md never received era 3 ts 22`; simulator
    scenario `tests/sim/test_scenarios.py::test_a_stored_hand_on_purges_nothing_of_a_later_era_we_hold_for_it`)."""
    g2_era0 = seal(begin_move(SlotHistory("g2"), "g1"), "g2", 5)
    era1 = complete(g2_era0, "g1")
    era2 = complete(seal(begin_move(era1, "g2"), "g1", 1), "g2")
    era3 = complete(seal(begin_move(era2, "g1"), "g2", 5), "g1")
    c = leading("a", ephemeral_grace=0.0)
    [load] = only(view(c, (era1, SlotHistory("g1")), 0.1), LoadSubscriptions)
    c.handle(SubscriptionsLoaded(load.request, [], 0.1))
    [load] = only(sub(c, Sub(1, T0, "d", From.LATEST), now=0.2), LoadSubscriptions)
    [reg] = only(c.handle(SubscriptionsLoaded(load.request, [], 0.2)), RegisterSubscription)
    assert reg.era == 1
    c.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.2, era=reg.era))
    pub(c, 1, T0, "u1", now=0.3)
    c.handle(ClientFrameIn("reader", Ack(1, 1), 0.4))
    [load] = only(view(c, (era3, SlotHistory("g1")), 0.5), LoadSubscriptions)
    era_1 = {(T0, "d"): 1}
    c.handle(SubscriptionsLoaded(load.request, [(T0, "d", "broadcast", 1)], 0.5, eras=era_1))
    pub(c, 2, T0, "u2", "u3", now=0.6)  # era 3's ts 2 and 3
    [store] = only(c.handle(Tick(0.7)), StoreOffsets)
    assert (store.offsets, store.eras) == (((T0, "d", 5),), (2,)), "handed on to era 2"
    out = c.handle(OffsetsStored(store.offsets, True, 0.8, store.eras))
    out += ticks(c, 1.0)
    assert purged(out).get(T0, 0) <= 1, "era 3's records are kept for d"
    d = c.delivery.durables[(T0, "d")]
    assert (d.pending, d.era, d.stored_era) == (True, 3, 2)


def test_a_load_read_before_a_stored_hand_on_does_not_bring_the_subscription_back() -> None:
    """g1 hands shared `s` on to era 1 (g2's); a `sub` of it asks ZooKeeper again, which
    answers what it held before the hand-on was written, (era 0, ts 0), only after the
    write came back stored and g1 let `s` go. Taken as found, `s` was g1's again at its
    last stored offset, ts 0, and ts 1 and 2 went out a second time, to another member (`g3s8
    received g3p2:13 (ts 46), which g3s7 of shared subscription ms had received`; simulator
    scenario `tests/sim/test_scenarios.py::test_a_load_read_before_a_stored_hand_on_does_not_bring_the_subscription_back`)."""
    c = leading("a")
    out = sub(c, Sub(1, T0, "s", From.LATEST, None, "shared", member="m1"))
    [reg] = only(out, RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "s", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1", "u2")
    c.handle(ClientFrameIn("reader", Ack(1, 2, (1,)), 0.15))
    view(c, completed(2), 0.2)
    [store] = only(c.handle(Tick(0.3)), StoreOffsets)
    assert (store.offsets, store.eras) == (((T0, "s", 0),), (1,)), "handed on to era 1"
    again = Sub(2, T0, "s", From.LATEST, None, "shared", member="m2")
    [load] = only(sub(c, again, now=0.35, conn="other"), LoadSubscriptions)
    c.handle(OffsetsStored(store.offsets, True, 0.4, store.eras))  # let go
    stale = [(T0, "s", "shared", 0)]  # read before the hand-on was stored: era 0
    out = c.handle(SubscriptionsLoaded(load.request, stale, 0.45))
    assert not delivered(out + ticks(c, 0.5))
    [err] = only(out, SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g2")
    assert (T0, "s") not in c.delivery.durables


def test_a_load_read_before_a_stored_hand_on_leaves_it_pending_at_a_group_holding_again() -> None:
    """As above, at g1 holding era 2 again: `d`, let go pending for era 2 when its hand-on
    to era 1 was stored, stays pending when a load read before that store answers."""
    c, load, store = handed_on_holding_again()
    c.handle(OffsetsStored(store.offsets, True, 0.4, store.eras))  # pending for era 2
    c.handle(SubscriptionsLoaded(load.request, [(T0, "d", "broadcast", 1)], 0.45))
    d = c.delivery.durables[(T0, "d")]
    assert (d.pending, d.era, d.stored_era) == (True, 2, 1)
    out = ticks(c, 0.5)
    assert not only(out, StoreOffsets), "pending: g2 writes it, not g1"


def test_a_load_naming_an_era_the_view_has_not_seen_is_read_again_once_the_view_has_it() -> None:
    """A new primary whose view of the slots is older than ZooKeeper's subscriptions: `d`
    is stored at era 1 (g2's, handed on by g1's previous primary), but the view still shows
    the slot never moved. Taken as found, `d` was g1's at offset 0 of era 0, held era 0's
    records for good (its members had gone on) and kept g1's other brokers, which had
    purged them, out of the ISR: a producer's batch waited forever for in-sync replicas
    (simulator scenario `tests/sim/test_scenarios.py::test_a_load_naming_an_era_the_view_has_not_seen_is_read_again`)."""
    cfg = BrokerConfig(id="a", group="g1", min_insync=1, ephemeral_grace=0.0)
    c = BrokerCore(cfg, member("a"))
    [prop] = only(c.handle(ZkView(None, {"a": member("a")}, None, 0.0)), ProposeState)
    won = replace(prop.state, version=0)
    [load] = only(c.handle(CasDone(prop.request, CasOutcome.OK, won, 0.0)), LoadSubscriptions)
    view(c, NORMAL, 0.0, state(1, "a", "a"))  # the slots as we saw them before we were cut off
    pub(c, 1, T0, "u1", "u2")
    handed = [(T0, "d", "broadcast", 0)]
    out = c.handle(SubscriptionsLoaded(load.request, handed, 0.2, eras={(T0, "d"): 1}))
    assert (T0, "d") not in c.delivery.durables and not c.durables_ready
    assert only(out, ReadState), "it asks for a fresh view"
    assert T0 not in purged(ticks(c, 0.3, 1)), "nothing purged before the subscriptions are read"
    view(c, completed(2), 0.5)
    [again] = only(ticks(c, 0.6, 1), LoadSubscriptions)
    c.handle(SubscriptionsLoaded(again.request, handed, 0.7, eras={(T0, "d"): 1}))
    assert c.durables_ready and (T0, "d") not in c.delivery.durables, "g2's, not ours"
    assert purged(ticks(c, 0.8, 2)).get(T0) == 2, "era 0 is let go of: d read it all"


def test_a_new_primary_hands_on_again_what_its_predecessor_handed_on_and_did_not_store() -> None:
    """g1's primary handed shared `s` on to era 1 (g2's): everything of era 0 was
    acknowledged, and its backups' mirror says so (era 1, from era 1's `after`). The store
    of the hand-on was lost with it; ZooKeeper still holds (era 0, 3). The backup elected
    next hands it on again. Served from ts 3, its members were handed era 0's records a
    second time, another member than had them (simulator scenario `tests/sim/test_scenarios.py::test_a_new_primary_hands_on_again_what_its_predecessor_handed_on_and_did_not_store`)."""
    hs = completed(9)
    moves = SlotMoves("g1", None)
    moves.viewed(hs, 1)
    readers = SlotReaders(moves)
    delivery = Delivery(GroupLog(), window=4, window_bytes=1 << 20)
    after = hs[0].after_of(1)
    handed = SharedSub(T0, "s", after, after + 1, (), (), (), (), era=1)
    delivery.mirror.adopt(SharedState(1, (handed,)))
    readers.load(delivery, SubscriptionsLoaded(1, [(T0, "s", "shared", 3)], 1.0), start_ts=10)
    d = delivery.durables[(T0, "s")]
    assert (d.era, d.offset) == (1, after)
    assert delivery.offsets_to_store() == StoreOffsets(((T0, "s", after),), (1,))
    delivery.stored(((T0, "s", after),), (1,))
    readers.stored(delivery, ((T0, "s", after),))
    assert (T0, "s") not in delivery.durables, "let go once stored"
