"""Answers to the core's ZooKeeper requests are taken only when they are fresh enough
(docs/replication.md M9): a subscriptions load read before the events that asked for a new
one, and a registration answering an offset of another era, never decide a subscription."""

from __future__ import annotations

from tests.unit.test_moves import T0, leading, only, pub, view
from tests.unit.test_readers import completed, delivered, sealed, sub, ticks
from tritonmq.core.actions import (
    LoadSubscriptions,
    RegisterSubscription,
    SendError,
    SendPurge,
    SendSubOk,
)
from tritonmq.core.events import (
    SubscriptionRegistered,
    SubscriptionsLoaded,
    Tick,
)
from tritonmq.wire.frames import ErrorCode, From, Sub


def test_a_load_read_before_the_move_completed_does_not_release_a_waiting_sub() -> None:
    """The loss of an acknowledged run at a slot's first move: g2 read the subscriptions
    while g1 still owned the slot (its answer lists nothing of it), became the owner, and a
    named `sub` waited for a fresh load. The old answer, sharing the request number of the
    fresh one, released it: `d` was created afresh at era 1, its registration answered g1's
    offset 50 (era 0) and g2 served it from 51, above every record of its era. Purge then
    removed them for good."""
    x = leading("x", "g2", ephemeral_grace=0.0)
    view(x, sealed(9), 0.1)
    [stale] = only(sub(x, Sub(1, T0, "d", From.LATEST), now=0.15), LoadSubscriptions)
    [fresh] = only(view(x, completed(9), 0.2), LoadSubscriptions)
    assert fresh.request != stale.request, "a load asked after the move is another request"
    pub(x, 1, T0, "n1", "n2", "n3", now=0.3)
    out = x.handle(SubscriptionsLoaded(stale.request, [], 0.4))
    assert not only(out, RegisterSubscription) and not only(out, SendSubOk), "read too early"
    # the fresh answer finds d at g1's era 0: pending here, its reader sent to g1
    out = x.handle(SubscriptionsLoaded(fresh.request, [(T0, "d", "broadcast", 50)], 0.5))
    if again := only(out, LoadSubscriptions):  # the waiting sub asks once more, then is sent
        out = x.handle(SubscriptionsLoaded(again[0].request, [(T0, "d", "broadcast", 50)], 0.6))
    [err] = only(out, SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g1")
    d = x.delivery.durables[(T0, "d")]
    assert d.pending and x.delivery.holds()[T0] == 0, "every record of era 1 kept for d"
    # g1 hands d on at era 1 from its start: g2 then serves every record of its era
    [load] = only(sub(x, Sub(2, T0, "d", From.LATEST), now=2.0), LoadSubscriptions)
    on = [(T0, "d", "broadcast", 0)]
    out = x.handle(SubscriptionsLoaded(load.request, on, 2.1, eras={(T0, "d"): 1}))
    assert only(out, SendSubOk) == [SendSubOk("reader", 2, 1, 1)]
    assert delivered(out) == [(1, 1), (1, 2), (1, 3)]


def test_a_registration_answering_another_eras_offset_is_not_taken_as_ours() -> None:
    """g2 loaded after the move completed and found no `d` (g1 registered it meanwhile, at
    era 0), so it declared `d` at era 1. ZooKeeper answers g1's offset 50 of era 0: taken as
    g2's ts it skipped every record of era 1. It is read again instead, found pending, and
    the reader is sent to g1, which serves era 0 and hands `d` on."""
    x = leading("x", "g2", ephemeral_grace=0.0)
    [load] = only(view(x, completed(9), 0.1), LoadSubscriptions)
    x.handle(SubscriptionsLoaded(load.request, [], 0.15))
    pub(x, 1, T0, "n1", "n2", "n3", now=0.2)
    [load] = only(sub(x, Sub(1, T0, "d", From.LATEST), now=0.3), LoadSubscriptions)
    [reg] = only(x.handle(SubscriptionsLoaded(load.request, [], 0.35)), RegisterSubscription)
    assert reg.era == 1
    out = x.handle(SubscriptionRegistered(T0, "d", 50, 0.4, era=0))
    assert not only(out, SendSubOk) and not delivered(out), "g1's ts, not ours"
    assert x.delivery.holds().get(T0, 0) == 0, "nothing of era 1 let go"
    [load] = only(out, LoadSubscriptions)
    out = x.handle(SubscriptionsLoaded(load.request, [(T0, "d", "broadcast", 50)], 0.5))
    [err] = only(out, SendError)
    assert (err.code, err.group) == (ErrorCode.WRONG_GROUP, "g1")
    assert x.delivery.durables[(T0, "d")].pending
    for now in (1.0, 40.0):  # past retention and the new primary's purge freeze
        purges = [p for p in only(ticks(x, now, 2), SendPurge) if T0 in dict(p.purge.topics)]
        assert not purges, "era 1 is kept for d"


def test_a_registration_of_our_own_era_is_taken_as_before() -> None:
    x = leading("x", "g2", ephemeral_grace=0.0)
    [load] = only(view(x, completed(9), 0.1), LoadSubscriptions)
    x.handle(SubscriptionsLoaded(load.request, [], 0.15))
    pub(x, 1, T0, "n1", "n2", now=0.2)
    [load] = only(sub(x, Sub(1, T0, "d", From.EARLIEST), now=0.3), LoadSubscriptions)
    [reg] = only(x.handle(SubscriptionsLoaded(load.request, [], 0.35)), RegisterSubscription)
    out = x.handle(SubscriptionRegistered(T0, "d", reg.offset, 0.4, era=reg.era))
    assert only(out, SendSubOk) == [SendSubOk("reader", 1, 1, 1)]
    assert delivered(out) == [(1, 1), (1, 2)]


def test_an_older_load_answer_arriving_after_a_newer_one_is_not_taken() -> None:
    """Two loads in flight (a pending subscription's poll, then an ask): the newer answer
    was taken; the older one, read before it, would put back what it saw then."""
    x = leading("x", "g2", ephemeral_grace=0.0)
    view(x, completed(9), 0.1)
    [first] = only(sub(x, Sub(1, T0, "d", From.LATEST), now=0.2), LoadSubscriptions)
    x.handle(SubscriptionsLoaded(first.request, [(T0, "d", "broadcast", 5)], 0.3))
    [poll] = only(x.handle(Tick(1.5)), LoadSubscriptions)
    [ask] = only(sub(x, Sub(2, T0, "d", From.LATEST), now=1.6), LoadSubscriptions)
    assert len({first.request, poll.request, ask.request}) == 3
    on = [(T0, "d", "broadcast", 0)]
    out = x.handle(SubscriptionsLoaded(ask.request, on, 1.7, eras={(T0, "d"): 1}))
    assert only(out, SendSubOk)
    d = x.delivery.durables[(T0, "d")]
    x.handle(SubscriptionsLoaded(poll.request, [(T0, "d", "broadcast", 5)], 1.8))
    assert not d.pending and d.era == 1, "the older answer changed nothing"
