"""The client protocol's consuming side (`tritonmq/client/consuming.py`): subscriptions,
resume and redelivery drop, shared members, acks, presence."""

from __future__ import annotations

from typing import Any

from tests.unit.clientharness import A, B, Harness, recs
from tritonmq.client.events import (
    AckRecord,
    Answered,
    Close,
    DeliverRecords,
    Disconnect,
    Publish,
    PublishFailed,
    Request,
    ResolveFailed,
    Subscribe,
    Subscribed,
    SubscriptionFailed,
    SubscriptionMoved,
    Tick,
    TransportClosed,
    Unsubscribe,
)
from tritonmq.client.pending import RECENT_ACKS_S
from tritonmq.client.states import ConnState
from tritonmq.errors import (
    ClientClosed,
    Purged,
    Unavailable,
    WrongGroup,
)
from tritonmq.wire.frames import (
    Ack,
    Deliver,
    Error,
    ErrorCode,
    From,
    Sub,
    SubOk,
    Unsub,
)

# --- subscriptions ------------------------------------------------------------------------


def test_subscribe_resume_and_the_drop_of_redeliveries() -> None:
    h = Harness()
    h.connect(A)
    out = h(Subscribe(1, "t", None, From.LATEST))
    assert h.sent(out) == [Sub(1, "t", None, From.LATEST, None, "broadcast", False)]
    assert h.frame(SubOk(1, 10)) == [Subscribed(1, 10)]
    r = [(ts, b"u", None, b"v", None) for ts in range(10, 15)]
    assert h.frame(Deliver(1, "t", tuple(r[:3]))) == [DeliverRecords(1, tuple(r[:3]))]
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    assert [f for f in h.sent() if isinstance(f, Sub)] == [
        Sub(1, "t", None, 13, None, "broadcast", True)
    ]
    # The new primary sends some again: only what the application has not seen passes.
    assert h.frame(Deliver(1, "t", tuple(r[1:]))) == [DeliverRecords(1, tuple(r[3:]))]
    assert h.frame(Deliver(1, "t", tuple(r[:5]))) == []


def test_shared_subscriptions_keep_every_record_and_rejoin_at_latest() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(2, "t", "work", 5, 10, "shared", "m7"))
    assert h.sent()[-1] == Sub(2, "t", "work", 5, 10, "shared", member="m7")
    h.frame(SubOk(2, 5))
    rs = ((7, b"u", None, b"v", None), (6, b"u", None, b"v", None))
    assert h.frame(Deliver(2, "t", rs)) == [DeliverRecords(2, rs)]
    assert h.frame(Deliver(2, "t", rs)) == [DeliverRecords(2, rs)]
    h(AckRecord(2, 7))
    h(AckRecord(2, 6))
    assert h.sent(h(Tick())) == [Ack(2, 7, (6,))]
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B)
    assert [f for f in h.sent() if isinstance(f, Sub)] == [
        Sub(2, "t", "work", From.LATEST, 10, "shared", True, (7, 6), member="m7")
    ], "a member keeps its id across connections"


def shared_member() -> Harness:
    """Connected to A, in shared subscription t/work (sid 2)."""
    h = Harness()
    h.connect(A)
    h(Subscribe(2, "t", "work", From.EARLIEST, None, "shared", "m1"))
    h.frame(SubOk(2, 1))
    return h


def rec(ts: int) -> Any:
    return (ts, b"u%d" % ts, None, b"v", None)


def test_a_shared_member_tells_a_new_primary_what_it_acked_and_drops_its_own_repeats() -> None:
    """A failover: 1 and 2 were acknowledged (2 never reached the old primary), 3 is with
    the application (the sub says all three). Should the new primary send 1..4 anyway, only
    4 is new to the application; 1 and 2 are acknowledged again so the broker lets go of
    them; 3 waits for the application's own ack."""
    h = shared_member()
    h.frame(Deliver(2, "t", (rec(1), rec(2), rec(3))))
    h(AckRecord(2, 1))
    assert h.sent(h(Tick())) == [Ack(2, 1)]
    h(AckRecord(2, 2))
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    assert [f for f in h.sent() if isinstance(f, Sub)] == [
        Sub(2, "t", "work", From.LATEST, None, "shared", True, (1, 2), (3,), "m1")
    ]
    out = h.frame(Deliver(2, "t", (rec(1), rec(2), rec(3), rec(4))))
    assert [a for a in out if isinstance(a, DeliverRecords)] == [DeliverRecords(2, (rec(4),))]
    assert h.sent(h(Tick())) == [Ack(2, 1, (2,))]
    h(AckRecord(2, 3))
    assert h.sent(h(Tick())) == [Ack(2, 3)]


def test_a_shared_member_remembers_its_acks_for_a_bounded_time() -> None:
    h = shared_member()
    h.frame(Deliver(2, "t", (rec(1), rec(2))))
    h(AckRecord(2, 1))
    h.now += RECENT_ACKS_S - 1
    h(AckRecord(2, 2))
    h.now += 2
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    [sub] = [f for f in h.sent() if isinstance(f, Sub)]
    assert sub.acked == (2,), "an ack older than RECENT_ACKS_S was sent"


def test_acks_are_coalesced_and_kept_across_a_disconnect() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", "durable", From.EARLIEST))
    h.frame(SubOk(1, 1))
    for ts in (3, 5, 4):
        h(AckRecord(1, ts))
    assert h.sent(h(Tick())) == [Ack(1, 5)]
    h(AckRecord(1, 6))
    h(TransportClosed(h.p.conn))
    assert h.sent(h(Tick())) == []
    h.actions.clear()
    h.connect(B)
    assert Ack(1, 6) in h.sent()


def test_unsubscribe_sends_pending_acks_first() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h.frame(SubOk(1, 1))
    h(AckRecord(1, 4))
    assert h.sent(h(Unsubscribe(1))) == [Ack(1, 4), Unsub(1)]


def test_purged_reaches_the_subscription_as_an_error() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(3, "t", None, 5))
    h.frame(SubOk(3, 5))
    out = h.frame(Error.of(ErrorCode.PURGED, "5..9 are gone", sid=3, first=5, last=9))
    assert len(out) == 1 and isinstance(out[0], SubscriptionFailed) and out[0].sid == 3
    err = out[0].error
    assert isinstance(err, Purged) and (err.first, err.last) == (5, 9)
    assert h.p.state is ConnState.CONNECTED  # the others carry on
    assert h.frame(Deliver(3, "t", ((9, b"u", None, b"v", None),))) == []


def test_a_retriable_subscription_error_resubscribes() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h.frame(SubOk(1, 8))
    out = h.frame(Error.of(ErrorCode.NOT_PRIMARY, "stepped down", sid=1))
    assert Disconnect(h.p.conn) in out
    h.actions.clear()
    h.connect(B)
    assert [f for f in h.sent() if isinstance(f, Sub)] == [
        Sub(1, "t", None, 8, None, "broadcast", True)
    ]


def test_subscriptions_are_told_when_no_primary_can_be_reached() -> None:
    h = Harness(timeout=3.0)
    h(Subscribe(1, "t", None, From.LATEST))
    h(Tick())
    h(ResolveFailed("ConnectionLoss"))
    h.now += 3.0
    out = h(Tick())
    failed = [a for a in out if isinstance(a, SubscriptionFailed)]
    assert len(failed) == 1 and isinstance(failed[0].error, Unavailable)
    # A confirmed one gets the same after `timeout` without any connection.
    h = Harness(timeout=3.0)
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h.frame(SubOk(1, 1))
    h.now += 10
    assert not [a for a in h(Tick()) if isinstance(a, SubscriptionFailed)]
    h(TransportClosed(h.p.conn))
    h.now += 3.0
    assert [a for a in h(Tick()) if isinstance(a, SubscriptionFailed)]


def test_close_fails_everything_pending_and_everything_after() -> None:
    h = Harness()
    h.connect(A)
    h(Publish(1, "t", recs(1)))
    h(Subscribe(1, "t", None, From.LATEST))
    out = h(Close())
    assert out[0] == Disconnect(h.p.conn)
    assert {type(a.error) for a in out if isinstance(a, PublishFailed | SubscriptionFailed)} == {
        ClientClosed
    }
    assert isinstance(h(Publish(2, "t", recs(1)))[0], PublishFailed)
    assert h.p.state is ConnState.CLOSED


def test_a_presence_subscription_asks_for_it_again_on_every_connection_and_gets_its_pushes() -> (
    None
):
    from tritonmq.client.events import PresenceChanged
    from tritonmq.wire.frames import Join, Leave, PresenceMember

    h = Harness()
    h.connect(A)
    out = h(Subscribe(1, "room", None, From.LATEST, presence=True, info="Alice"))
    assert h.sent(out) == [Sub(1, "room", None, From.LATEST, presence=True, info="Alice")]
    h.frame(SubOk(1, 10))
    bob = PresenceMember("a.1", "", "Bob")
    assert h.frame(Join(1, "room", bob)) == [PresenceChanged(1, Join(1, "room", bob))]
    assert h.frame(Join(9, "room", bob)) == []  # a sid this client does not have
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)  # C12: the new primary is told again, so it lists us again
    [resub] = [f for f in h.sent() if isinstance(f, Sub)]
    assert (resub.presence, resub.info, resub.resume, resub.start) == (True, "Alice", True, 10)
    h(Unsubscribe(1))
    assert h.frame(Leave(1, "room", bob)) == []  # after unsub: dropped


def test_presence_is_a_request_answered_by_members_and_resent_on_a_new_connection() -> None:
    from tritonmq.wire.frames import Members, Presence, PresenceMember

    h = Harness()
    h.connect(A)
    out = h(Request(5, Presence(0, "room")))
    [frame] = h.sent(out)
    assert isinstance(frame, Presence) and frame.id > 0 and frame.topic == "room"
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    assert frame in h.sent()  # unanswered: asked again, same id (C10)
    members = Members(frame.id, "room", (PresenceMember("b.1", "alice", "Alice"),))
    assert Answered(5, members) in h.frame(members)


# --- a moved slot (docs/replication.md M3, M4) ----------------------------------------------


def test_positions_are_era_and_ts_and_an_older_era_never_passes_after_a_newer() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h.frame(SubOk(1, 10))
    assert h.frame(Deliver(1, "t", (rec(10), rec(11)))) == [DeliverRecords(1, (rec(10), rec(11)))]
    # era 1's ts are another group's: smaller ones are new records, not redeliveries
    assert h.frame(Deliver(1, "t", (rec(3),), 1)) == [DeliverRecords(1, (rec(3),), 1)]
    assert h.frame(Deliver(1, "t", (rec(12),))) == [], "era 0 is behind it"
    assert h.frame(Deliver(1, "t", (rec(3), rec(4)), 1)) == [DeliverRecords(1, (rec(4),), 1)]
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    [again] = [f for f in h.sent() if isinstance(f, Sub)]
    assert (again.start, again.era, again.resume) == (5, 1, True)


def test_a_subok_names_the_era_a_resume_goes_on_in() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h.frame(SubOk(1, 10, 2))
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    [again] = [f for f in h.sent() if isinstance(f, Sub)]
    assert (again.start, again.era, again.resume) == (10, 2, True)


def test_wrong_group_with_an_era_moves_the_subscription_on_from_after_plus_one() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h.frame(SubOk(1, 10))
    err = Error.of(ErrorCode.WRONG_GROUP, "on", sid=1, group="g2", era=1, after=7)
    assert h.frame(err) == [SubscriptionMoved(1, "g2", 1, 7)]
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    assert not [f for f in h.sent() if isinstance(f, Sub)], "it lives at the other group now"


def test_a_subscription_moved_here_resumes_at_its_era_and_position() -> None:
    h = Harness()
    h.connect(A)
    out = h(Subscribe(4, "t", None, 8, None, era=1, resume=True))
    [f] = h.sent(out)
    assert (f.start, f.era, f.resume) == (8, 1, True)
    h.frame(SubOk(4, 8, 1))
    assert h.frame(Deliver(4, "t", (rec(8),), 1)) == [DeliverRecords(4, (rec(8),), 1)]


def test_a_subscription_sent_on_before_its_first_subok_goes_on_as_a_new_start() -> None:
    """``earliest`` on a moved slot is sent to era 0's group, and on past eras nothing is
    left of: it was handed nothing, so a resume there would be told PURGED for records
    that are simply not the oldest retained any more."""
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, From.EARLIEST))
    err = Error.of(ErrorCode.WRONG_GROUP, "era 0", sid=1, group="g1", era=0, after=0)
    assert h.frame(err) == [SubscriptionMoved(1, "g1", 0, 0, False)]
    out = h(Subscribe(2, "t", None, 4, None, era=1, resume=False))
    [f] = h.sent(out)
    assert (f.start, f.era, f.resume) == (4, 1, False)
    h.frame(SubOk(2, 4, 1))
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    [again] = [f for f in h.sent() if isinstance(f, Sub)]
    assert (again.start, again.era, again.resume) == (4, 1, True), "placed: now it resumes"


def test_an_ack_of_an_era_left_behind_is_dropped() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, 8, None, era=1, resume=True))
    h.frame(SubOk(1, 8, 1))
    h(AckRecord(1, 40, 0))
    assert h.sent(h(Tick())) == []
    h(AckRecord(1, 8, 1))
    assert h.sent(h(Tick())) == [Ack(1, 8)]


def test_wrong_group_without_an_era_moves_only_a_subscription_without_a_position() -> None:
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h(Subscribe(2, "t", "durable", From.LATEST))
    h.frame(SubOk(2, 3))
    h(Subscribe(3, "t", None, From.LATEST))
    h.frame(SubOk(3, 3))
    err = Error.of(ErrorCode.WRONG_GROUP, "owner", sid=1, group="g2")
    assert h.frame(err) == [SubscriptionMoved(1, "g2", None, None, False)]
    err = Error.of(ErrorCode.WRONG_GROUP, "owner", sid=2, group="g2", era=1, after=0)
    assert h.frame(err) == [SubscriptionMoved(2, "g2", None, None)], "its offset is its place"
    [failed] = h.frame(Error.of(ErrorCode.WRONG_GROUP, "owner", sid=3, group="g2"))
    assert isinstance(failed, SubscriptionFailed) and isinstance(failed.error, WrongGroup)


def test_a_resumed_broadcast_subscription_acknowledges_again_what_its_application_did() -> None:
    """An ack sent to a primary that then died, or that reached a new primary before the
    named ``sub`` was attached (it waits for the subscriptions to load), was lost; a sealed
    era brings no later record whose ack would cover it (M5)."""
    h = Harness()
    h.connect(A)
    h(Subscribe(1, "t", "audit", From.LATEST))
    h.frame(SubOk(1, 10))
    h.frame(Deliver(1, "t", (rec(10), rec(11))))
    h(AckRecord(1, 11))
    assert h.sent(h(Tick())) == [Ack(1, 11)]
    h(TransportClosed(h.p.conn))
    h.actions.clear()
    h.connect(B, epoch=2)
    assert h.sent(h.frame(SubOk(1, 12))) == [Ack(1, 11)]
    assert h.sent(h.frame(SubOk(1, 12, 1))) == [], "not in another era"
