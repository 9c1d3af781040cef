"""The core's authorization decisions (core/auth.py), alone and as BrokerCore applies them:
tokens required, expiry judged on every request, refresh, claims, ownership of durable
subscriptions (hijack, lock, jump), and the Origin rule."""

from __future__ import annotations

import dataclasses
from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_core_broker import core, leading, members, only, recs

from tritonmq.core.actions import (
    LoadSubscriptions,
    ProposeState,
    RegisterSubscription,
    SendError,
    SendMeta,
    SendPubAck,
    SendSubOk,
)
from tritonmq.core.auth import (
    ANONYMOUS,
    ClientAuth,
    Principal,
    TokenRejected,
    broker_origins,
    origin_allowed,
    own_names,
)
from tritonmq.core.events import CasDone, CasOutcome, ClientFrameIn, SubscriptionRegistered, ZkView
from tritonmq.core.events import SubscriptionsLoaded as Loaded
from tritonmq.wire.frames import (
    Ack,
    Commit,
    ErrorCode,
    Fetch,
    From,
    Hello,
    Meta,
    Pub,
    Sub,
    SubDelete,
)

T0 = 1_800_000_000.0  # wall-clock seconds of the tests' frames
ALICE = Principal("alice", pub=("orders",), read=("orders",), names=("alice.*",), exp=T0 + 60)
MALLORY = Principal("mallory", pub=("*",), read=("*",), names=("*",), exp=T0 + 60)


def at(seconds: float = 0.0) -> int:
    return int((T0 + seconds) * 1000)


def hello(token: str = "tok") -> Hello:
    return Hello("test", token)


def code(refusal: SendError | None) -> ErrorCode | None:
    return None if refusal is None else refusal.code


# --- ClientAuth alone ----------------------------------------------------------------


def test_a_required_broker_refuses_every_frame_until_a_valid_token_names_someone() -> None:
    a = ClientAuth(required=True)
    assert code(a.check("c", Pub(1, "orders", []), None, at())) is ErrorCode.UNAUTHENTICATED
    assert code(a.check("c", Meta(2), None, at())) is ErrorCode.UNAUTHENTICATED
    refused = a.check("c", Sub(3, "orders", None, From.LATEST), None, at())
    assert refused is not None and (refused.code, refused.sid) == (ErrorCode.UNAUTHENTICATED, 3)
    assert code(a.check("c", Hello("no token"), None, at())) is ErrorCode.UNAUTHENTICATED
    bad = a.check("c", hello(), TokenRejected("InvalidSignatureError"), at())
    assert code(bad) is ErrorCode.UNAUTHENTICATED and "InvalidSignatureError" in bad.message
    assert a.check("c", hello(), ALICE, at()) is None
    assert a.check("c", Pub(4, "orders", []), None, at()) is None
    assert a.principal("c") == ALICE and a.principal("other") is None


def test_an_expired_token_is_refused_at_hello_and_on_each_later_request() -> None:
    a = ClientAuth(required=True)
    assert code(a.check("c", hello(), ALICE, at(61))) is ErrorCode.TOKEN_EXPIRED
    assert a.check("c", hello(), ALICE, at(10)) is None
    assert a.check("c", Pub(1, "orders", []), None, at(59)) is None
    late = a.check("c", Pub(2, "orders", []), None, at(60))
    assert late is not None and (late.code, late.id) == (ErrorCode.TOKEN_EXPIRED, 2)
    ack = a.check("c", Ack(7, 3), None, at(61))
    assert ack is not None and (ack.code, ack.sid) == (ErrorCode.TOKEN_EXPIRED, 7)


def test_a_fresh_hello_refreshes_the_token_of_the_same_principal_only() -> None:
    a = ClientAuth(required=True)
    a.check("c", hello(), ALICE, at())
    fresh = dataclasses.replace(ALICE, exp=T0 + 600)
    assert a.check("c", hello(), fresh, at(100)) is None
    assert a.check("c", Pub(1, "orders", []), None, at(100)) is None
    other = a.check("c", hello(), dataclasses.replace(MALLORY, exp=None), at(100))
    assert code(other) is ErrorCode.UNAUTHENTICATED and a.principal("c") == fresh
    assert code(a.check("c", hello(), TokenRejected("bad"), at(100))) is ErrorCode.UNAUTHENTICATED
    assert a.principal("c") == fresh, "a bad refresh keeps the token the connection had"
    assert a.check("c", Hello("no token"), None, at(100)) is None  # hello again, still alice


def test_a_connection_is_admitted_by_the_first_frame_it_may_send() -> None:
    """Issue 26: until then the shell holds it to hello_timeout and max_hello_bytes."""
    a = ClientAuth(required=True)
    for frame in (Pub(1, "orders", []), Meta(2), Hello("no token")):
        a.check("c", frame, None, at())
    a.check("c", hello(), TokenRejected("bad"), at())
    a.check("c", hello(), ALICE, at(61))  # expired
    assert not a.admitted("c"), "nothing but a valid token admits where tokens are required"
    a.check("c", hello(), ALICE, at())
    assert a.admitted("c") and not a.admitted("d")
    a.drop("c")
    assert not a.admitted("c")
    anonymous = ClientAuth(required=False)
    anonymous.check("c", hello(), TokenRejected("bad"), at())
    assert not anonymous.admitted("c"), "a refused hello admits nobody, anonymous or not"
    anonymous.check("c", Pub(1, "x", []), None, at())  # served as the anonymous principal
    assert anonymous.admitted("c")


def test_claims_allow_topics_and_names_by_pattern_and_nothing_by_default() -> None:
    a = ClientAuth(required=True)
    a.check("c", hello(), ALICE, at())
    assert a.check("c", Pub(1, "orders", []), None, at()) is None
    assert code(a.check("c", Pub(2, "payments", []), None, at())) is ErrorCode.FORBIDDEN
    assert code(a.check("c", Fetch(3, "payments", 0, 9, 10), None, at())) is ErrorCode.FORBIDDEN
    assert a.check("c", Sub(1, "orders", "alice.app", From.LATEST), None, at()) is None
    named = a.check("c", Sub(2, "orders", "bob.app", From.LATEST), None, at())
    assert named is not None and (named.code, named.sid) == (ErrorCode.FORBIDDEN, 2)
    assert code(a.check("c", Commit(4, "orders", "bob.app", 1), None, at())) is ErrorCode.FORBIDDEN
    admin_op = a.check("c", SubDelete(5, "orders", "alice.app", True), None, at())
    assert code(admin_op) is ErrorCode.FORBIDDEN, "admin ops need the admin claim"
    nobody = Principal("nobody")
    a.check("d", hello(), nobody, at())
    assert code(a.check("d", Pub(1, "orders", []), None, at())) is ErrorCode.FORBIDDEN


def test_without_auth_required_everyone_is_anonymous_and_may_do_everything() -> None:
    a = ClientAuth(required=False)
    assert a.principal("c") == ANONYMOUS
    for frame in (Pub(1, "x", []), Meta(2), SubDelete(3, "t", "n"), Hello("plain")):
        assert a.check("c", frame, None, at()) is None
    # a token is still honoured (and names the owner of what the connection creates)
    assert a.check("c", hello(), ALICE, at()) is None and a.principal("c") == ALICE


def test_a_subscription_belongs_to_its_creator_and_an_admin_does_not_take_it_over() -> None:
    a = ClientAuth(required=True)
    admin = Principal("root", read=("*",), names=("*",), admin=True)
    for conn, who in (("alice", ALICE), ("mallory", MALLORY), ("root", admin)):
        a.check(conn, hello(), who, at())
    durables: dict[tuple[str, str], object] = {}
    new = Sub(1, "orders", "alice.app", From.EARLIEST)
    assert a.may_use("alice", new, durables, 10) is None and a.owner_of(*new_key()) == "alice"
    durables[new_key()] = object()
    for conn in ("mallory", "root"):
        for frame in (
            Sub(2, "orders", "alice.app", From.LATEST),
            Sub(2, "orders", "alice.app", 5, mode="shared"),
            Commit(3, "orders", "alice.app", 9),
        ):
            assert code(a.may_use(conn, frame, durables, 10)) is ErrorCode.FORBIDDEN
    assert a.may_use("alice", Sub(4, "orders", "alice.app", From.LATEST), durables, 10) is None


def new_key() -> tuple[str, str]:
    return ("orders", "alice.app")


def test_a_subscription_without_a_recorded_owner_belongs_to_the_anonymous_principal() -> None:
    a = ClientAuth(required=False)
    a.loaded({("t", "owned"): "alice"})
    durables = {("t", "old"): object(), ("t", "owned"): object()}
    assert a.may_use("anon", Sub(1, "t", "old", From.LATEST), durables, 5) is None
    assert code(a.may_use("anon", Sub(2, "t", "owned", From.LATEST), durables, 5)) is (
        ErrorCode.FORBIDDEN
    )
    a.check("alice", hello(), ALICE, at())
    assert code(a.may_use("alice", Sub(3, "t", "old", From.LATEST), durables, 5)) is (
        ErrorCode.FORBIDDEN
    )


@pytest.mark.parametrize("start", [7, 2**63])
def test_an_existing_subscription_cannot_start_beyond_the_commit_point_plus_one(start: int) -> None:
    a = ClientAuth(required=False)
    durables = {("t", "s"): object()}
    jump = a.may_use("c", Sub(1, "t", "s", start), durables, 5)
    assert jump is not None and (jump.code, jump.sid) == (ErrorCode.BAD_REQUEST, 1)
    assert a.may_use("c", Sub(1, "t", "s", 6), durables, 5) is None
    assert a.may_use("c", Sub(1, "t", "s", start, resume=True), durables, 5) is None


def test_registrations_carry_the_owner() -> None:
    a = ClientAuth(required=False)
    a.check("c", hello(), ALICE, at())
    a.may_use("c", Sub(1, "orders", "alice.x", From.LATEST), {}, 0)
    out = a.owned([RegisterSubscription("orders", "alice.x", "broadcast", 0)])
    assert out == [RegisterSubscription("orders", "alice.x", "broadcast", 0, "alice")]


@pytest.mark.parametrize(
    ("origin", "host", "allowed", "ok"),
    [
        (None, "b:7000", (), True),  # not a browser
        ("http://b:7000", "b:7000", (), True),
        ("http://evil:7000", "b:7000", (), False),
        ("http://b:7001", "b:7000", (), False),
        ("https://b", "b", (), True),
        ("https://b", "b:443", (), True),
        ("http://b:80", "b", (), True),
        ("null", "b:7000", (), False),
        ("http://b:7000", None, (), False),
        ("https://app.example", "b:7000", ("https://app.example",), True),
        ("https://app.example/", "b:7000", ("https://app.example",), True),
        ("https://evil.example", "b:7000", ("https://app.example",), False),
        ("http://b:7000", "b:7000", ("https://app.example",), False),
        ("https://any.where", "b:7000", ("*",), True),
    ],
)
def test_origin_rule(origin: str | None, host: str | None, allowed: tuple[str, ...], ok: bool):
    assert origin_allowed(origin, host, allowed) is ok


CLUSTER = broker_origins(["ws://b:7000", "ws://c:7001", "wss://d.example", "ws://"])


@pytest.mark.parametrize(
    ("origin", "allowed", "ok"),
    [
        ("http://c:7001", (), True),  # the page another broker of the cluster served
        ("http://c:7001/", ("https://app.example",), True),  # besides the listed ones
        ("https://d.example:443", (), True),
        ("http://d.example", (), False),  # d serves https only
        ("https://c:7001", (), False),  # c serves http only
        ("http://c:7002", (), False),
        ("http://evil:7001", (), False),
        ("null", (), False),
    ],
)
def test_pages_of_the_clusters_own_brokers_are_allowed(
    origin: str, allowed: tuple[str, ...], ok: bool
) -> None:
    assert origin_allowed(origin, "b:7000", allowed, CLUSTER) is ok


# --- as BrokerCore applies them -------------------------------------------------------


def authed(c: object, conn: str, who: Principal, now: float = 0.0) -> None:
    out = c.handle(ClientFrameIn(conn, hello(), 0.0, at(now), who))  # type: ignore[attr-defined]
    assert only(out, SendMeta), out


def test_the_core_answers_hello_with_meta_or_the_refusal_and_judges_each_request() -> None:
    c = leading(isr="a", live="a", replicas=1, auth_required=True)
    [err] = c.handle(ClientFrameIn("c", Hello("x"), 0.0, at()))
    assert isinstance(err, SendError) and err.code is ErrorCode.UNAUTHENTICATED
    [err] = c.handle(ClientFrameIn("c", Pub(1, "orders", recs("u1")), 0.0, at()))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.UNAUTHENTICATED, 1)
    authed(c, "c", ALICE)
    assert only(c.handle(ClientFrameIn("c", Pub(2, "orders", recs("u2")), 0.1, at(1))), SendPubAck)
    [err] = c.handle(ClientFrameIn("c", Pub(3, "orders", recs("u3")), 0.2, at(61)))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.TOKEN_EXPIRED, 3)
    authed(c, "c", dataclasses.replace(ALICE, exp=T0 + 600), 61)
    assert only(c.handle(ClientFrameIn("c", Pub(4, "orders", recs("u4")), 0.3, at(62))), SendPubAck)


def test_hijacking_locking_and_jumping_a_subscription_are_refused_by_the_core() -> None:
    c = leading(isr="a", live="a", replicas=1, auth_required=True)
    authed(c, "alice", ALICE)
    authed(c, "mallory", dataclasses.replace(MALLORY, names=("mallory.*", "alice.app")))
    c.handle(ClientFrameIn("alice", Pub(1, "orders", recs("u1", "u2")), 0.1, at()))
    out = c.handle(ClientFrameIn("alice", Sub(1, "orders", "alice.app", From.EARLIEST), 0.2, at()))
    assert only(out, RegisterSubscription) == [
        RegisterSubscription("orders", "alice.app", "broadcast", 0, "alice", fence=1)
    ]
    c.handle(SubscriptionRegistered("orders", "alice.app", 0, 0.3))
    for frame in (
        Sub(9, "orders", "alice.app", 2**63),
        Sub(9, "orders", "alice.app", From.LATEST, mode="shared"),
        Commit(9, "orders", "alice.app", 2),
    ):
        [err] = c.handle(ClientFrameIn("mallory", frame, 0.4, at()))
        assert isinstance(err, SendError) and err.code is ErrorCode.FORBIDDEN, frame
    # a name mallory's claims do not allow cannot be registered first (the lock)
    [err] = c.handle(ClientFrameIn("mallory", Sub(8, "orders", "alice.other", 0), 0.4, at()))
    assert isinstance(err, SendError) and err.code is ErrorCode.FORBIDDEN
    # alice herself cannot jump her own subscription past the commit point either
    [err] = c.handle(ClientFrameIn("alice", Sub(2, "orders", "alice.app", 2**63), 0.5, at()))
    assert isinstance(err, SendError) and err.code is ErrorCode.BAD_REQUEST
    assert c.delivery.durables[("orders", "alice.app")].offset == 0


def test_a_new_primary_judges_waiting_subs_by_the_owners_it_loaded() -> None:
    c2 = core("a", replicas=1, auth_required=True)
    [prop] = only(c2.handle(ZkView(None, members("a"), None, 0.0)), ProposeState)
    won = dataclasses.replace(prop.state, version=0)
    [load] = only(c2.handle(CasDone(prop.request, CasOutcome.OK, won, 0.0)), LoadSubscriptions)
    authed(c2, "mallory", MALLORY)
    authed(c2, "alice", ALICE)
    assert c2.handle(ClientFrameIn("mallory", Sub(1, "orders", "alice.app", 0), 0.1, at())) == []
    assert c2.handle(ClientFrameIn("alice", Sub(1, "orders", "alice.app", 0), 0.1, at())) == []
    found = [("orders", "alice.app", "broadcast", 0)]
    out = c2.handle(Loaded(load.request, found, 0.3, {("orders", "alice.app"): "alice"}))
    refused = [a for a in out if isinstance(a, SendError)]
    assert [(e.conn, e.code) for e in refused] == [("mallory", ErrorCode.FORBIDDEN)]
    assert [a.conn for a in only(out, SendSubOk)] == ["alice"]


_patterns = st.lists(st.sampled_from(["*", "a*", "a.b", "b?", "[ab]*", "x"]), max_size=3)
_principals = st.builds(
    Principal,
    st.text(min_size=1, max_size=5),
    _patterns.map(tuple),
    _patterns.map(tuple),
    _patterns.map(tuple),
    st.booleans(),
    st.none() | st.floats(T0 - 10, T0 + 10),
)
_names = st.text(alphabet="ab.x?*", min_size=1, max_size=6)
_frames = st.one_of(
    st.builds(Pub, st.integers(0, 9), _names, st.just([])),
    st.builds(Sub, st.integers(0, 9), _names, st.none() | _names, st.just(From.LATEST)),
    st.builds(Fetch, st.integers(0, 9), _names, st.just(0), st.just(9), st.just(10)),
    st.builds(Commit, st.integers(0, 9), _names, _names, st.just(1)),
    st.builds(SubDelete, st.integers(0, 9), _names, _names),
    st.builds(Ack, st.integers(0, 9), st.just(1)),
    st.builds(Meta, st.integers(0, 9)),
)


@given(_principals, _frames, st.floats(-10, 10), st.booleans())
def test_every_refusal_names_its_request_and_a_matching_claim_is_never_forbidden(
    who: Principal, frame: object, t: float, required: bool
) -> None:
    a = ClientAuth(required=required)
    a.check("c", hello(), who, at(-20))
    refused = a.check("c", frame, None, at(t))  # type: ignore[arg-type]
    if refused is None:
        return
    if isinstance(frame, Sub | Ack):
        assert refused.sid == frame.sid and refused.id is None
    else:
        assert refused.id == frame.id and refused.sid is None  # type: ignore[attr-defined]
    expired = who.exp is not None and T0 + t >= who.exp
    if expired:
        assert refused.code is ErrorCode.TOKEN_EXPIRED
    else:
        assert refused.code is ErrorCode.FORBIDDEN
        if isinstance(frame, Pub):
            assert not any(fnmatchcase(frame.topic, p) for p in who.pub)


def test_a_commit_cannot_move_an_offset_past_the_commit_point() -> None:
    """Issue 26: in anonymous mode `commit ts=2**53-1` acknowledged another application's
    waiting records and every later one; the no-jump rule held for `sub` only."""
    from tritonmq.core.actions import SendCommitted

    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("p", Pub(1, "orders", recs("u1", "u2")), 0.1))
    c.handle(ClientFrameIn("app", Sub(1, "orders", "app", From.EARLIEST), 0.2))
    c.handle(SubscriptionRegistered("orders", "app", 0, 0.3))
    for ts in (2**53 - 1, 3):
        [err] = c.handle(ClientFrameIn("other", Commit(7, "orders", "app", ts), 0.4))
        assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.BAD_REQUEST, 7)
        assert "commit point 2" in err.message
        assert c.delivery.durables[("orders", "app")].offset == 0
    # a new subscription cannot be created past it either
    [err] = c.handle(ClientFrameIn("other", Commit(8, "orders", "new", 2**40), 0.4))
    assert isinstance(err, SendError) and err.code is ErrorCode.BAD_REQUEST
    assert ("orders", "new") not in c.delivery.durables
    out = c.handle(ClientFrameIn("other", Commit(9, "orders", "app", 2), 0.5))
    assert only(out, SendCommitted) == [SendCommitted("other", 9, 2, 2)]


def test_a_commit_of_records_held_but_not_committed_yet_is_refused_retriably() -> None:
    c = leading()  # the ISR is abc: nothing commits before b and c have it
    c.handle(ClientFrameIn("p", Pub(1, "orders", recs("u1", "u2")), 0.1))
    [err] = c.handle(ClientFrameIn("spark", Commit(3, "orders", "q", 2), 0.2))
    assert isinstance(err, SendError) and (err.code, err.id) == (ErrorCode.UNAVAILABLE, 3)
    assert ("orders", "q") not in c.delivery.durables


def test_a_refresh_that_narrows_the_claims_ends_the_subscriptions_no_longer_granted() -> None:
    """Issue 26: a new `hello` whose token no longer granted a topic left the connection's
    subscriptions to it flowing."""
    c = leading(isr="a", live="a", replicas=1, auth_required=True)
    wide = Principal("alice", read=("orders", "news"), names=("alice.*",), exp=T0 + 60)
    authed(c, "alice", wide)
    for frame in (
        Sub(1, "orders", None, From.LATEST),
        Sub(2, "news", None, From.LATEST),
        Sub(3, "orders", "alice.app", From.LATEST),
    ):
        c.handle(ClientFrameIn("alice", frame, 0.1, at()))
    c.handle(SubscriptionRegistered("orders", "alice.app", 0, 0.2))
    assert c.delivery.subscriptions_of("alice") == 3
    narrow = dataclasses.replace(wide, read=("orders",), names=(), exp=T0 + 600)
    out = c.handle(ClientFrameIn("alice", hello(), 0.3, at(30), narrow))
    assert only(out, SendMeta)
    ended = sorted((e.sid, e.code) for e in only(out, SendError))
    assert ended == [(2, ErrorCode.FORBIDDEN), (3, ErrorCode.FORBIDDEN)]
    assert c.delivery.subscriptions_of("alice") == 1
    # nothing of "news" reaches it any more; "orders" still does
    c.handle(ClientFrameIn("p", Hello("p", "tok"), 0.4, at(30), MALLORY))
    out = c.handle(ClientFrameIn("p", Pub(1, "news", recs("n1")), 0.5, at(31)))
    out += c.handle(ClientFrameIn("p", Pub(2, "orders", recs("o1")), 0.5, at(31)))
    from tritonmq.core.actions import Deliver

    assert sorted((d.conn, d.sid) for d in only(out, Deliver)) == [("alice", 1)]


def test_the_same_origin_rule_needs_one_of_the_brokers_own_names() -> None:
    """Issue 26: DNS rebinding passed the default check, which compared the Origin with the
    Host header only: a page of http://evil.example:7000 whose name had been rebound to
    the broker's address sends Host evil.example:7000 too."""
    local = own_names("ws://127.0.0.1:7000", "127.0.0.1", "", "box")
    assert local == frozenset({"127.0.0.1", "localhost", "::1"})
    assert not origin_allowed("http://evil.example:7000", "evil.example:7000", (), names=local)
    for host in ("localhost:7000", "127.0.0.1:7000", "[::1]:7000"):
        origin = f"http://{host}"
        assert origin_allowed(origin, host, (), names=local), host
    assert not origin_allowed("http://localhost:7001", "localhost:7000", (), names=local)
    public = own_names("ws://mq.example.com:7000", "10.0.0.5", "mq.example.com", "box")
    assert public == frozenset({"mq.example.com", "10.0.0.5"})
    assert origin_allowed("https://mq.example.com", "mq.example.com", (), names=public)
    assert not origin_allowed("http://localhost:7000", "localhost:7000", (), names=public)
    anywhere = own_names("ws://0.0.0.0:7000", "0.0.0.0", "", "box")
    assert anywhere == frozenset({"box", "localhost", "127.0.0.1", "::1"})
    # a listed origin or a page of the cluster's brokers is allowed whatever the names
    assert origin_allowed("https://app.example", "evil:1", ("https://app.example",), names=local)
    cluster = broker_origins(["ws://b:7000"])
    assert origin_allowed("http://b:7000", "b:7000", (), cluster, names=local)
