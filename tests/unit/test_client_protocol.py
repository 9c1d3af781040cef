"""The client protocol with no event loop: events in, actions out, a clock we move by hand."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tritonmq.client.consuming as consuming_module
import tritonmq.client.events as events_module
import tritonmq.client.pending as pending_module
import tritonmq.client.protocol as protocol_module
import tritonmq.client.states as states_module
from tests.unit.clientharness import A, B, C, Harness, recs
from tritonmq.client.events import (
    Action,
    Answered,
    Close,
    Connect,
    Disconnect,
    EpochSeen,
    Probe,
    Publish,
    PublishDone,
    PublishFailed,
    Request,
    RequestFailed,
    Resolve,
    Resolved,
    ResolveFailed,
    Subscribe,
    SubscriptionFailed,
    Tick,
    TransportClosed,
    TransportFailed,
    TransportOpened,
    WakeAt,
)
from tritonmq.client.protocol import ClientProtocol, Settings
from tritonmq.client.states import ConnState
from tritonmq.errors import (
    ClientClosed,
    PublishTimeout,
    Purged,
    TlsError,
    Unavailable,
    WrongGroup,
)
from tritonmq.wire.frames import (
    Commit,
    Committed,
    Error,
    ErrorCode,
    Fetch,
    Fetched,
    From,
    Hello,
    Meta,
    MetaReply,
    PubAck,
    Sub,
    SubOk,
)


def test_the_protocol_modules_do_no_io() -> None:
    banned = {"asyncio", "socket", "kazoo", "websockets", "time", "random", "os", "threading"}
    for module in (protocol_module, consuming_module, states_module, events_module, pending_module):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {m.split(".")[0] for m in imported} & banned, module.__name__


# --- connecting -----------------------------------------------------------------------


def test_connects_through_candidates_and_follows_a_primary_hint() -> None:
    h = Harness()
    assert h(Tick()) == [Resolve()]
    out = h(Resolved((B, C)))
    assert out[0] == Connect(1, B) and h.p.state is ConnState.CONNECTING
    h(TransportOpened(1))
    out = h.frame(MetaReply(0, "g1", "b", "backup", 3, "a", A))
    assert out[:2] == [Disconnect(1), Connect(2, A)]  # the hint goes first
    h(TransportOpened(2))
    h.frame(MetaReply(0, "g1", "a", "primary", 3))
    assert (h.p.state, h.p.url, h.p.epoch, h.p.group) == (ConnState.CONNECTED, A, 3, "g1")


def test_a_broker_of_another_group_is_not_taken() -> None:
    h = Harness(group="g2")
    h(Tick())
    h(Resolved((A, B)))
    h(TransportOpened(1))
    out = h.frame(MetaReply(0, "g1", "a", "primary", 1))
    assert out[:2] == [Disconnect(1), Connect(2, B)]


def test_handshake_timeout_moves_on() -> None:
    h = Harness(handshake_timeout=2.0)
    h(Tick())
    h(Resolved((A, B)))
    h(TransportOpened(1))
    h.now += 2.0
    assert h(Tick())[:2] == [Disconnect(1), Connect(2, B)]


def test_backoff_with_jitter_stays_in_bounds_and_grows() -> None:
    h = Harness(backoff_base=0.1, backoff_max=2.0)
    delays = []
    for _ in range(8):
        h(Tick())
        assert h.p.state is ConnState.RESOLVING
        h(Resolved((A,)))
        out = h(TransportFailed(h.p.conn, "refused"))
        assert h.p.state is ConnState.DISCONNECTED
        wake = [a.at for a in out if isinstance(a, WakeAt)]
        delays.append(wake[0] - h.now)
        assert h(Tick()) == [WakeAt(wake[0])]  # too early: nothing but the same wake
        h.now = wake[0]
    caps = [min(2.0, 0.1 * 2**i) for i in range(8)]
    assert all(c / 2 <= d <= c for d, c in zip(delays, caps, strict=True)), delays
    assert delays[-1] > delays[0]


@given(st.integers(0, 60), st.floats(0, 0.999999))
def test_backoff_delay_bounds(failures: int, r: float) -> None:
    p = ClientProtocol(Settings(backoff_base=0.02, backoff_max=0.5), lambda: r)
    cap = min(0.5, 0.02 * 2**failures)
    assert cap / 2 <= p.backoff_delay(failures) <= cap


def test_a_round_with_a_refused_tls_handshake_fails_what_is_pending_at_once() -> None:
    h = Harness(timeout=30.0)
    h(Tick())
    h(Publish(1, "t", recs(1)))
    h(Request(2, Meta(0)))
    h(Subscribe(3, "t", None, From("latest")))
    h(Resolved((A, B)))
    assert h(TransportFailed(h.p.conn, "refused")) == [Connect(2, B)]  # a plain failure: next
    out = h(TransportFailed(h.p.conn, "SSLCertVerificationError(...)", tls=True))
    failed = {type(a): a for a in out if isinstance(a, PublishFailed | RequestFailed)}
    failed |= {type(a): a for a in out if isinstance(a, SubscriptionFailed)}
    assert set(failed) == {PublishFailed, RequestFailed, SubscriptionFailed}
    for a in failed.values():
        assert isinstance(a.error, TlsError) and "SSLCertVerificationError" in str(a.error)
        assert not a.error.retriable
    assert h.p.state is ConnState.DISCONNECTED  # the link itself keeps trying for new calls
    h.now += 1
    h(Tick())
    h(Publish(4, "t", recs(1)))
    h(Tick())
    h(Resolved((A,)))
    h(TransportOpened(h.p.conn))
    out = h.frame(MetaReply(0, "g1", "a", "primary", 1))
    assert [p.records for p in h.pubs(out)] == [recs(1)]  # only the new one: the old one failed


def test_a_tls_refusal_by_one_broker_does_not_fail_calls_another_broker_takes() -> None:
    h = Harness(timeout=30.0)
    h(Tick())
    h(Publish(1, "t", recs(1)))
    h(Tick())
    h(Resolved((A, B)))
    assert h(TransportFailed(h.p.conn, "bad certificate", tls=True)) == [Connect(2, B)]
    h(TransportOpened(h.p.conn))
    out = h.frame(MetaReply(0, "g1", "b", "primary", 1))
    assert not [a for a in out if isinstance(a, PublishFailed)]
    assert h.frame(PubAck(1, (5,), "g1")) == [PublishDone(1, (5,), "g1")]


def test_a_failed_cluster_read_is_retried_not_the_end() -> None:
    h = Harness(timeout=10.0)
    h(Tick())
    h(Publish(1, "t", recs(1)))
    h(ResolveFailed("ConnectionLoss()"))
    assert h.p.state is ConnState.DISCONNECTED and "ConnectionLoss" in h.p.last_error
    h.now += 1
    assert Resolve() in h(Tick())
    h(Resolved((A,)))
    h(TransportOpened(h.p.conn))
    out = h.frame(MetaReply(0, "g1", "a", "primary", 1))
    assert [p.records for p in h.pubs(out)] == [recs(1)]
    assert h.frame(PubAck(1, (5,), "g1")) == [PublishDone(1, (5,), "g1")]


# --- batching and the in-flight window --------------------------------------------------


def test_records_are_batched_per_topic_at_batch_size_or_on_the_next_turn() -> None:
    h = Harness(batch_size=3)
    h.connect()
    out = h(Publish(1, "t", recs(2)))
    assert h.pubs(out) == [] and WakeAt(h.now) in out
    out = h(Publish(2, "t", recs(2, "w")))  # 4 >= 3: flushed now, in batches of 3 and 1
    assert [(p.id, len(p.records)) for p in h.pubs(out)] == [(1, 3), (2, 1)]
    h(Publish(3, "u", recs(1)))
    assert [(p.topic, p.id) for p in h.pubs(h(Tick()))] == [("u", 3)]
    # Tickets spanning batches are answered once every part is acknowledged, in order.
    assert h.frame(PubAck(1, (10, 11, 12), "g1")) == [PublishDone(1, (10, 11), "g1")]
    assert h.frame(PubAck(2, (13,), "g1")) == [PublishDone(2, (12, 13), "g1")]


def test_the_eras_a_puback_names_reach_each_publish_in_its_records_order() -> None:
    """A moved slot (docs/protocol.md §6): a ticket spanning batches gets each record's era,
    -1 (unknown) for a part whose puback named none."""
    h = Harness(batch_size=3)
    h.connect()
    h(Publish(1, "t", recs(2)))
    [p1, p2] = h.pubs(h(Publish(2, "t", recs(2, "w"))))
    assert h.frame(PubAck(p1.id, (10, 11, 77), "g2", (1, 1, 0))) == [
        PublishDone(1, (10, 11), "g2", (1, 1))
    ]
    assert h.frame(PubAck(p2.id, (13,), "g2")) == [PublishDone(2, (77, 13), "g2", (0, -1))]


def test_records_of_one_topic_asked_at_different_durability_levels_go_in_different_batches() -> (
    None
):
    """A batch is acknowledged at one level (docs/replication.md D4): a `synced` call is not
    mixed with calls that asked for less, nor held up by them."""
    h = Harness()
    h.connect()
    h(Publish(1, "t", recs(1), "synced"))
    h(Publish(2, "t", recs(1, "w")))
    h(Publish(3, "t", recs(1, "x"), "synced"))
    pubs = h.pubs(h(Tick()))
    assert sorted((p.durability, len(p.records)) for p in pubs) == [("", 1), ("synced", 2)]


def test_linger_holds_a_batch_back() -> None:
    h = Harness(linger=0.5)
    h.connect()
    out = h(Publish(1, "t", recs(1)))
    assert WakeAt(h.now + 0.5) in out
    assert h.pubs(h(Tick())) == []
    h.now += 0.5
    assert len(h.pubs(h(Tick()))) == 1


def test_in_flight_window_is_bounded_and_refilled_by_acks() -> None:
    h = Harness(batch_size=1, max_in_flight=3)
    h.connect()
    out = h(Publish(1, "t", recs(5)))
    assert [p.id for p in h.pubs(out)] == [1, 2, 3] and h.p.in_flight == 3
    out = h.frame(PubAck(2, (2,), "g1"))
    assert [p.id for p in h.pubs(out)] == [4]
    out = h.frame(PubAck(1, (1,), "g1"))
    assert [p.id for p in h.pubs(out)] == [5]
    assert h.p.in_flight == 3


def test_publishes_wait_for_a_connection() -> None:
    h = Harness()
    h(Publish(1, "t", recs(2)))
    assert h.pubs(h(Tick())) == []
    h.connect()
    assert [p.records for p in h.pubs()] == [recs(2)]


# --- retries, redirects, epochs -----------------------------------------------------------


def test_after_a_drop_every_unacked_batch_is_resent_in_order_with_the_same_uuids() -> None:
    h = Harness(batch_size=2, max_in_flight=2)
    h.connect(A)
    h(Publish(1, "t", recs(8)))
    first = h.pubs()
    assert [p.id for p in first] == [1, 2]
    h.frame(PubAck(1, (1, 2), "g1"))
    h(TransportClosed(h.p.conn, "gone"))
    assert h.p.state is ConnState.DISCONNECTED and h.p.in_flight == 0
    h.actions.clear()
    h.connect(B, epoch=2)
    again = h.pubs()
    assert [p.id for p in again] == [2, 3]  # the window again, oldest first
    assert again[0] == first[1]  # the same batch: same id, same uuids
    h.frame(PubAck(2, (3, 4), "g1"))
    h.frame(PubAck(3, (5, 6), "g1"))
    out = h.frame(PubAck(4, (7, 8), "g1"))
    assert out == [PublishDone(1, (1, 2, 3, 4, 5, 6, 7, 8), "g1")]


def test_a_retriable_refusal_reconnects_after_a_pause_and_resends_everything() -> None:
    h = Harness(batch_size=1)
    h.connect(A)
    h(Publish(1, "t", recs(3)))
    out = h.frame(Error.of(ErrorCode.NOT_ENOUGH_REPLICAS, "isr", id=2))
    assert out[0] == Disconnect(h.p.conn) and h.p.state is ConnState.DISCONNECTED
    wake = next(a.at for a in out if isinstance(a, WakeAt))
    assert wake == pytest.approx(h.now + 0.05)
    h.actions.clear()
    h.now = wake
    h.connect(A)
    assert [p.id for p in h.pubs()] == [1, 2, 3]


def test_not_primary_with_a_hint_goes_there_first() -> None:
    h = Harness()
    h.connect(A)
    h(Publish(1, "t", recs(1)))
    h(Tick())
    out = h.frame(Error.of(ErrorCode.NOT_PRIMARY, "moved", id=1, primary=C))
    h.now += 1
    out = h(Tick())
    assert Connect(h.p.conn, C) in out and Resolve() not in out


def test_wrong_group_fails_the_batch_for_the_caller_to_reroute() -> None:
    h = Harness()
    h.connect()
    h(Publish(1, "t", recs(1)))
    h(Tick())
    out = h.frame(Error.of(ErrorCode.WRONG_GROUP, "there", id=1, group="g2"))
    assert len(out) == 1 and isinstance(out[0], PublishFailed)
    assert isinstance(out[0].error, WrongGroup) and out[0].error.group == "g2"
    assert h.p.state is ConnState.CONNECTED


def test_wrong_group_fails_every_later_batch_of_its_topic_and_none_is_resent() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_batch_behind_one_refused_wrong_group_waits_for_its_resend_across_a_roll_back`: the broker holds back the batches behind a WRONG_GROUP refusal
    on that connection; they fail with it, in order, for the caller to re-route behind
    it, and a new connection must not resend one ahead of the refused batch."""
    h = Harness(batch_size=1, max_in_flight=2)
    h.connect()
    for ticket, topic in enumerate(["t", "t", "other", "t"], 1):
        h(Publish(ticket, topic, recs(1, f"u{ticket}")))
    h(Tick())
    h(Publish(5, "t", recs(1, "u5")))  # buffered, not yet a batch
    out = h.frame(Error.of(ErrorCode.WRONG_GROUP, "there", id=1, group="g2"))
    failed = [a.ticket for a in out if isinstance(a, PublishFailed)]
    assert failed == [1, 2, 4, 5], "every later one of topic t, in call order; not 'other'"
    assert [p.topic for p in h.pubs(out)] == ["other"], "none of t goes out meanwhile"
    h.actions.clear()
    h(TransportClosed(h.p.conn, "gone"))
    h.now += 1
    h.connect()
    assert [p.topic for p in h.pubs()] == ["other"]


def test_a_non_retriable_error_fails_only_its_batch() -> None:
    h = Harness(batch_size=1)
    h.connect()
    h(Publish(1, "t", recs(1)))
    h(Publish(2, "t", recs(1)))
    out = h.frame(Error.of(ErrorCode.BAD_FRAME, "bad", id=1))
    assert [type(a) for a in out] == [PublishFailed] and h.p.unacknowledged == [2]


def test_publishes_time_out_naming_the_last_error() -> None:
    h = Harness(timeout=5.0)
    h(Publish(1, "t", recs(1)))
    h(Tick())
    h(ResolveFailed("NoNodeError"))
    h.now += 5.0
    out = h(Tick())
    failed = [a for a in out if isinstance(a, PublishFailed)]
    assert len(failed) == 1 and isinstance(failed[0].error, PublishTimeout)
    assert "NoNodeError" in failed[0].error.message


def test_a_newer_epoch_elsewhere_moves_the_connection_at_once() -> None:
    h = Harness(batch_size=1)
    h.connect(A, epoch=4)
    h(Publish(1, "t", recs(2)))
    assert h(EpochSeen(4, A)) == []  # same epoch: stay
    out = h(EpochSeen(5, B))
    assert out[0] == Disconnect(h.p.conn)
    out = h(Tick())
    assert Connect(h.p.conn, B) in out
    h.actions.clear()
    h(TransportOpened(h.p.conn))
    h.frame(MetaReply(0, "g1", "b", "primary", 5))
    assert [p.id for p in h.pubs()] == [1, 2] and h.p.epoch == 5


def test_a_stalled_request_asks_the_other_brokers_once_per_interval() -> None:
    h = Harness(probe_after=1.0)
    h.connect(A)
    h(Publish(1, "t", recs(1)))
    assert [a for a in h(Tick()) if isinstance(a, Probe)] == []
    h.now += 1.0
    assert Probe(A) in h(Tick())
    h.now += 0.5
    assert [a for a in h(Tick()) if isinstance(a, Probe)] == []  # one at a time
    h(EpochSeen(1, A))  # nothing moved
    h.now += 0.5
    assert Probe(A) in h(Tick())
    out = h(EpochSeen(2, B))
    assert Disconnect(h.p.conn) in out


def test_no_probe_without_a_waiting_request_or_when_disabled() -> None:
    h = Harness(probe_after=1.0)
    h.connect(A)
    h.now += 10
    assert h(Tick()) == []
    h2 = Harness()
    h2.connect(A)
    h2(Publish(1, "t", recs(1)))
    h2.now += 10
    assert [a for a in h2(Tick()) if isinstance(a, Probe)] == []


def test_a_subscriber_that_hears_nothing_checks_its_primary_and_probes_a_silent_one() -> None:
    """Rule 5 for a client that only subscribes: no batch waits on the wire, so after
    ``probe_after`` of silence it sends ``hello``; a primary that answers (any frame)
    is alive, one that stays silent (frozen) gets the others asked, and a newer epoch
    elsewhere moves the subscription there at once."""
    h = Harness(probe_after=1.0)
    h.connect(A)
    h(Subscribe(1, "t", None, From.LATEST))
    h.frame(SubOk(1, 5))
    h.now += 0.5
    assert h.sent(h(Tick())) == []
    h.now += 0.5
    assert h.sent(h(Tick())) == [Hello("tritonmq-python")]
    h.frame(MetaReply(0, "g1", "a", "primary", 1))  # alive: no probe
    h.now += 0.9
    out = h(Tick())
    assert h.sent(out) == [] and not [a for a in out if isinstance(a, Probe)]
    h.now += 0.1
    assert h.sent(h(Tick())) == [Hello("tritonmq-python")]  # silent again: ask again
    h.now += 1.0
    assert Probe(A) in h(Tick()), "a frozen primary was not probed"
    out = h(EpochSeen(2, B))
    assert Disconnect(h.p.conn) in out
    h.connect(B, epoch=2)
    [sub] = [f for f in h.sent() if isinstance(f, Sub)][-1:]
    assert sub.resume and h.p.url == B


def test_wake_ups_for_the_liveness_hello_follow_the_silence() -> None:
    h = Harness(probe_after=1.0)
    h.connect(A)
    assert WakeAt(pytest.approx(h.now + 1.0)) in h(Subscribe(1, "t", None, From.LATEST))
    h.now += 0.4
    h.frame(SubOk(1, 5))
    h.now += 0.7
    out = h(Tick())
    assert h.sent(out) == [], "a hello although the primary spoke 0.7 s ago"
    assert WakeAt(pytest.approx(h.now + 0.3)) in out


# --- requests answered once: fetch, commit, meta (spark support) --------------------------


def test_requests_take_ids_from_the_batch_counter_and_wait_for_a_connection() -> None:
    h = Harness()
    assert h.sent(h(Request(1, Fetch(0, "t", 1, 9, 100, True)))) == []
    h.connect(A)
    assert h.sent() == [Hello("tritonmq-python"), Fetch(1, "t", 1, 9, 100, True)]
    h(Publish(2, "t", recs(1)))
    h(Tick())
    h.actions.clear()
    h(Request(3, Commit(0, "t", "q", 5)))
    h(Request(4, Meta(0)))
    assert h.sent() == [Commit(3, "t", "q", 5), Meta(4)]  # batch 2 took id 2
    got = Fetched(1, (), 10, ((1, 50),), None)
    assert h.frame(got) == [Answered(1, got)]
    assert h.frame(Committed(3, 5, 8)) == [Answered(3, Committed(3, 5, 8))]
    meta = MetaReply(4, "g1", "a", "primary", 1, commit=8, topics=("t",))
    assert h.frame(meta) == [Answered(4, meta)]
    assert h.frame(got) == [], "answered once"


def test_an_unanswered_request_is_resent_on_the_next_connection() -> None:
    h = Harness()
    h.connect(A)
    h(Request(1, Commit(0, "t", "q", 5)))
    h(TransportClosed(h.p.conn, "gone"))
    h.actions.clear()
    h.connect(B, epoch=2)
    assert Commit(1, "t", "q", 5) in h.sent()


def test_a_retriable_refusal_of_a_request_reconnects_and_asks_again() -> None:
    h = Harness()
    h.connect(A)
    h(Request(1, Commit(0, "t", "q", 5)))
    out = h.frame(Error.of(ErrorCode.NOT_PRIMARY, "moved", id=1, primary=C))
    assert out[0] == Disconnect(h.p.conn) and not [a for a in out if isinstance(a, RequestFailed)]
    h.actions.clear()
    h.now += 1
    h.connect(C, epoch=2)
    assert Commit(1, "t", "q", 5) in h.sent()


def test_purged_and_wrong_group_fail_the_request_and_keep_the_connection() -> None:
    h = Harness()
    h.connect(A)
    h(Request(1, Fetch(0, "t", 1, 9, 100)))
    h(Request(2, Fetch(0, "u", 1, 9, 100)))
    [gone] = h.frame(Error.of(ErrorCode.PURGED, "1..3 purged", id=1, first=1, last=3))
    assert isinstance(gone, RequestFailed) and gone.ticket == 1
    assert isinstance(gone.error, Purged) and (gone.error.first, gone.error.last) == (1, 3)
    [moved] = h.frame(Error.of(ErrorCode.WRONG_GROUP, "there", id=2, group="g2"))
    assert isinstance(moved, RequestFailed) and isinstance(moved.error, WrongGroup)
    assert h.p.state is ConnState.CONNECTED


def test_a_request_times_out_and_close_fails_the_rest() -> None:
    h = Harness(timeout=5.0)
    h(Request(1, Meta(0)))
    h(Tick())
    h(ResolveFailed("NoNodeError"))
    h.now += 5.0
    [failed] = [a for a in h(Tick()) if isinstance(a, RequestFailed)]
    assert failed.ticket == 1 and isinstance(failed.error, Unavailable)
    assert "NoNodeError" in failed.error.message
    h(Request(2, Meta(0)))
    out = h(Close())
    assert [(a.ticket, type(a.error)) for a in out if isinstance(a, RequestFailed)] == [
        (2, ClientClosed)
    ]
    [after] = h(Request(3, Meta(0)))
    assert isinstance(after, RequestFailed) and isinstance(after.error, ClientClosed)


# --- properties ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(["publish", "ack", "drop", "refuse", "tick", "epoch"]),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_every_record_is_acknowledged_once_in_order_whatever_happens(
    steps: list[str], batch_size: int, window: int
) -> None:
    """A model broker that stamps by uuid: every publish ends acknowledged, each uuid gets
    one ts, and the ts of one producer's records rise in publish order."""
    h = Harness(batch_size=batch_size, max_in_flight=window, timeout=1e9)
    stamped: dict[bytes, int] = {}
    n = 0
    epoch = 1

    def broker_answers(out: list[Action]) -> None:
        for pub in h.pubs(out):
            ts = tuple(stamped.setdefault(r[0], len(stamped) + 1) for r in pub.records)
            pending.append(PubAck(pub.id, ts, "g1"))

    pending: list[PubAck] = []

    def reconnect() -> None:
        h.now += 2
        pending.clear()
        mark = len(h.actions)
        h.connect(A if epoch % 2 else B, epoch)
        broker_answers(h.actions[mark:])

    reconnect()
    for step in steps:
        if h.p.state is not ConnState.CONNECTED:
            reconnect()
            continue
        match step:
            case "publish":
                n += 1
                broker_answers(h(Publish(n, "t", recs(3, f"p{n}-"))))
            case "tick":
                broker_answers(h(Tick()))
            case "ack" if pending:
                broker_answers(h.frame(pending.pop(0)))
            case "drop":
                pending.clear()
                h(TransportClosed(h.p.conn))
            case "refuse" if pending:
                pub_id = pending.pop(0).id
                pending.clear()
                h.frame(Error.of(ErrorCode.UNAVAILABLE, "later", id=pub_id))
            case "epoch":
                epoch += 1
                pending.clear()
                h(EpochSeen(epoch, A if epoch % 2 else B))
    for _ in range(200):
        if h.p.state is not ConnState.CONNECTED:
            reconnect()
        elif pending:
            broker_answers(h.frame(pending.pop(0)))
        else:
            broker_answers(h(Tick()))
    done = {a.ticket: a.ts for a in h.actions if isinstance(a, PublishDone)}
    assert not [a for a in h.actions if isinstance(a, PublishFailed)]
    assert sorted(done) == list(range(1, n + 1))
    flat = [ts for t in sorted(done) for ts in done[t]]
    assert flat == sorted(flat) and len(set(flat)) == len(flat)


# --- rule 10: tokens -----------------------------------------------------------------------


def test_hello_carries_the_token_and_a_new_one_is_sent_at_once_on_a_live_connection() -> None:
    from tritonmq.client.events import SetToken

    h = Harness()
    h.p.token = "t1"
    h(Tick())
    h(Resolved((A,)))
    assert h.sent(h(TransportOpened(h.p.conn))) == [Hello("tritonmq-python", "t1")]
    h.frame(MetaReply(0, "g1", "a", "primary", 1))
    assert h.p.state is ConnState.CONNECTED
    assert h.sent(h(SetToken("t2"))) == [Hello("tritonmq-python", "t2")]
    h(TransportClosed(h.p.conn, "gone"))
    h.now += 1
    h(Tick())
    h(Resolved((A,)))
    assert h.sent(h(TransportOpened(h.p.conn))) == [Hello("tritonmq-python", "t2")]


def test_a_refused_hello_fails_everything_waiting_with_its_typed_error_then_retries() -> None:
    from tritonmq.errors import TokenExpired

    h = Harness()
    h(Publish(1, "t", [(b"u", None, b"v", None)]))
    h(Subscribe(1, "t", None, From.LATEST))
    h(Request(2, Fetch(0, "t", 0, 9, 10)))
    h(Tick())
    h(Resolved((A, B)))
    h(TransportOpened(h.p.conn))
    out = h.frame(Error.of(ErrorCode.TOKEN_EXPIRED, "the token of 'alice' expired"))
    failed = [a for a in out if isinstance(a, PublishFailed | SubscriptionFailed | RequestFailed)]
    assert len(failed) == 3 and all(isinstance(a.error, TokenExpired) for a in failed)
    assert Disconnect(1) in out and h.p.state is ConnState.DISCONNECTED
    assert "TOKEN_EXPIRED" in h.p.last_error
    assert not h.p.unacknowledged and not h.p.in_flight
    h.now += 1
    h(Tick())
    assert h.p.state is ConnState.RESOLVING, "tried again later, with whatever token is set"


def test_admin_ops_are_requests_answered_by_subinfo() -> None:
    from tritonmq.wire.frames import SubDelete, SubInfo, SubReset

    h = Harness()
    h.connect()
    out = h(Request(7, SubReset(0, "t", "app", From.EARLIEST, True)))
    [frame] = h.sent(out)
    assert isinstance(frame, SubReset) and frame.id > 0 and frame.execute
    info = SubInfo(frame.id, "t", "app", "broadcast", "alice", 9, 0, "reset", 0, True)
    assert Answered(7, info) in h.frame(info)
    out = h(Request(8, SubDelete(0, "t", "app", True)))
    [frame] = h.sent(out)
    refused = h.frame(Error.of(ErrorCode.FORBIDDEN, "not an admin", id=frame.id))
    [failed] = [a for a in refused if isinstance(a, RequestFailed)]
    assert failed.ticket == 8 and failed.error.code == "FORBIDDEN"


def test_header_values_count_toward_the_batch_bytes() -> None:
    """Small values with 8 KB header values: counted by value alone, 30 of them made one
    ~250 KB frame past batch_bytes."""
    h = Harness(batch_size=1000, batch_bytes=100_000)
    h.connect()
    heavy = [(f"u{i}".encode(), None, b"v", {"trace": b"x" * 8192}) for i in range(30)]
    h(Publish(1, "t", heavy))
    pubs = h.pubs(h(Tick()))
    assert len(pubs) > 1 and [r for p in pubs for r in p.records] == heavy
    assert all(sum(len(r[3]["trace"]) for r in p.records) <= 100_000 for p in pubs)


def test_batches_are_cut_by_bytes_as_well_as_by_count() -> None:
    """1,000 records of 8 KB were one 8 MB frame, over the broker's max_frame_bytes: the
    broker closed with 1009 and the client resent the same batch until its timeout."""
    h = Harness(batch_size=1000, batch_bytes=100_000)
    h.connect()
    big = [(f"u{i}".encode(), None, b"x" * 8192, None) for i in range(30)]
    h(Publish(1, "t", big[:10]))
    h(Publish(2, "t", big[10:]))
    pubs = h.pubs(h(Tick()))
    assert [len(p.records) for p in pubs] == [12, 12, 6]
    assert [r for p in pubs for r in p.records] == big  # in order, nothing lost or repeated
    assert all(sum(len(r[2]) for r in p.records) <= 100_000 for p in pubs)
    # The tickets are answered from the parts that span the cut batches.
    assert h.frame(PubAck(1, tuple(range(1, 13)), "g1")) == [
        PublishDone(1, tuple(range(1, 11)), "g1")
    ]
    assert h.frame(PubAck(2, tuple(range(13, 25)), "g1")) == []
    assert h.frame(PubAck(3, tuple(range(25, 31)), "g1")) == [
        PublishDone(2, tuple(range(11, 31)), "g1")
    ]
