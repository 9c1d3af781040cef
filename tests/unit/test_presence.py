"""Presence through BrokerCore events alone: who is subscribed with presence, join/leave
pushes to the other members, the ``presence`` answer, its caps, and soft state (a backup
or a deposed primary knows nobody)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.unit.test_core_broker import following, leading, members, only, state
from tritonmq.core.actions import Action, SendError, SendPresence, SendSubOk
from tritonmq.core.auth import Principal
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import ClientFrameIn, ClientGone, ZkView
from tritonmq.wire.frames import (
    ErrorCode,
    From,
    Hello,
    Join,
    Leave,
    Members,
    Presence,
    Sub,
    Unsub,
)


def sub(c: BrokerCore, conn: str, sid: int, topic: str = "room", **kw: object) -> list[Action]:
    frame = Sub(sid, topic, None, From.LATEST, presence=True, **kw)  # type: ignore[arg-type]
    return c.handle(ClientFrameIn(conn, frame, 0.1))


def pushes(out: Sequence[Action]) -> list[tuple[str, str, int, str]]:
    """(receiving conn, op, sid, info of the member) of each join/leave in ``out``."""
    return [
        (a.conn, type(a.frame).__name__.lower(), a.frame.sid, a.frame.member.info)
        for a in only(out, SendPresence)
        if isinstance(a.frame, Join | Leave)
    ]


def ask(c: BrokerCore, conn: str = "asker", topic: str = "room", rid: int = 9) -> Members:
    [answer] = c.handle(ClientFrameIn(conn, Presence(rid, topic), 0.2))
    assert isinstance(answer, SendPresence) and isinstance(answer.frame, Members)
    assert (answer.conn, answer.frame.id, answer.frame.topic) == (conn, rid, topic)
    return answer.frame


def infos(m: Members) -> list[str]:
    return [x.info for x in m.members]


def test_each_member_sees_the_others_join_and_the_list_names_them_in_order() -> None:
    c = leading()
    out = sub(c, "alice", 1, info="Alice")
    assert only(out, SendSubOk) and pushes(out) == []  # nobody else yet, no join about itself
    out = sub(c, "bob", 7, info="Bob")
    assert pushes(out) == [("alice", "join", 1, "Bob")]
    out = sub(c, "carol", 3, info="Carol")
    assert sorted(pushes(out)) == [("alice", "join", 1, "Carol"), ("bob", "join", 7, "Carol")]
    listed = ask(c)
    assert infos(listed) == ["Alice", "Bob", "Carol"]
    assert len({m.client for m in listed.members}) == 3 and all(
        m.user == "" for m in listed.members
    )


def test_unsub_and_a_closed_connection_are_leaves_to_the_others() -> None:
    c = leading()
    sub(c, "alice", 1, info="Alice")
    sub(c, "bob", 2, info="Bob")
    sub(c, "bob", 3, info="Bob again")  # two subscriptions of one connection: two members
    sub(c, "carol", 4, info="Carol")
    out = c.handle(ClientFrameIn("carol", Unsub(4), 0.3))
    assert sorted(pushes(out)) == [
        ("alice", "leave", 1, "Carol"),
        ("bob", "leave", 2, "Carol"),
        ("bob", "leave", 3, "Carol"),
    ]
    out = c.handle(ClientGone("bob", 0.4))
    assert pushes(out) == [("alice", "leave", 1, "Bob"), ("alice", "leave", 1, "Bob again")]
    assert infos(ask(c)) == ["Alice"]
    assert c.handle(ClientGone("alice", 0.5)) == [] and ask(c).members == ()


def test_a_leave_carries_the_member_its_join_had() -> None:
    c = leading()
    sub(c, "alice", 1)
    [join] = only(sub(c, "bob", 2, info="Bob"), SendPresence)
    [leave] = only(c.handle(ClientFrameIn("bob", Unsub(2), 0.3)), SendPresence)
    assert isinstance(join.frame, Join) and isinstance(leave.frame, Leave)
    assert leave.frame.member == join.frame.member


def test_subscribers_without_presence_are_not_listed_and_get_no_pushes() -> None:
    c = leading()
    c.handle(ClientFrameIn("quiet", Sub(1, "room", None, From.LATEST), 0.1))
    out = sub(c, "alice", 2, info="Alice")
    assert pushes(out) == []
    assert pushes(c.handle(ClientGone("quiet", 0.2))) == []
    assert infos(ask(c)) == ["Alice"]
    assert ask(c, topic="elsewhere").members == ()  # a topic nobody is in: an empty list


def test_a_sub_replacing_a_member_is_a_leave_then_a_join_with_a_new_client_id() -> None:
    c = leading()
    sub(c, "alice", 1)
    first = only(sub(c, "bob", 2, info="Bob"), SendPresence)[0].frame
    out = sub(c, "bob", 2, info="Robert")
    assert pushes(out) == [("alice", "leave", 1, "Bob"), ("alice", "join", 1, "Robert")]
    assert infos(ask(c)) == ["", "Robert"]
    assert isinstance(first, Join) and first.member.client not in {m.client for m in ask(c).members}
    out = c.handle(ClientFrameIn("bob", Sub(2, "room", None, From.LATEST), 0.3))
    assert pushes(out) == [("alice", "leave", 1, "Robert")]  # the same sid without presence
    assert infos(ask(c)) == [""]


def test_the_user_is_the_connections_token_subject() -> None:
    c = leading()
    alice = Principal("alice", read=("*",), names=("*",))
    c.handle(ClientFrameIn("alice", Hello("t", "token"), 0.05, verified=alice))
    sub(c, "alice", 1, info="Alice")
    sub(c, "anon", 2)
    assert [(m.user, m.info) for m in ask(c).members] == [("alice", "Alice"), ("", "")]


def test_presence_needs_the_right_to_read_the_topic() -> None:
    c = leading()
    reader = Principal("eve", read=("other.*",))
    c.handle(ClientFrameIn("eve", Hello("t", "token"), 0.05, verified=reader))
    [refused] = c.handle(ClientFrameIn("eve", Presence(4, "room"), 0.1))
    assert isinstance(refused, SendError)
    assert (refused.code, refused.id) == (ErrorCode.FORBIDDEN, 4)


def test_members_past_the_cap_and_info_past_its_bytes_are_refused_with_limit() -> None:
    c = leading(max_presence_members=2, max_presence_info_bytes=8)
    sub(c, "alice", 1)
    sub(c, "bob", 2)
    [refused] = sub(c, "carol", 3)
    assert isinstance(refused, SendError) and (refused.code, refused.sid) == (ErrorCode.LIMIT, 3)
    assert "max_presence_members=2" in refused.message
    assert only(sub(c, "bob", 2, info="Bob"), SendSubOk)  # replacing a member is no new one
    [too_long] = sub(c, "alice", 1, info="☕☕☕")  # 9 UTF-8 bytes, 3 characters
    assert isinstance(too_long, SendError) and too_long.code is ErrorCode.LIMIT
    assert "max_presence_info_bytes=8" in too_long.message
    assert infos(ask(c)) == ["", "Bob"]  # a refused sub changed nothing
    assert only(sub(c, "carol", 3, topic="other"), SendSubOk)  # the cap is per topic


def test_a_backup_knows_no_member_and_refuses_presence_as_not_primary() -> None:
    b = following()
    [refused] = b.handle(ClientFrameIn("asker", Presence(5, "room"), 0.1))
    assert isinstance(refused, SendError)
    assert (refused.code, refused.id) == (ErrorCode.NOT_PRIMARY, 5)


def test_a_deposed_primary_forgets_its_members_and_a_new_term_rebuilds_from_resubscriptions() -> (
    None
):
    c = leading(isr="ab", live="ab")
    sub(c, "alice", 1, info="Alice")
    sub(c, "bob", 2, info="Bob")
    out = c.handle(ZkView(state(2, "b", "b", 1, version=3), members("ab"), None, 0.5))
    assert c.primary is None and not only(out, SendPresence)  # no leaves: NOT_PRIMARY instead
    [refused] = c.handle(ClientFrameIn("asker", Presence(6, "room"), 0.6))
    assert isinstance(refused, SendError) and refused.code is ErrorCode.NOT_PRIMARY
    assert c.presence.topics == {} and c.presence.by_conn == {}
    fresh = leading()  # the new primary: members come back as their clients resubscribe
    assert ask(fresh).members == ()
    sub(fresh, "alice2", 1, info="Alice")
    assert pushes(sub(fresh, "bob2", 2, info="Bob")) == [("alice2", "join", 1, "Bob")]
    assert infos(ask(fresh)) == ["Alice", "Bob"]


def test_a_sub_repeated_with_the_same_topic_and_info_changes_no_presence() -> None:
    """Issue 26: one connection re-sending `sub` with presence on its sid was a leave and a
    join to every member each time, and kept a primary from acknowledging for a minute."""
    c = leading()
    sub(c, "alice", 1, info="Alice")
    sub(c, "bob", 2, info="Bob")
    before = ask(c).members
    for _ in range(3):
        out = sub(c, "bob", 2, info="Bob")
        assert only(out, SendSubOk) and pushes(out) == []
    assert ask(c).members == before  # the same member, the same client id


def test_presence_changes_past_a_connections_rate_are_refused_with_limit() -> None:
    c = leading(max_presence_members=10, presence_pushes_per_s=10.0, presence_burst=20)
    for conn in ("m1", "m2", "m3", "m4"):
        sub(c, conn, 1, info=conn)
    at = 1.0

    def churn(info: str, now: float) -> list[Action]:
        frame = Sub(1, "room", None, From.LATEST, presence=True, info=info)
        return c.handle(ClientFrameIn("x", frame, now))

    assert len(pushes(churn("a", at))) == 4  # a join to 4: 16 of its 20 left
    assert len(pushes(churn("b", at))) == 8  # a leave and a join to 4 each: 8 left
    assert len(pushes(churn("c", at))) == 8  # the burst spent exactly
    [err] = churn("d", at)
    assert isinstance(err, SendError) and (err.code, err.sid) == (ErrorCode.LIMIT, 1)
    assert "presence_pushes_per_s=10" in err.message
    assert infos(ask(c))[-1] == "c"  # refused whole: the member is as it was
    # others are not limited by it
    assert len(pushes(sub(c, "m5", 1, info="m5"))) == 5
    # leaves are never refused, but spend the same budget: sub/unsub churn is held too
    c.handle(ClientFrameIn("x", Unsub(1), at))
    [err] = churn("e", at + 0.5)
    assert isinstance(err, SendError) and err.code is ErrorCode.LIMIT
    # it refills at its rate
    assert len(pushes(churn("f", at + 2.0))) == 5
