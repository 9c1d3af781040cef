"""BrokerCore driven by events alone: election, following, ISR CAS outcomes, suspicion,
PURGED for readers whose records are gone, planned stop."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tritonmq.config import BrokerConfig
from tritonmq.core.actions import (
    Action,
    CloseLink,
    Deliver,
    LoadSubscriptions,
    LogLine,
    ProposeState,
    ReadState,
    RegisterSubscription,
    SendDedup,
    SendEntries,
    SendError,
    SendFetched,
    SendLeader,
    SendPubAck,
    SendPurge,
    SendShared,
    SendSubOk,
    SendToPrimary,
    StartFollowing,
    StopFollowing,
    Stopped,
)
from tritonmq.core.broker import BrokerCore, Role
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    FollowerFrame,
    LinkEnd,
    LinkEvent,
    PrimaryFrame,
    SessionChanged,
    SessionState,
    StopRequested,
    SubscriptionRegistered,
    SubscriptionsLoaded,
    Tick,
    ZkView,
)
from tritonmq.core.group import GroupState, Member
from tritonmq.wire.frames import (
    Ack,
    Append,
    ErrorCode,
    Fetch,
    Follow,
    From,
    Pub,
    PubRecord,
    ReplAck,
    Sub,
)


def member(m: str) -> Member:
    return Member(m, f"ws://{m}:1", f"boot-{m}")


def members(ms: str) -> dict[str, Member]:
    return {m: member(m) for m in ms}


def state(epoch: int, primary: str, isr: str, start_ts: int = 1, version: int = 0) -> GroupState:
    return GroupState(epoch, primary, tuple(isr), {m: f"boot-{m}" for m in isr}, start_ts, version)


def core(me: str, **cfg: object) -> BrokerCore:
    settings = {"id": me, "min_insync": 2, "replica_lag_timeout": 2.0, **cfg}
    return BrokerCore(BrokerConfig(**settings), member(me))  # type: ignore[arg-type]


def only(actions: Sequence[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


def recs(*uuids: str) -> list[PubRecord]:
    return [(u.encode(), None, b"v-" + u.encode(), None) for u in uuids]


def leading(me: str = "a", isr: str = "abc", live: str = "abc", **cfg: object) -> BrokerCore:
    """A core that created the group and whose ISR ZooKeeper then shows as ``isr``."""
    c = core(me, **cfg)
    [prop] = only(c.handle(ZkView(None, members(live), None, 0.0)), ProposeState)
    assert prop.state.version == -1 and prop.state.primary == me
    out = c.handle(
        CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=0), 0.0)
    )
    [load] = only(out, LoadSubscriptions)
    c.handle(SubscriptionsLoaded(load.request, [], 0.0))
    c.handle(ZkView(state(1, me, isr, version=1), members(live), None, 0.0))
    assert c.role is Role.LEADING and c.primary is not None and c.primary.isr == set(isr)
    return c


LINK_B = "link-b"
"""The link follower ``b`` uses in these tests. A core knows its followers' links by
identity, as the shell's connection objects are; an equal string from another module is
another object, so tests elsewhere import this one."""


def attach(c: BrokerCore, fid: str, link: object, now: float = 0.0) -> list[Action]:
    hello = Follow(c.cfg.group, fid, f"boot-{fid}", c.primary.epoch, 0, [])  # type: ignore[union-attr]
    return c.handle(FollowerFrame(link, hello, now))


def following(
    me: str = "b", primary: str = "a", isr: str = "ab", live: str = "ab", **cfg: object
) -> BrokerCore:
    c = core(me, **cfg)
    out = c.handle(ZkView(state(1, primary, isr), members(live), None, 0.0))
    [start] = only(out, StartFollowing)
    assert start.primary == member(primary) and c.role is Role.FOLLOWING
    return c


# --- election -----------------------------------------------------------------------


def test_an_in_sync_backup_claims_when_the_primary_is_gone_and_leads_once_the_cas_wins() -> None:
    c = following()
    out = c.handle(ZkView(state(1, "a", "ab"), members("b"), None, 1.0))
    assert only(out, StopFollowing), "a claimant leaves the old epoch before its CAS"
    [prop] = only(out, ProposeState)
    assert (prop.state.epoch, prop.state.primary, prop.state.isr) == (2, "b", ("b",))
    assert c.role is Role.CLAIMING
    c.handle(CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=1), 1.1))
    assert c.role is Role.LEADING


def test_a_claim_of_unknown_outcome_is_adopted_when_the_re_read_shows_it_written() -> None:
    c = following()
    [prop] = only(c.handle(ZkView(state(1, "a", "ab"), members("b"), None, 1.0)), ProposeState)
    [read] = only(c.handle(CasDone(prop.request, CasOutcome.UNKNOWN, None, 1.1)), ReadState)
    assert c.role is Role.CLAIMING
    written = dataclasses.replace(prop.state, version=1)
    c.handle(ZkView(written, members("b"), None, 1.2, read=read.request))
    assert c.role is Role.LEADING and c.primary is not None and c.primary.epoch == 2


def stale_reclaim(first_reign: Sequence[str] = ()) -> tuple[BrokerCore, ProposeState]:
    """b wins epoch 2 (a is gone; c follows it and acks ``first_reign``); a late watch then
    shows epoch 1 again: b steps down and claims again from that stale view."""
    c = core("b", min_insync=2)
    c.handle(ZkView(state(1, "a", "abc"), members("abc"), None, 0.0))
    [first] = only(c.handle(ZkView(state(1, "a", "abc"), members("bc"), None, 1.0)), ProposeState)
    won = dataclasses.replace(first.state, version=1)
    [load] = only(c.handle(CasDone(first.request, CasOutcome.OK, won, 1.1)), LoadSubscriptions)
    c.handle(SubscriptionsLoaded(load.request, [], 1.1))
    attach(c, "c", "link-c", 1.2)
    if first_reign:
        c.handle(ClientFrameIn("prod", Pub(1, "t", recs(*first_reign)), 1.3))
        c.handle(FollowerFrame("link-c", ReplAck(2, len(first_reign)), 1.4))
    stale = c.handle(ZkView(state(1, "a", "abc"), members("bc"), None, 2.0))
    assert c.primary is None and only(stale, CloseLink)
    [again] = only(stale, ProposeState)
    assert again.state.epoch == 2 and again.request != first.request
    return c, again


def test_a_re_claim_from_a_stale_view_answered_with_our_own_epoch_leads_it_again() -> None:
    """Found by the simulator on a variant branch (not replayable here): b led epoch 2, a late watch made it step down
    and claim epoch 2 again with the same content; that CAS's outcome was unknown and the
    re-read showed epoch 2 naming b (its first claim), so b became primary of an epoch its
    log had already begun: ``epoch 2 does not follow 2`` took the process down."""
    c, again = stale_reclaim()
    [read] = only(c.handle(CasDone(again.request, CasOutcome.UNKNOWN, None, 2.1)), ReadState)
    reread = dataclasses.replace(again.state, version=1)  # what the first claim wrote
    c.handle(ZkView(reread, members("bc"), None, 2.2, read=read.request))
    assert c.role is Role.LEADING and c.primary is not None and c.primary.epoch == 2
    assert c.log.epochs == [(2, 1)], "epoch 2 began once"
    attach(c, "c", "link-c2", 2.3)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 2.4))
    out = c.handle(FollowerFrame("link-c2", ReplAck(2, 1), 2.5))
    assert only(out, SendPubAck) == [SendPubAck("prod", 1, (1,))]


def test_a_re_claim_of_our_own_epoch_that_succeeds_leads_it_again_without_a_crash() -> None:
    """The other way into the same epoch twice: the re-claim's CAS answers OK. ZooKeeper's
    versioned CAS from a stale view cannot succeed, but a core that raises would end the
    process, so the answer is taken as the re-read above is."""
    c, again = stale_reclaim()
    ok = dataclasses.replace(again.state, version=2)
    c.handle(CasDone(again.request, CasOutcome.OK, ok, 2.1))
    assert c.role is Role.LEADING and c.primary is not None and c.primary.epoch == 2
    assert c.log.epochs == [(2, 1)]


def test_a_stale_re_claim_after_writing_in_our_epoch_claims_the_next_one_on_top() -> None:
    """Same, but b wrote u1 in its first reign: the re-claim names start 2, the re-read shows
    start 1, so it did not happen; b claims epoch 3 after u1 and keeps u1, which c holds."""
    c, again = stale_reclaim(first_reign=["u1"])
    assert again.state.start_ts == 2
    [read] = only(c.handle(CasDone(again.request, CasOutcome.UNKNOWN, None, 2.1)), ReadState)
    st = state(2, "b", "bc", start_ts=1, version=1)
    reread = c.handle(ZkView(st, members("bc"), None, 2.2, read=read.request))
    [third] = only(reread, ProposeState)
    assert (third.state.epoch, third.state.start_ts) == (3, 2)
    c.handle(
        CasDone(third.request, CasOutcome.OK, dataclasses.replace(third.state, version=2), 2.3)
    )
    assert c.role is Role.LEADING and c.primary is not None and c.primary.epoch == 3
    assert c.log.epochs == [(2, 1), (3, 2)] and c.log.lookup(b"u1") == 1


# --- bug 3: an ISR CAS of unknown outcome ------------------------------------------------


def test_an_isr_cas_of_unknown_outcome_is_re_read_then_proposed_again_and_commits() -> None:
    """Bug 3: a ConnectionLoss during the CAS that drops lagging c must not leave the
    proposal set for good: re-read, see it did not happen, propose again, commit."""
    c = leading(isr="abc")
    attach(c, "b", LINK_B)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.1))
    c.handle(FollowerFrame(LINK_B, ReplAck(1, 1), 0.2))
    [prop] = only(c.handle(Tick(3.0)), ProposeState)
    assert prop.state.isr == ("a", "b")
    [read] = only(c.handle(CasDone(prop.request, CasOutcome.UNKNOWN, None, 3.1)), ReadState)
    st = state(1, "a", "abc", version=1)
    reread = c.handle(ZkView(st, members("abc"), None, 3.2, read=read.request))
    [again] = only(reread + c.handle(Tick(3.3)), ProposeState)  # it was not written: again
    assert again.state.isr == ("a", "b") and again.request != prop.request
    out = c.handle(
        CasDone(again.request, CasOutcome.OK, dataclasses.replace(again.state, version=2), 3.4)
    )
    assert only(out, SendPubAck) == [SendPubAck("prod", 1, (1,))]


def test_an_isr_cas_of_unknown_outcome_that_happened_is_applied() -> None:
    c = leading(isr="abc")
    attach(c, "b", LINK_B)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.1))
    c.handle(FollowerFrame(LINK_B, ReplAck(1, 1), 0.2))
    [prop] = only(c.handle(Tick(3.0)), ProposeState)
    [read] = only(c.handle(CasDone(prop.request, CasOutcome.UNKNOWN, None, 3.1)), ReadState)
    written = dataclasses.replace(prop.state, version=2)
    out = c.handle(ZkView(written, members("abc"), None, 3.2, read=read.request))
    assert only(out, SendPubAck) == [SendPubAck("prod", 1, (1,))]
    assert c.cas is None and c.primary is not None and c.primary.isr == {"a", "b"}


def test_an_isr_cas_of_unknown_outcome_is_judged_only_by_a_read_begun_after_the_answer() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_an_isr_cas_of_unknown_outcome_is_judged_by_a_read_begun_after_it`: the CAS admitting c ended in ConnectionLoss but was written; the view
    that came next had been read before it landed, so the primary judged it not written,
    stopped counting c, and acknowledged a record c lacked while ZooKeeper named c in the
    ISR (elected, c would have lost it). A view read before the re-read was asked decides
    nothing; c counts until one read after it does."""
    c = leading(isr="ab", live="abc")
    attach(c, "b", LINK_B)
    attach(c, "c", "link-c")
    [prop] = only(c.handle(FollowerFrame("link-c", ReplAck(1, 0), 0.2)), ProposeState)
    assert prop.state.isr == ("a", "b", "c")
    [read] = only(c.handle(CasDone(prop.request, CasOutcome.UNKNOWN, None, 0.3)), ReadState)
    before = state(1, "a", "ab", version=1)  # read before the CAS landed
    assert not only(c.handle(ZkView(before, members("abc"), None, 0.4)), ProposeState)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.5))
    assert not only(c.handle(FollowerFrame(LINK_B, ReplAck(1, 1), 0.6)), SendPubAck), "c counts"
    written = dataclasses.replace(prop.state, version=2)
    c.handle(ZkView(written, members("abc"), None, 0.7, read=read.request))
    assert c.cas is None and c.primary is not None and c.primary.isr == {"a", "b", "c"}
    out = c.handle(FollowerFrame("link-c", ReplAck(1, 1), 0.8))
    assert only(out, SendPubAck) == [SendPubAck("prod", 1, (1,))]


def test_a_member_that_registers_while_an_isr_cas_is_in_flight_is_admitted_after_it() -> None:
    """Simulator, `tests/sim/test_world.py::test_a_member_that_registered_during_an_isr_cas_re_joins_the_isr`: c registered while the CAS admitting b was in
    flight; the view that showed c came during the CAS and was not acted on, no later view
    came (nothing changed), so the primary never knew c as a member and never admitted it,
    though c followed and acknowledged everything."""
    c = leading(isr="a", live="ab")
    attach(c, "b", LINK_B, 0.1)
    [prop] = only(c.handle(FollowerFrame(LINK_B, ReplAck(1, 0), 0.2)), ProposeState)
    assert prop.state.isr == ("a", "b")
    c.handle(ZkView(state(1, "a", "a", version=1), members("abc"), None, 0.3))  # c registered
    attach(c, "c", "link-c", 0.31)
    c.handle(FollowerFrame("link-c", ReplAck(1, 0), 0.32))
    ok = dataclasses.replace(prop.state, version=2)
    out = c.handle(CasDone(prop.request, CasOutcome.OK, ok, 0.4))
    out += c.handle(Tick(0.5)) + c.handle(FollowerFrame("link-c", ReplAck(1, 0), 0.6))
    assert [p.state.isr for p in only(out, ProposeState)] == [("a", "b", "c")]


def test_a_view_read_before_an_isr_cas_landed_does_not_undo_it() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_view_read_before_an_isr_cas_landed_does_not_shrink_the_isr`:
    the CAS admitting g0b0 succeeded (version 4), then a view read before it (version 3,
    without g0b0) arrived and was applied: the primary's ISR lost g0b0 while ZooKeeper's
    kept it, and the next records committed and were acknowledged without g0b0's copy."""
    c = leading(isr="a", live="ab")
    attach(c, "b", LINK_B, 0.1)
    [prop] = only(c.handle(FollowerFrame(LINK_B, ReplAck(1, 0), 0.2)), ProposeState)
    assert prop.state.isr == ("a", "b")
    ok = dataclasses.replace(prop.state, version=2)
    c.handle(CasDone(prop.request, CasOutcome.OK, ok, 0.3))
    c.handle(ZkView(state(1, "a", "a", version=1), members("ab"), None, 0.31))  # stale
    assert c.primary is not None and c.primary.isr == {"a", "b"}
    assert c.state == ok
    out = c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.4))
    assert only(out, SendPubAck) == [], "b has not acknowledged it"
    out = c.handle(FollowerFrame(LINK_B, ReplAck(1, 1), 0.5))
    assert only(out, SendPubAck) == [SendPubAck("prod", 1, (1,))]


# --- bug 6: a lost claim and the refusal counter ---------------------------------------------


def refuse(c: BrokerCore, times: int, t0: float) -> list[Action]:
    f = c.follow
    assert f is not None
    out: list[Action] = []
    for i in range(times):
        out += c.handle(LinkEvent(f.id, LinkEnd.REFUSED, t0 + 0.06 * i))
    return out


def test_a_backup_whose_claim_loses_drops_its_suspicion_and_follows_again() -> None:
    """Bug 6: b suspects a (refused connections) and claims; the CAS loses because a, alive,
    just dropped b from the ISR. b must follow a again (to be re-admitted), not wait forever."""
    c = following(isr="ab", live="ab")
    [prop] = only(refuse(c, 3, 1.0), ProposeState)
    assert c.suspect == member("a")
    assert only(c.handle(CasDone(prop.request, CasOutcome.CONFLICT, None, 1.2)), ReadState)
    out = c.handle(ZkView(state(1, "a", "a", version=1), members("ab"), None, 1.3))
    [start] = only(out, StartFollowing)
    assert start.primary == member("a") and c.role is Role.FOLLOWING and c.suspect is None


def test_a_backup_whose_suspect_answers_after_all_follows_the_epoch_the_view_names() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_backup_whose_suspect_answers_after_all_follows_the_epoch_the_view_names`:
    c, out of the ISR, saw a refuse it and suspected it; a lost its session and claimed
    epoch 2 (same process). With a suspect, c waited for an in-sync replica to take over.
    Its old link then connected, which lifted the suspicion, but c did not decide again:
    it kept following epoch 1, refused as stale, and never re-joined the ISR."""
    c = following(me="c", isr="ab", live="abc")
    refuse(c, 3, 1.0)
    assert c.suspect == member("a") and c.follow is not None and c.follow.epoch == 1
    assert not only(c.handle(ZkView(state(2, "a", "ab", version=1), members("abc"), None, 2.0)),
                    StartFollowing), "a is suspect: c waits"  # fmt: skip
    old = c.follow
    out = c.handle(LinkEvent(old.id, LinkEnd.CONNECTED, 2.5))
    [start] = only(out, StartFollowing)
    assert start.primary == member("a") and c.follow is not None and c.follow.epoch == 2
    assert c.suspect is None and only(out, StopFollowing) == [StopFollowing(old.id)]


def test_refusals_count_only_in_a_row_a_connection_that_succeeded_resets_them() -> None:
    c = following()
    f = c.follow
    assert f is not None
    refuse(c, 2, 1.0)
    assert only(c.handle(LinkEvent(f.id, LinkEnd.CONNECTED, 1.2)), SendToPrimary)
    c.handle(LinkEvent(f.id, LinkEnd.CLOSED, 1.3, clean=True))
    assert only(refuse(c, 2, 1.4), ProposeState) == []
    assert c.suspect is None and c.role is Role.FOLLOWING
    assert only(refuse(c, 1, 1.6), ProposeState), "three in a row now"


def test_a_primary_elected_on_a_suspicion_follows_the_suspect_when_it_is_elected_later() -> None:
    """Simulator, `tests/sim/test_world.py::test_a_primary_elected_on_a_suspicion_follows_the_suspect_elected_after_it`: b suspected a (refused), won epoch 2, and kept the
    suspicion; a was elected at epoch 3 and b, stepping down, counted it as gone and
    waited for good instead of following it."""
    c = following(isr="ab", live="ab")
    [prop] = only(refuse(c, 3, 1.0), ProposeState)
    c.handle(CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=1), 1.2))
    assert c.role is Role.LEADING
    out = c.handle(ZkView(state(3, "a", "a", start_ts=1, version=2), members("ab"), None, 2.0))
    [start] = only(out, StartFollowing)
    assert start.primary == member("a") and c.role is Role.FOLLOWING


# --- bug 5: readers whose records were purged -----------------------------------------------


def purged_leader() -> BrokerCore:
    """A 1-replica group whose topic t had ts 1..3 purged (nobody held them)."""
    c = leading(isr="a", live="a", replicas=1, ephemeral_grace=0.0, offset_interval=0.1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3")), 0.1))
    out = c.handle(Tick(1.0))
    assert "t" not in c.log.topics and c.log.last_purged("t") == 3  # freed, purge remembered
    assert [p.purge.topics for p in only(out, SendPurge)] == [[("t", 3)]], (
        "a purge is said with no follower to tell: the simulator checks it (scenario `tests/sim/test_scenarios.py::test_a_durable_sub_is_answered_only_once_zookeeper_holds_it`)"
    )
    return c


def test_an_unnamed_subscriber_resuming_below_what_is_retained_is_told_purged() -> None:
    c = purged_leader()
    out = c.handle(ClientFrameIn("sub", Sub(5, "t", None, 2, resume=True), 1.1))
    [err] = only(out, SendError)
    assert (err.code, err.sid) == (ErrorCode.PURGED, 5) and not err.code.retriable
    assert "'t'" in err.message and "2 to 3" in err.message
    ok = c.handle(ClientFrameIn("sub", Sub(6, "t", None, 4, resume=True), 1.2))
    assert only(ok, SendSubOk) == [SendSubOk("sub", 6, 4)]


def test_a_fetch_below_the_retained_base_is_told_purged_not_given_nothing() -> None:
    c = purged_leader()
    [err] = only(c.handle(ClientFrameIn("spark", Fetch(9, "t", 1, 10, 100), 1.1)), SendError)
    assert (err.code, err.id) == (ErrorCode.PURGED, 9)
    [fetched] = only(c.handle(ClientFrameIn("spark", Fetch(10, "t", 4, 10, 100), 1.2)), SendFetched)
    assert (fetched.records, fetched.next_ts) == ([], 4)


def test_a_new_primary_purges_nothing_during_the_grace_unnamed_subscribers_get() -> None:
    c = leading(isr="a", live="a", replicas=1, ephemeral_grace=5.0, offset_interval=0.1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.1))
    c.handle(Tick(4.0))
    assert len(c.log.topics["t"].records) == 1
    sub = c.handle(ClientFrameIn("sub", Sub(1, "t", None, 1, resume=True), 4.5))
    assert only(sub, SendSubOk) == [SendSubOk("sub", 1, 1)]


def test_a_primary_cut_from_zookeeper_purges_nothing_until_its_session_is_back() -> None:
    """Suspended, it may already be deposed, and a durable subscription its successor
    registered is one it cannot know: its purge took that subscription's records from its
    own log, which it would keep as a follower and serve if elected again (simulator, seed
    18684 of ``--groups 3 --moves 10 --faults 10 --refusals --check-whole``)."""
    c = leading(isr="a", live="a", replicas=1, ephemeral_grace=0.0, offset_interval=0.1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3")), 0.1))
    c.handle(SessionChanged(SessionState.SUSPENDED, 0.5))
    assert not only(c.handle(Tick(1.0)), SendPurge) and len(c.log.topics["t"].records) == 3
    c.handle(SessionChanged(SessionState.CONNECTED, 1.1))
    out = c.handle(Tick(1.5))
    assert [p.purge.topics for p in only(out, SendPurge)] == [[("t", 3)]]


def test_a_primary_that_heard_nothing_for_a_session_timeout_reads_zookeeper_before_it_purges() -> (
    None
):
    """Frozen past its session's expiry, a deposed primary woke to an old ZooKeeper answer
    and purged as the primary it no longer was, before its session's end reached it: its
    successor had registered a subscription that needed those records (simulator, seed
    74193 of ``--groups 3 --moves 10 --faults 10 --refusals --check-whole``)."""
    c = leading(isr="a", live="a", replicas=1, ephemeral_grace=0.0, offset_interval=0.1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3")), 0.1))
    late = 0.1 + c.cfg.session_timeout + 1.0
    out = c.handle(Tick(late))
    [read] = only(out, ReadState)
    assert not only(out, SendPurge) and len(c.log.topics["t"].records) == 3
    assert not only(c.handle(Tick(late + 0.2)), SendPurge), "not before the read is back"
    c.handle(ZkView(c.state, members("a"), None, late + 0.3, read=read.request))
    out = c.handle(Tick(late + 0.4))
    assert [p.purge.topics for p in only(out, SendPurge)] == [[("t", 3)]]


# --- shared subscriptions across a failover ---------------------------------------------------


def re_elected_with_shared(**cfg: object) -> BrokerCore:
    """a led epoch 1 (t has ts 1..6), followed x at epoch 2, and is primary again at epoch 3.
    ZooKeeper holds shared subscription t/work at offset 2 (its low watermark at x)."""
    c = leading(isr="a", live="a", replicas=1, retention_s=100.0, **cfg)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs(*[f"u{i}" for i in range(1, 7)])), 0.1))
    c.handle(ZkView(state(2, "x", "ax", start_ts=7, version=2), members("ax"), None, 1.0))
    out = c.handle(ZkView(state(2, "x", "ax", start_ts=7, version=2), members("a"), None, 2.0))
    [prop] = only(out, ProposeState)
    out = c.handle(
        CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=3), 2.1)
    )
    [load] = only(out, LoadSubscriptions)
    c.handle(SubscriptionsLoaded(load.request, [("t", "work", "shared", 2)], 2.2))
    assert c.role is Role.LEADING and c.commit_ts == 6
    return c


def test_a_new_primary_does_not_redeliver_what_shared_members_acked_to_the_old_one() -> None:
    """Members m1 and m2 had acknowledged 3, 4 and 5 to x; only the offset (2) reached
    ZooKeeper. They re-subscribe with what they acked: 6 goes out, once, and nothing else."""
    c = re_elected_with_shared()
    got: list[int] = []
    for conn, acked, now in (("m1", (3, 5), 2.4), ("m2", (4,), 2.6)):
        sub = Sub(1, "t", "work", From.LATEST, None, "shared", True, acked)
        out = c.handle(ClientFrameIn(conn, sub, now))
        assert [ok.conn for ok in only(out, SendSubOk)] == [conn]
        got += [r[0] for d in only(out, Deliver) for r in d.records]
    for now in (2.8, 3.0, 3.2, 3.4):
        got += [r[0] for d in only(c.handle(Tick(now)), Deliver) for r in d.records]
    assert got == [6], "records the members had acknowledged were handed out again"


def test_the_shared_hold_is_bounded_by_the_setting() -> None:
    c = re_elected_with_shared(shared_resume_hold_s=0.0)
    out = c.handle(ClientFrameIn("m1", Sub(1, "t", "work", From.LATEST, None, "shared", True), 2.3))
    assert [r[0] for d in only(out, Deliver) for r in d.records] == [3, 4, 5, 6]


def replicate(p: BrokerCore, b: BrokerCore, out: Sequence[Action], now: float) -> list[Action]:
    """Carry what primary ``p`` sends its follower ``b`` (on ``LINK_B``) until both are
    quiet; returns ``p``'s other actions."""
    rest: list[Action] = []
    todo = list(out)
    while todo:
        a = todo.pop(0)
        frame: object = None
        if isinstance(a, SendEntries):
            entries, published = p.entries_for(a.start, a.end)
            frame = Append(a.epoch, a.commit, a.start, entries, tuple(published))
        elif isinstance(a, SendLeader):
            frame = a.leader
        elif isinstance(a, SendDedup):
            frame = a.page
        elif hasattr(a, "links"):  # purge, and what else a primary tells its backups
            frame = next(getattr(a, f.name) for f in dataclasses.fields(a) if f.name != "links")
        else:
            rest.append(a)
            continue
        assert b.follow is not None
        for back in b.handle(PrimaryFrame(b.follow.id, frame, now)):  # type: ignore[arg-type]
            if isinstance(back, SendToPrimary):
                todo.extend(p.handle(FollowerFrame(LINK_B, back.frame, now)))
    return rest


def delivered(out: Sequence[Action]) -> dict[str, list[int]]:
    got: dict[str, list[int]] = {}
    for d in only(out, Deliver):
        got.setdefault(d.conn, []).extend(r[0] for r in d.records)
    return got


def test_a_new_primary_keeps_what_a_late_member_held_or_acked_for_it() -> None:
    """x holds 2 and acknowledged 1, y acknowledged 3 and 4 and holds 5 and 6 when primary a
    dies (x and y: members m1 and m2 in the order a served them); only offset 0 reached
    ZooKeeper. y is back at once, x only after 4 s (longer than the old 1 s hold). Backup b, elected, hands out none of 1..6 again: it knew from
    a's replication stream which member held or had acknowledged what."""
    a = leading(isr="ab", live="ab", window_records=2)
    b = following(me="b", primary="a", isr="ab", live="ab")
    b.cfg = a.cfg = dataclasses.replace(a.cfg, window_records=2)
    assert b.follow is not None
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.1)), SendToPrimary)
    replicate(a, b, a.handle(FollowerFrame(LINK_B, hello.frame, 0.1)), 0.1)
    for conn in ("m1", "m2"):
        sub = Sub(1, "t", "work", From.EARLIEST, None, "shared", member=conn)
        replicate(a, b, a.handle(ClientFrameIn(conn, sub, 0.2)), 0.2)
    replicate(a, b, a.handle(SubscriptionRegistered("t", "work", 0, 0.2)), 0.2)
    out = a.handle(ClientFrameIn("prod", Pub(1, "t", recs(*[f"u{i}" for i in range(1, 7)])), 0.3))
    first = delivered(replicate(a, b, out, 0.3))
    assert sorted(first.values()) == [[1, 2], [3, 4]]
    x, y = sorted(first, key=lambda m: first[m])
    assert delivered(replicate(a, b, a.handle(ClientFrameIn(y, Ack(1, 3, (4,)), 0.4)), 0.4)) == {
        y: [5, 6]
    }
    assert delivered(replicate(a, b, a.handle(ClientFrameIn(x, Ack(1, 1), 0.4)), 0.4)) == {}
    replicate(a, b, a.handle(Tick(0.5)), 0.5)  # a tells b; then a dies

    out = b.handle(ZkView(state(1, "a", "ab"), members("b"), None, 1.0))
    [prop] = only(out, ProposeState)
    done = CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=2), 1.1)
    [load] = only(b.handle(done), LoadSubscriptions)
    b.handle(SubscriptionsLoaded(load.request, [("t", "work", "shared", 0)], 1.2))
    got: dict[str, list[int]] = {}

    def feed(ev: object) -> None:
        for conn, ts in delivered(b.handle(ev)).items():  # type: ignore[arg-type]
            got.setdefault(conn, []).extend(ts)

    feed(
        ClientFrameIn(
            y, Sub(2, "t", "work", From.LATEST, None, "shared", True, (3, 4), (5, 6), y), 1.3
        )
    )
    for now in (1.5, 2.5, 3.5, 4.5):
        feed(Tick(now))
    feed(
        ClientFrameIn(x, Sub(2, "t", "work", From.LATEST, None, "shared", True, (1,), (2,), x), 5.2)
    )
    feed(Tick(5.3))
    assert got == {}, "records a member held or had acknowledged were handed out again"
    feed(ClientFrameIn(x, Ack(2, 2), 5.4))
    feed(ClientFrameIn(y, Ack(2, 5, (6,)), 5.4))
    assert b.delivery.durables[("t", "work")].offset == 6


def test_a_primary_deposed_while_alive_hands_no_shared_record_its_successor_does_not_know_of() -> (
    None
):
    """S8. m1 (window 1) holds u1 and u2 waits when a's last shared frame reaches b; then a
    and b lose each other, b is elected and a, not yet told, serves m2, which joined it
    after that frame. Before S8 a handed u2 to m2 at once, and b, whose frame said nobody
    had u2, handed it to m1 once m1 was back: one record to two members. Now a hands a
    shared record out only once every in-sync backup has a frame saying who holds it."""
    a = leading(isr="ab", live="ab")
    b = following(me="b", primary="a", isr="ab", live="ab")
    assert b.follow is not None
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.1)), SendToPrimary)
    replicate(a, b, a.handle(FollowerFrame(LINK_B, hello.frame, 0.1)), 0.1)
    sub1 = Sub(1, "t", "work", From.EARLIEST, 1, "shared", member="m1")
    replicate(a, b, a.handle(ClientFrameIn("m1", sub1, 0.2)), 0.2)
    replicate(a, b, a.handle(SubscriptionRegistered("t", "work", 0, 0.2)), 0.2)
    out = a.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2")), 0.3))
    assert delivered(replicate(a, b, out, 0.3)) == {"m1": [1]}
    replicate(a, b, a.handle(Tick(0.4)), 0.4)
    assert b.delivery.mirror.subs[("t", "work")].cursor == 2, "b knows u2 is not out"

    # a and b cannot reach each other from here on: nothing a sends reaches b
    sub2 = Sub(1, "t", "work", From.EARLIEST, 1, "shared", member="m2")
    from_a = delivered(a.handle(ClientFrameIn("m2", sub2, 1.0)))
    for now in (1.1, 1.2, 1.3):
        for conn, ts in delivered(a.handle(Tick(now))).items():
            from_a.setdefault(conn, []).extend(ts)

    out = b.handle(ZkView(state(1, "a", "ab"), members("b"), None, 1.0))
    [prop] = only(out, ProposeState)
    done = CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=2), 1.1)
    [load] = only(b.handle(done), LoadSubscriptions)
    b.handle(SubscriptionsLoaded(load.request, [("t", "work", "shared", 0)], 1.2))
    back = Sub(2, "t", "work", From.LATEST, 1, "shared", True, (1,), (), "m1")
    from_b = delivered(b.handle(ClientFrameIn("m1", back, 1.3)))
    for now in (2.0, 5.0, 12.0):
        for conn, ts in delivered(b.handle(Tick(now))).items():
            from_b.setdefault(conn, []).extend(ts)
    assert from_b == {"m1": [2]}, "b hands u2 out: nobody had it as far as b knows"
    assert from_a == {}, f"deposed a handed {from_a} out that b did not know of"


def test_a_primary_alone_in_its_isr_hands_shared_records_out_at_once() -> None:
    c = leading(isr="a", live="a", min_insync=1)
    c.handle(ClientFrameIn("m1", Sub(1, "t", "work", From.EARLIEST, None, "shared"), 0.1))
    c.handle(SubscriptionRegistered("t", "work", 0, 0.1))
    out = c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2")), 0.2))
    assert delivered(out) == {"m1": [1, 2]}


def test_a_new_follower_gets_the_shared_state_before_any_append() -> None:
    """Whatever admits it to the ISR comes after the frame on its link (S8)."""
    c = leading(isr="a", live="ab", min_insync=1)
    c.handle(ClientFrameIn("m1", Sub(1, "t", "work", From.EARLIEST, None, "shared"), 0.1))
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.2))
    sent = [type(a) for a in attach(c, "b", LINK_B, 0.3) if not isinstance(a, LogLine)]
    assert sent == [SendLeader, SendShared, SendEntries]


def test_a_durable_subscription_whose_registration_failed_is_registered_again() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_durable_sub_is_answered_only_once_zookeeper_holds_it`: a durable `sub`
    reached a primary cut from ZooKeeper; its registration failed and was never asked again,
    so the subscription was durable only in that primary's memory, and its successor purged
    records the subscriber had not received."""
    c = leading(isr="a", live="a", min_insync=1)
    out = c.handle(ClientFrameIn("s1", Sub(1, "t", "keep", From.EARLIEST), 0.1))
    [reg] = only(out, RegisterSubscription)
    assert (
        only(c.handle(SubscriptionRegistered("t", "keep", None, 0.2)), RegisterSubscription) == []
    )
    assert only(c.handle(Tick(0.3)), RegisterSubscription) == [], "not at once"
    assert only(c.handle(Tick(0.8)), RegisterSubscription) == [reg], "asked again"
    assert only(c.handle(Tick(1.5)), RegisterSubscription) == [], "one ask in flight at a time"
    c.handle(SubscriptionRegistered("t", "keep", None, 1.6))
    assert only(c.handle(Tick(2.2)), RegisterSubscription) == [reg]
    c.handle(SubscriptionRegistered("t", "keep", 0, 2.3))
    assert only(c.handle(Tick(3.0)), RegisterSubscription) == [], "registered: done"
    assert c.delivery.durables[("t", "keep")].stored == 0


def test_a_primary_without_a_connected_session_registers_no_subscription() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_no_registration_is_asked_while_the_session_is_not_connected`:
    a primary cut from ZooKeeper (suspended) kept asking for the registration of `durable`;
    its session expired, a successor loaded the subscriptions, and the last ask reached
    ZooKeeper on the session opened after the old one expired, before the old primary heard
    it was lost. The successor never knew of `durable` and purged past its offset. A primary
    asks ZooKeeper for none while its session is not connected; back connected, it asks."""
    c = leading(isr="a", live="a", min_insync=1)
    c.handle(SessionChanged(SessionState.SUSPENDED, 0.1))
    out = c.handle(ClientFrameIn("s1", Sub(1, "t", "keep", From.EARLIEST), 0.2))
    assert only(out, RegisterSubscription) == [] and only(out, SendSubOk) == []
    assert only(c.handle(Tick(0.8)), RegisterSubscription) == [], "suspended: not asked"
    c.handle(SessionChanged(SessionState.CONNECTED, 1.0))
    [reg] = only(c.handle(Tick(1.1)), RegisterSubscription)
    assert (reg.topic, reg.name) == ("t", "keep")
    c.handle(SubscriptionRegistered("t", "keep", None, 1.2))  # failed: asked again later
    c.handle(SessionChanged(SessionState.SUSPENDED, 1.3))
    assert only(c.handle(Tick(1.9)), RegisterSubscription) == [], "suspended again: not asked"
    c.handle(SessionChanged(SessionState.LOST, 2.0))
    c.handle(SessionChanged(SessionState.CONNECTED, 2.1))  # a new session, no longer primary
    assert c.primary is None
    assert only(c.handle(Tick(2.7)), RegisterSubscription) == [], "stepped down: never asked"


def test_a_new_durable_sub_is_answered_only_once_zookeeper_holds_it() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_durable_sub_is_answered_only_once_zookeeper_holds_it`: a primary
    answered a new durable `sub` and died before ZooKeeper held it; its successor did not
    know the subscription and purged records the subscriber never received. A `subok`
    now means the subscription survives the primary; records published meanwhile come."""
    c = leading(isr="a", live="a", min_insync=1)
    out = c.handle(ClientFrameIn("s1", Sub(1, "t", "keep", From.EARLIEST), 0.1))
    assert only(out, SendSubOk) == [] and len(only(out, RegisterSubscription)) == 1
    assert (
        only(c.handle(ClientFrameIn("s2", Sub(1, "t", "keep", From.EARLIEST), 0.1)), SendSubOk)
        == []
    )
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.2))
    c.handle(SubscriptionRegistered("t", "keep", None, 0.3))  # failed: asked again, still waiting
    assert only(c.handle(Tick(0.4)), SendSubOk) == []
    out = c.handle(SubscriptionRegistered("t", "keep", 0, 0.9))
    assert [ok.conn for ok in only(out, SendSubOk)] == ["s1", "s2"]
    assert delivered(out) == {"s1": [1], "s2": [1]}


# --- stepping down and stopping ---------------------------------------------------------


def test_a_newer_epoch_in_zookeeper_makes_the_primary_step_down_and_redirect() -> None:
    c = leading(isr="ab", live="ab")
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.1))
    out = c.handle(ZkView(state(2, "b", "b", 2, version=3), members("ab"), None, 0.5))
    assert c.primary is None
    assert [(e.code, e.id) for e in only(out, SendError)] == [(ErrorCode.NOT_PRIMARY, 1)]
    assert only(out, StartFollowing)


def test_a_planned_stop_writes_offsets_then_says_stopped() -> None:
    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("s", Sub(1, "t", "durable", From.EARLIEST), 0.1))
    out = c.handle(StopRequested(0.2))
    assert c.primary is None and (only(out, Stopped) or c.role is Role.STEPPING_DOWN)
    if not only(out, Stopped):
        assert only(c.handle(Tick(5.0)), Stopped)
    assert c.role is Role.STOPPED
