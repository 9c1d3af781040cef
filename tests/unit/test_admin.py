"""Admin ops on durable subscriptions (core/admin.py) as the primary's core answers them:
dry run by default, refused while consumers are connected, reset targets and their limits."""

from __future__ import annotations

from test_core_broker import leading, only, recs

from tritonmq.core.actions import DeleteSubscription, SendError, SendSubInfo, StoreOffsets
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import ClientFrameIn, SubscriptionRegistered
from tritonmq.wire.frames import Ack, ErrorCode, From, Pub, Sub, SubDelete, SubInfo, SubReset, Unsub


def with_subscription(consumed: int = 2) -> BrokerCore:
    """A primary with 5 records of topic t and durable subscription "app" at offset ``consumed``."""
    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3", "u4", "u5")), 0.1))
    c.handle(ClientFrameIn("app", Sub(1, "t", "app", From.EARLIEST), 0.2))
    c.handle(SubscriptionRegistered("t", "app", 0, 0.2))
    c.handle(ClientFrameIn("app", Ack(1, consumed), 0.3))
    return c


def ask(c: BrokerCore, frame: SubDelete | SubReset) -> list:  # type: ignore[type-arg]
    return c.handle(ClientFrameIn("admin", frame, 1.0))


def test_a_dry_run_says_what_would_change_and_changes_nothing() -> None:
    c = with_subscription()
    [info] = ask(c, SubReset(7, "t", "app", From.LATEST))
    assert info == SendSubInfo(
        "admin", SubInfo(7, "t", "app", "broadcast", "", 2, 1, "reset", 5, executed=False)
    )
    [info] = ask(c, SubDelete(8, "t", "app"))
    assert isinstance(info, SendSubInfo) and info.info.action == "delete"
    assert not info.info.executed and ("t", "app") in c.delivery.durables
    assert c.delivery.durables[("t", "app")].offset == 2


def test_an_op_is_refused_while_consumers_are_connected() -> None:
    c = with_subscription()
    for frame in (SubReset(7, "t", "app", From.LATEST, True), SubDelete(8, "t", "app", True)):
        [err] = ask(c, frame)
        assert isinstance(err, SendError) and err.code is ErrorCode.BAD_REQUEST
        assert "1 connected consumer" in err.message and err.id == frame.id
    assert c.delivery.durables[("t", "app")].offset == 2


def test_reset_moves_the_offset_and_the_next_write_stores_it() -> None:
    c = with_subscription()
    c.handle(ClientFrameIn("app", Unsub(1), 0.5))
    [info] = ask(c, SubReset(7, "t", "app", From.LATEST, True))
    assert isinstance(info, SendSubInfo) and info.info.executed and info.info.to == 5
    assert c.delivery.durables[("t", "app")].offset == 5
    assert c.delivery.offsets_to_store() == StoreOffsets((("t", "app", 5),))
    ask(c, SubReset(8, "t", "app", From.EARLIEST, True))
    assert c.delivery.durables[("t", "app")].offset == 0
    ask(c, SubReset(9, "t", "app", 4, True))
    assert c.delivery.durables[("t", "app")].offset == 3
    out = c.handle(ClientFrameIn("app", Sub(2, "t", "app", From.LATEST), 1.1))
    assert [r[0] for d in out if hasattr(d, "records") for r in d.records] == [4, 5]


def test_reset_refuses_a_ts_beyond_the_commit_point_or_below_what_was_purged() -> None:
    c = with_subscription()
    c.handle(ClientFrameIn("app", Unsub(1), 0.5))
    [err] = ask(c, SubReset(7, "t", "app", 2**63, True))
    assert isinstance(err, SendError) and err.code is ErrorCode.BAD_REQUEST
    c.log.topics["t"].purge_upto(2)
    [err] = ask(c, SubReset(8, "t", "app", 1, True))
    assert isinstance(err, SendError) and (err.code, err.first, err.last) == (
        ErrorCode.PURGED,
        1,
        2,
    )
    [info] = ask(c, SubReset(9, "t", "app", From.EARLIEST, True))
    assert isinstance(info, SendSubInfo) and info.info.to == 2


def test_delete_forgets_the_subscription_and_asks_zookeeper_to_delete_it() -> None:
    c = with_subscription()
    c.handle(ClientFrameIn("app", Unsub(1), 0.5))
    out = ask(c, SubDelete(7, "t", "app", True))
    assert only(out, DeleteSubscription) == [DeleteSubscription("t", "app")]
    assert only(out, SendSubInfo)[0].info.executed
    assert ("t", "app") not in c.delivery.durables and "t" not in c.delivery.holds()
    [err] = ask(c, SubDelete(8, "t", "app", True))
    assert isinstance(err, SendError) and err.code is ErrorCode.BAD_REQUEST


def test_admin_ops_need_the_admin_claim_and_go_to_the_primary() -> None:
    from test_auth import ALICE, at, hello

    c = leading(isr="a", live="a", replicas=1, auth_required=True)
    c.handle(ClientFrameIn("alice", hello(), 0.0, at(), ALICE))
    [err] = c.handle(ClientFrameIn("alice", SubDelete(3, "t", "x", True), 0.1, at()))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.FORBIDDEN, 3)
