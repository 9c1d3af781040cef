"""The ``stats`` admin op (core/stats.py) as a broker's core answers it: retained records
per topic, publish rates, connected consumers, durable subscriptions' lag; admins only."""

from __future__ import annotations

from test_core_broker import leading, recs

from tritonmq.core.actions import SendError, SendStats
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import ClientFrameIn, SubscriptionRegistered, Tick
from tritonmq.core.stats import Rates
from tritonmq.wire.frames import (
    STATS_MAX_ITEMS,
    Ack,
    ErrorCode,
    From,
    Pub,
    Stats,
    StatsReply,
    Sub,
    Unsub,
)

T0 = 1_763_856_000_000  # wall-clock ms of the first publish


def stats(c: BrokerCore, frame: Stats, wall_ms: int) -> StatsReply:
    # (a primary that heard nothing for seconds also re-reads ZooKeeper: not the point here)
    [out] = [
        a for a in c.handle(ClientFrameIn("admin", frame, 9.0, wall_ms)) if isinstance(a, SendStats)
    ]
    assert out.conn == "admin"
    return out.stats


def with_backlog() -> BrokerCore:
    """A primary: topic t has 5 records (published 1 s apart), durable "app" acked 2 of them
    and is gone; topic u has 1 record and an unnamed subscriber."""
    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("app", Sub(1, "t", "app", From.EARLIEST), 0.05))
    c.handle(SubscriptionRegistered("t", "app", 0, 0.05))
    for i in range(5):
        c.handle(ClientFrameIn("prod", Pub(i + 1, "t", recs(f"u{i}")), 0.1 + i, T0 + 1000 * i))
    c.handle(ClientFrameIn("app", Ack(1, 2), 5.0))
    c.handle(ClientFrameIn("app", Unsub(1), 5.1))
    c.handle(ClientFrameIn("reader", Sub(2, "u", None, From.LATEST), 5.2))
    c.handle(ClientFrameIn("prod", Pub(9, "u", recs("v1")), 5.3, T0 + 5000))
    return c


def test_topics_say_what_is_retained_and_who_reads_them() -> None:
    r = stats(with_backlog(), Stats(4), T0 + 10_000)
    assert (r.id, r.group, r.role, r.commit, r.records) == (4, "g1", "primary", 6, 6)
    assert r.max_bytes > 0 and r.bytes > 0 and r.wall_ms == T0 + 10_000
    t, u = r.topics  # most bytes first
    assert (t.topic, t.records, t.first_ts, t.last_ts, t.consumers) == ("t", 5, 1, 5, 0)
    assert t.last_ms == T0 + 4000 and t.bytes > 0
    assert (u.topic, u.records, u.consumers) == ("u", 1, 1)


def test_a_subscription_s_lag_counts_records_after_its_offset_and_their_age() -> None:
    [app] = stats(with_backlog(), Stats(4), T0 + 10_000).subscriptions
    assert (app.topic, app.subscription, app.mode, app.offset, app.consumers) == (
        "t",
        "app",
        "broadcast",
        2,
        0,
    )
    assert app.stored == 0  # ZooKeeper has not been written since it registered
    assert app.lag == 3  # ts 3, 4, 5
    assert app.lag_ms == 10_000 - 2000  # ts 3 was accepted at T0 + 2 s


def test_a_caught_up_subscription_has_no_lag() -> None:
    c = with_backlog()
    c.handle(ClientFrameIn("app", Sub(3, "t", "app", From.LATEST), 6.0))
    c.handle(ClientFrameIn("app", Ack(3, 5), 6.1))
    [app] = stats(c, Stats(5), T0 + 10_000).subscriptions
    assert (app.offset, app.lag, app.lag_ms, app.consumers) == (5, 0, 0, 1)


def test_one_topic_only() -> None:
    r = stats(with_backlog(), Stats(4, "u"), T0)
    assert [t.topic for t in r.topics] == ["u"] and r.subscriptions == ()
    r = stats(with_backlog(), Stats(4, "nothing-here"), T0)
    assert [(t.topic, t.records) for t in r.topics] == [("nothing-here", 0)]


def test_publish_rates_are_counted_per_topic_over_the_last_seconds() -> None:
    c = leading(isr="a", live="a", replicas=1)
    c.handle(Tick(10.0))
    for i in range(10):  # 20 records/s of t over 2 s; a retried batch is not counted again
        batch = recs(*(f"t{i}-{k}" for k in range(4)))
        c.handle(ClientFrameIn("prod", Pub(i, "t", batch), 10.0 + i * 0.2, T0))
        c.handle(ClientFrameIn("prod", Pub(i, "t", batch), 10.0 + i * 0.2, T0))
        if i % 5 == 4:
            c.handle(Tick(11.0 + i // 5))
    r = stats(c, Stats(1), T0)
    assert r.rate == 20.0 and [(t.topic, t.rate) for t in r.topics] == [("t", 20.0)]
    for k in range(1, 8):  # nothing published for 7 s: the window forgets it
        c.handle(Tick(12.0 + k))
    assert stats(c, Stats(2), T0).rate == 0.0


def test_rates_keep_only_the_window() -> None:
    rates = Rates()
    rates.tick(0.0)
    for s in range(1, 20):
        rates.published("t", 10)
        rates.tick(float(s))
    total, per = rates.of()
    assert total == 10.0 and per == {"t": 10.0} and len(rates.samples) <= 6
    rates.clear()
    assert rates.of() == (0.0, {})


def test_a_backup_answers_with_its_log_and_no_subscriptions() -> None:
    from test_core_broker import following

    c = following()
    r = stats(c, Stats(3), T0)
    assert r.role == "backup" and r.subscriptions == () and r.rate == 0.0


def test_stats_need_the_admin_claim() -> None:
    from test_auth import ALICE, at, hello

    c = leading(isr="a", live="a", replicas=1, auth_required=True)
    c.handle(ClientFrameIn("alice", hello(), 0.0, at(), ALICE))
    [err] = c.handle(ClientFrameIn("alice", Stats(3), 0.1, at()))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.FORBIDDEN, 3)


def test_an_answer_holds_at_most_the_cap_and_says_how_many_were_left_out() -> None:
    c = leading(isr="a", live="a", replicas=1)
    n = STATS_MAX_ITEMS + 3
    for i in range(n):
        c.log.topic(f"t{i:05d}").subscribers = 1  # topics held open by a subscriber
    r = stats(c, Stats(1), T0)
    assert len(r.topics) == STATS_MAX_ITEMS and r.more_topics == 3
    assert r.topics[0].topic == "t00000"  # ties (no bytes) by name
