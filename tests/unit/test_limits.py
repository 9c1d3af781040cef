"""Caps and names (issue 8): the core's decisions, driven through BrokerCore's events."""

from __future__ import annotations

import pytest

from tests.unit.test_core_broker import leading, only, recs
from tritonmq.config import BrokerConfig, load_config
from tritonmq.core.actions import SendError, SendPubAck, SendSubOk
from tritonmq.core.events import ClientFrameIn, ClientGone, Tick
from tritonmq.core.limits import Caps, check_names, name_problem
from tritonmq.errors import ConfigError
from tritonmq.wire.frames import Commit, ErrorCode, Fetch, From, Pub, Sub, SubDelete, Unsub


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "empty"),
        (".", "reserved"),
        ("..", "reserved"),
        ("a/b", "'/'"),
        ("/", "'/'"),
        ("tab\there", "control characters (U+0009)"),
        ("nul\x00", "control characters (U+0000)"),
        ("del\x7f", "control characters (U+007F)"),
        ("c1\x85", "control characters (U+0085)"),
        ("x" * 250, "max_name_len=249"),
    ],
)
def test_names_zookeeper_cannot_store_as_they_are_are_refused_naming_the_rule(
    name: str, rule: str
) -> None:
    problem = name_problem("topic", name, 249)
    assert problem is not None and rule in problem and "topic" in problem


@pytest.mark.parametrize(
    "name", ["orders", "a.b", "...", ".hidden", "ünïcødé-名前", "x" * 249, "a b"]
)
def test_ordinary_names_pass(name: str) -> None:
    assert name_problem("subscription", name, 249) is None


def test_every_frame_naming_a_topic_or_subscription_is_checked_and_answered_by_request() -> None:
    caps = Caps(10, 10, 20)
    pub = check_names("c", Pub(7, "a/b", recs("u")), caps)
    assert pub is not None and (pub.code, pub.id, pub.sid) == (ErrorCode.BAD_REQUEST, 7, None)
    sub = check_names("c", Sub(3, "ok", "..", From.LATEST), caps)
    assert sub is not None and (sub.code, sub.sid) == (ErrorCode.BAD_REQUEST, 3)
    assert "subscription" in sub.message
    commit = check_names("c", Commit(4, "t", "n" * 21, 1), caps)
    assert commit is not None and commit.id == 4 and "max_name_len=20" in commit.message
    fetch = check_names("c", Fetch(5, "\x01", 1, 2, 3), caps)
    assert fetch is not None and fetch.id == 5
    assert check_names("c", Sub(3, "t", "name", From.LATEST), caps) is None
    delete = check_names("c", SubDelete(6, "t", "a/b"), caps)
    assert delete is not None and (delete.code, delete.id) == (ErrorCode.BAD_REQUEST, 6)


def test_a_bad_name_is_refused_by_the_core_and_nothing_is_created() -> None:
    c = leading(isr="a", live="a", replicas=1)
    [err] = c.handle(ClientFrameIn("bad", Pub(1, "..", recs("u1")), 0.1))
    assert isinstance(err, SendError) and err.code is ErrorCode.BAD_REQUEST
    assert c.log.topics == {} and c.log.last_ts == 0
    [ok] = only(c.handle(ClientFrameIn("good", Pub(2, "fine", recs("u2")), 0.2)), SendPubAck)
    assert ok.id == 2


def test_subscriptions_past_the_cap_get_limit_and_other_connections_are_not_affected() -> None:
    c = leading(isr="a", live="a", replicas=1, max_subscriptions_per_conn=3)
    for sid in range(3):
        assert only(
            c.handle(ClientFrameIn("greedy", Sub(sid, "t", None, From.LATEST), 0.1)), SendSubOk
        )
    [err] = c.handle(ClientFrameIn("greedy", Sub(9, "t", None, From.LATEST), 0.1))
    assert isinstance(err, SendError) and (err.code, err.sid) == (ErrorCode.LIMIT, 9)
    assert "max_subscriptions_per_conn=3" in err.message and not err.code.retriable
    # resubscribing an open sid is not a new subscription; unsubscribing makes room
    assert only(c.handle(ClientFrameIn("greedy", Sub(2, "u", None, From.LATEST), 0.2)), SendSubOk)
    c.handle(ClientFrameIn("greedy", Unsub(0), 0.3))
    assert only(c.handle(ClientFrameIn("greedy", Sub(9, "t", None, From.LATEST), 0.4)), SendSubOk)
    assert only(c.handle(ClientFrameIn("polite", Sub(1, "t", None, From.LATEST), 0.5)), SendSubOk)
    c.handle(ClientGone("greedy", 0.6))
    assert c.delivery.subscriptions_of("greedy") == 0


def test_subscriptions_to_one_topic_past_its_cap_get_limit_and_other_topics_are_served() -> None:
    # Issue 26: every subscription of a topic is visited and sent a frame on each commit of
    # it; 1,000 on one topic took a broker's publish latency from 0.33 ms to 28 ms.
    c = leading(isr="a", live="a", replicas=1, max_subscriptions_per_topic=3)
    conns = ["c0", "c1", "c2"]  # connections are compared by identity
    for conn in conns:
        assert only(c.handle(ClientFrameIn(conn, Sub(1, "hot", None, From.LATEST), 0.1)), SendSubOk)
    [err] = c.handle(ClientFrameIn("late", Sub(7, "hot", None, From.LATEST), 0.1))
    assert isinstance(err, SendError) and (err.code, err.sid) == (ErrorCode.LIMIT, 7)
    assert "max_subscriptions_per_topic=3" in err.message and "hot" in err.message
    # resubscribing an open sid is not a new subscription; other topics are not affected
    assert only(c.handle(ClientFrameIn(conns[0], Sub(1, "hot", None, From.LATEST), 0.2)), SendSubOk)
    assert only(c.handle(ClientFrameIn("late", Sub(8, "cold", None, From.LATEST), 0.2)), SendSubOk)
    c.handle(ClientGone(conns[1], 0.3))  # a subscriber leaving makes room
    assert only(c.handle(ClientFrameIn("late", Sub(7, "hot", None, From.LATEST), 0.4)), SendSubOk)


def test_a_pub_or_sub_creating_a_topic_past_the_cap_gets_limit_until_one_is_freed() -> None:
    c = leading(isr="a", live="a", replicas=1, max_topics=2, ephemeral_grace=0.0)
    assert only(c.handle(ClientFrameIn("p", Pub(1, "t1", recs("u1")), 0.1)), SendPubAck)
    assert only(c.handle(ClientFrameIn("s", Sub(1, "t2", None, From.LATEST), 0.1)), SendSubOk)
    [err] = c.handle(ClientFrameIn("p", Pub(2, "t3", recs("u2")), 0.2))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.LIMIT, 2)
    assert "max_topics=2" in err.message and "g1" in err.message
    [err] = c.handle(ClientFrameIn("s", Sub(2, "t3", None, From.LATEST), 0.2))
    assert isinstance(err, SendError) and (err.code, err.sid) == (ErrorCode.LIMIT, 2)
    # existing topics keep working
    assert only(c.handle(ClientFrameIn("p", Pub(3, "t2", recs("u3")), 0.3)), SendPubAck)
    assert only(c.handle(ClientFrameIn("p", Pub(4, "t1", recs("u4")), 0.3)), SendPubAck)
    # t1 is purged (nobody holds it) and freed: a new topic fits again
    c.handle(Tick(1.0))
    assert "t1" not in c.log.topics and "t2" in c.log.topics  # t2 has a subscriber
    assert only(c.handle(ClientFrameIn("p", Pub(5, "t3", recs("u5")), 1.1)), SendPubAck)


def test_the_caps_are_settings_with_sane_bounds() -> None:
    cfg = BrokerConfig()
    assert (cfg.max_subscriptions_per_conn, cfg.max_topics, cfg.max_name_len) == (
        1000,
        100_000,
        249,
    )
    assert cfg.max_connections == 10_000
    with pytest.raises(ConfigError, match="max_name_len"):
        load_config(None, max_name_len=250)
    with pytest.raises(ConfigError, match="max_topics"):
        load_config(None, max_topics=0)


# --- issue 26: shares of the group-wide bounds ------------------------------------------


def _pub(c: object, conn: str, pid: int, topic: str, *uuids: str, now: float = 0.1) -> list:  # type: ignore[type-arg]
    return c.handle(ClientFrameIn(conn, Pub(pid, topic, recs(*uuids)), now))  # type: ignore[attr-defined]


def test_one_producer_cannot_spend_the_dedup_table_every_producer_needs() -> None:
    """Issue 26: ~2M records with fresh uuids to a topic nobody reads filled the dedup table
    and the whole group answered FULL for the dedup window. One producer (here anonymous:
    one connection) holds at most dedup_max_per_producer uuids of the window."""
    c = leading(
        isr="a", live="a", replicas=1, ephemeral_grace=0.0, dedup_max=10, dedup_max_per_producer=4
    )
    for i in range(4):
        assert only(_pub(c, "evil", i, "void", f"e{i}"), SendPubAck)
    c.handle(Tick(1.0))  # nobody reads "void": purged, its uuids remembered for the window
    assert c.log.purged_count == 4
    [full] = _pub(c, "evil", 4, "void", "e4", now=1.1)
    assert isinstance(full, SendError) and full.code is ErrorCode.FULL and full.code.retriable
    assert "dedup_max_per_producer=4" in full.message and full.id == 4
    # everyone else is acknowledged, up to the group's own bound
    for i in range(6):
        assert only(_pub(c, ("good0", "good1")[i % 2], i, "monitor", f"g{i}", now=1.2), SendPubAck)
    # a retry of what it published within the window is answered with the original ts,
    # on a new connection as on the refused one
    assert _pub(c, "evil", 5, "void", "e1", now=1.3) == [SendPubAck("evil", 5, (2,))]
    assert _pub(c, "evil2", 1, "void", "e0", "e3", now=1.3) == [SendPubAck("evil2", 1, (1, 4))]
    # once the window has let its uuids go, it may publish again
    for t in range(2, 63):  # ticks as the shell's: a silent gap would make it doubt its role
        c.handle(Tick(float(t)))
    assert c.log.lookup(b"e0") is None
    assert only(_pub(c, "evil3", 1, "void", "e9", now=62.1), SendPubAck)


def test_a_principals_connections_share_one_dedup_allowance() -> None:
    from tritonmq.core.auth import Principal
    from tritonmq.wire.frames import Hello

    c = leading(isr="a", live="a", replicas=1, dedup_max=10, dedup_max_per_producer=3)
    bob = Principal("bob", pub=("*",), read=("*",), names=("*",))
    for conn in ("bob1", "bob2"):
        c.handle(ClientFrameIn(conn, Hello("t", "tok"), 0.0, 0, bob))
    assert only(_pub(c, "bob1", 1, "void", "b1", "b2"), SendPubAck)
    [full] = _pub(c, "bob2", 1, "void", "b3", "b4")  # 2 + 2 > 3, whichever connection
    assert isinstance(full, SendError) and full.code is ErrorCode.FULL
    assert only(_pub(c, "anon", 1, "void", "a1", "a2", "a3"), SendPubAck)  # another producer


def test_durable_subscriptions_per_principal_are_capped_with_limit() -> None:
    """Issue 26: 20,000 durable subscriptions created through `commit` made durable
    consumers unavailable for up to a minute after a failover. The anonymous principal
    counts as one principal (its subscriptions outlive every connection)."""
    from tritonmq.core.actions import RegisterSubscription
    from tritonmq.core.events import SubscriptionRegistered

    c = leading(isr="a", live="a", replicas=1, max_durable_per_principal=2)
    _pub(c, "p", 1, "t", "u1")
    for i, name in enumerate(("app.a", "app.b")):
        out = c.handle(ClientFrameIn(f"c{i}", Commit(i, "t", name, 1), 0.2))
        assert only(out, RegisterSubscription), out
        c.handle(SubscriptionRegistered("t", name, 1, 0.3))
    [cap] = c.handle(ClientFrameIn("c9", Commit(9, "t", "app.c", 1), 0.4))
    assert isinstance(cap, SendError) and (cap.code, cap.id) == (ErrorCode.LIMIT, 9)
    assert "max_durable_per_principal=2" in cap.message
    [cap] = c.handle(ClientFrameIn("c9", Sub(3, "t", "app.d", From.EARLIEST), 0.4))
    assert isinstance(cap, SendError) and (cap.code, cap.sid) == (ErrorCode.LIMIT, 3)
    assert ("t", "app.c") not in c.delivery.durables
    # its existing subscriptions keep working
    assert only(c.handle(ClientFrameIn("c9", Sub(4, "t", "app.a", From.EARLIEST), 0.5)), SendSubOk)
    # one deleted makes room again
    c.handle(ClientFrameIn("c9", Unsub(4), 0.6))
    c.handle(ClientFrameIn("adm", SubDelete(1, "t", "app.b", execute=True), 0.7))
    out = c.handle(ClientFrameIn("c9", Commit(10, "t", "app.c", 1), 0.9))
    assert only(out, RegisterSubscription), out


def test_the_new_shares_are_settings_with_sane_bounds() -> None:
    cfg = BrokerConfig()
    assert cfg.dedup_max_per_producer == cfg.dedup_max // 2
    assert cfg.max_durable_per_principal == 1_000
    with pytest.raises(ConfigError, match="dedup_max_per_producer"):
        load_config(None, dedup_max=10, dedup_max_per_producer=11)
    with pytest.raises(ConfigError, match="max_durable_per_principal"):
        load_config(None, max_durable_per_principal=0)
