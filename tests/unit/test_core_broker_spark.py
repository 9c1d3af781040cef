"""BrokerCore's Spark support, driven by events alone: published times on fetch and
append, fetch ranges below what is retained, commit that registers a subscription, meta."""

from __future__ import annotations

import dataclasses

from tests.unit.test_core_broker import (
    LINK_B,
    attach,
    core,
    following,
    leading,
    members,
    only,
    purged_leader,
    recs,
    state,
)
from tritonmq.core.actions import (
    LoadSubscriptions,
    ProposeState,
    RegisterSubscription,
    SendCommitted,
    SendEntries,
    SendError,
    SendFetched,
    SendMeta,
    StoreOffsets,
)
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    SubscriptionRegistered,
    SubscriptionsLoaded,
    Tick,
    ZkView,
)
from tritonmq.wire.frames import (
    Commit,
    ErrorCode,
    Fetch,
    Meta,
    Pub,
)


def test_a_batch_is_dated_by_the_wall_clock_of_its_event_and_fetch_and_append_carry_it() -> None:
    c = leading(isr="a", live="ab", replicas=1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2")), 0.1, wall_ms=1000))
    c.handle(ClientFrameIn("prod", Pub(2, "t", recs("u3")), 0.2, wall_ms=2000))
    [got] = only(c.handle(ClientFrameIn("spark", Fetch(7, "t", 2, 10, 100), 0.3)), SendFetched)
    assert [r[0] for r in got.records] == [2, 3] and got.next_ts == 4
    assert got.published == ((1, 1000), (3, 2000)) and got.purged is None
    [entries] = only(attach(c, "b", LINK_B, 0.4), SendEntries)
    assert c.entries_for(entries.start, entries.end)[1] == [(1, 1000), (3, 2000)]


def test_a_fetch_below_what_is_retained_names_the_missing_range_or_skips_it() -> None:
    c = purged_leader()
    c.handle(ClientFrameIn("prod", Pub(2, "t", recs("u4")), 1.05))
    [err] = only(c.handle(ClientFrameIn("spark", Fetch(9, "t", 2, 10, 100), 1.1)), SendError)
    assert (err.code, err.id, err.first, err.last) == (ErrorCode.PURGED, 9, 2, 3)
    assert "'t'" in err.message and "g1" in err.message
    skip = Fetch(10, "t", 2, 10, 100, skip_purged=True)
    [got] = only(c.handle(ClientFrameIn("spark", skip, 1.2)), SendFetched)
    assert got.purged == 3 and [r[0] for r in got.records] == [4]
    empty = Fetch(11, "t", 2, 1, 100)  # an empty range loses nothing: no error
    assert only(c.handle(ClientFrameIn("spark", empty, 1.3)), SendFetched)


def test_a_commit_registers_a_new_subscription_and_answers_once_zookeeper_holds_it() -> None:
    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3")), 0.1))
    out = c.handle(ClientFrameIn("spark", Commit(5, "t", "q", 2), 0.2))
    assert out == [RegisterSubscription("t", "q", "broadcast", 2, fence=1)]
    again = c.handle(ClientFrameIn("spark2", Commit(6, "t", "q", 1), 0.25))
    assert again == [], "one registration in flight answers both"
    done = c.handle(SubscriptionRegistered("t", "q", 2, 0.3))
    assert done == [SendCommitted("spark", 5, 2, 3), SendCommitted("spark2", 6, 2, 3)]
    [jump] = c.handle(ClientFrameIn("spark", Commit(7, "t", "q", 9), 0.4))
    assert isinstance(jump, SendError) and jump.code is ErrorCode.BAD_REQUEST  # no jumps
    assert c.handle(ClientFrameIn("spark", Commit(7, "t", "q", 3), 0.4)) == [
        SendCommitted("spark", 7, 3, 3)  # up to the commit point, answered at once
    ]
    # purge waits for ZooKeeper to hold the new offset
    assert c.delivery.holds() == {"t": 2}
    assert c.delivery.offsets_to_store() == StoreOffsets((("t", "q", 3),))


def test_a_commit_whose_registration_failed_is_refused_retriably_and_registers_on_retry() -> None:
    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("spark", Commit(5, "t", "q", 0), 0.1))
    [err] = c.handle(SubscriptionRegistered("t", "q", None, 0.2))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.UNAVAILABLE, 5)
    assert err.code.retriable
    retry = c.handle(ClientFrameIn("spark", Commit(6, "t", "q", 0), 0.3))
    assert retry == [RegisterSubscription("t", "q", "broadcast", 0, fence=1)]


def test_subscription_and_offset_writes_are_fenced_by_the_group_state_the_primary_holds() -> None:
    """A primary deposed while alive (its successor loaded the subscriptions before it
    heard) registered a subscription the successor never learned of, and the successor
    purged what it needed (simulator scenario `tests/sim/test_scenarios.py::test_a_subscription_a_deposed_primary_registered_is_taken_at_zookeeper_s_offset`). Each registration and offset write names
    the group state's version the primary holds, and ZooKeeper takes it only while the
    state is still there; a retry names the version held then (our own CAS moves it)."""
    c = leading(isr="a", live="a", replicas=1)
    [reg] = c.handle(ClientFrameIn("spark", Commit(5, "t", "q", 0), 0.1))
    assert isinstance(reg, RegisterSubscription) and reg.fence == 1
    c.handle(SubscriptionRegistered("t", "q", None, 0.2))  # fenced out, or lost: failed
    c.handle(ZkView(state(1, "a", "a", version=2), members("a"), None, 0.3))
    [again] = only(c.handle(Tick(0.8)), RegisterSubscription)
    assert again.fence == 2
    c.handle(SubscriptionRegistered("t", "q", 0, 0.9))
    c.handle(ClientFrameIn("app", Pub(1, "t", recs("u1")), 1.0))
    c.handle(ClientFrameIn("spark", Commit(6, "t", "q", 1), 1.1))
    [store] = only(c.handle(Tick(1.5)), StoreOffsets)
    assert (store.offsets, store.fence) == ((("t", "q", 1),), 2)


def test_a_commit_waits_for_a_new_primary_to_load_subscriptions_and_is_refused_elsewhere() -> None:
    c = core("a", replicas=1)
    [prop] = only(c.handle(ZkView(None, members("a"), None, 0.0)), ProposeState)
    won = dataclasses.replace(prop.state, version=0)
    [load] = only(c.handle(CasDone(prop.request, CasOutcome.OK, won, 0.0)), LoadSubscriptions)
    assert c.handle(ClientFrameIn("spark", Commit(5, "t", "q", 0), 0.1)) == []
    out = c.handle(SubscriptionsLoaded(load.request, [("t", "q", "broadcast", 0)], 0.3))
    assert only(out, SendCommitted) == [SendCommitted("spark", 5, 0, 0)]
    b = following()
    [err] = b.handle(ClientFrameIn("spark", Commit(6, "t", "q", 0), 0.1))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.NOT_PRIMARY, 6)


def test_meta_reports_the_commit_point_and_the_topics_held() -> None:
    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("prod", Pub(1, "b-topic", recs("u1")), 0.1))
    c.handle(ClientFrameIn("prod", Pub(2, "a-topic", recs("u2")), 0.1))
    [meta] = only(c.handle(ClientFrameIn("spark", Meta(3), 0.2)), SendMeta)
    assert meta.info["commit"] == 2 and meta.info["topics"] == ["a-topic", "b-topic"]
