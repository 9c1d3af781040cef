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
