"""The core's links to its followers: the follow handshake, catch-up, what a follower
purged, and who may follow (issue 8)."""

from __future__ import annotations

from dataclasses import replace

from tests.unit.test_core_broker import (
    LINK_B,
    attach,
    following,
    leading,
    members,
    only,
    recs,
    replicate,
    state,
)
from tritonmq.core.actions import (
    CloseLink,
    LoadSubscriptions,
    ProposeState,
    RegisterSubscription,
    SendEntries,
    SendError,
    SendLeader,
    SendPubAck,
    SendPurge,
    SendSubOk,
    SendToPrimary,
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
    SubscriptionsLoaded,
    Tick,
    ZkView,
)
from tritonmq.errors import ErrorCode
from tritonmq.wire.frames import Ack, Follow, From, Pub, Purge, ReplAck, SharedAck, Sub

# --- the follow handshake ----------------------------------------------------------


def test_a_follower_is_answered_with_leader_then_entries_and_its_acks_commit() -> None:
    c = leading(isr="ab", live="ab")
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.1))
    out = attach(c, "b", LINK_B, 0.2)
    assert [type(a) for a in out if not a.__class__.__name__ == "LogLine"] == [
        SendLeader,
        SendEntries,
    ]
    assert only(c.handle(FollowerFrame(LINK_B, ReplAck(1, 1), 0.3)), SendPubAck) == [
        SendPubAck("prod", 1, (1,))
    ]


def test_a_follower_whose_catch_up_the_purge_overtook_follows_again_by_reset_and_joins() -> None:
    """Simulator (stale-commit scenario, then both in-sync replicas killed): a new primary
    alone in the ISR committed and purged while its followers caught up one chunk at a
    time; the entries they still needed were gone, they were sent empty appends, acked the
    same ts for good and never joined the ISR (writes refused NOT_ENOUGH_REPLICAS forever)."""
    c = leading(isr="a", live="ab", min_insync=1, ephemeral_grace=0.0, offset_interval=0.1)
    assert c.primary is not None
    c.primary.catchup_chunk = 1
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3", "u4")), 0.1))
    attach(c, "b", LINK_B, 0.2)  # sent ts 1
    c.handle(FollowerFrame(LINK_B, ReplAck(1, 1), 0.3))  # sent ts 2
    c.handle(Tick(1.0))
    assert c.log.base_ts == 5, "everything committed and let go of is purged"
    out = c.handle(FollowerFrame(LINK_B, ReplAck(1, 2), 1.1))  # b needs ts 3: purged
    assert [a.link for a in only(out, CloseLink)] == [LINK_B] and not only(out, SendEntries)
    hello = Follow(c.cfg.group, "b", "boot-b", 1, 2, [(1, 1)])
    [leader] = only(c.handle(FollowerFrame("link-b2", hello, 1.2)), SendLeader)
    assert leader.leader.reset and leader.leader.truncate_to == 4
    [prop] = only(c.handle(FollowerFrame("link-b2", ReplAck(1, 4), 1.3)), ProposeState)
    assert prop.state.isr == ("a", "b")


def test_a_primary_purges_what_its_follower_purged_before_a_durable_sub_starts_from_it() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_primary_purges_what_its_follower_purged_before_a_durable_sub_starts_from_it`: g0b1 purged
    g0.m up to 9 under primary g0b2 while g0b0, refused by g0b2, missed that purge; g0b0,
    elected, still held 4..9 and created the shared subscription mls at ``earliest``, offset
    3. g0b1, elected next, held none of 4..9: its low watermark passed them, never handed
    out, and era 1's offset was stored over them. Here b purged t up to 2 (a's purge frame
    to b only) and follows a again: a purges what b purged, so a durable subscription
    created at a starts at 3, which every replica holds."""
    a = leading(isr="ab", live="ab")
    b = following(me="b", primary="a", isr="ab", live="ab")
    assert b.follow is not None
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.1)), SendToPrimary)
    replicate(a, b, a.handle(FollowerFrame(LINK_B, hello.frame, 0.1)), 0.1)
    out = a.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3")), 0.2))
    assert only(replicate(a, b, out, 0.2), SendPubAck)
    b.handle(PrimaryFrame(b.follow.id, Purge(1, [("t", 2)], 0), 0.3))  # as an old primary's
    assert b.log.last_purged("t") == 2 and a.log.topics["t"].first_ts() == 1

    b.handle(LinkEvent(b.follow.id, LinkEnd.CLOSED, 0.4))
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.5)), SendToPrimary)
    assert hello.frame.purged == (("t", 2),), "the follow says what b purged"
    out = a.handle(FollowerFrame("link-b2", hello.frame, 0.5))
    assert a.log.topics["t"].first_ts() == 3 and a.log.last_purged("t") == 2
    assert [p.purge.topics for p in only(out, SendPurge)] == [[("t", 2)]]
    out = a.handle(ClientFrameIn("s", Sub(1, "t", "keep", From.EARLIEST), 0.6))
    [reg] = only(out, RegisterSubscription)
    assert reg.offset == 2, "a new durable subscription starts at what every replica holds"


def test_a_primary_keeps_what_a_follower_purged_while_a_subscriber_of_its_own_holds_it() -> None:
    a = leading(isr="ab", live="ab")
    b = following(me="b", primary="a", isr="ab", live="ab")
    assert b.follow is not None
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.1)), SendToPrimary)
    replicate(a, b, a.handle(FollowerFrame(LINK_B, hello.frame, 0.1)), 0.1)
    a.handle(ClientFrameIn("s", Sub(1, "t", None, From.EARLIEST), 0.15))  # acknowledges nothing
    replicate(a, b, a.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2")), 0.2)), 0.2)
    b.handle(PrimaryFrame(b.follow.id, Purge(1, [("t", 2)], 0), 0.3))
    b.handle(LinkEvent(b.follow.id, LinkEnd.CLOSED, 0.4))
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.5)), SendToPrimary)
    assert not only(a.handle(FollowerFrame("link-b2", hello.frame, 0.5)), SendPurge)
    assert a.log.topics["t"].first_ts() == 1, "not purged under a reader"


def lacking_follower() -> tuple[BrokerCore, BrokerCore]:
    """a's unnamed subscriber s holds t's ts 1, 2, which b purged (a's purge frame to b
    only, as an earlier primary's would be); b follows a again, lacking them."""
    a = leading(isr="ab", live="ab", min_insync=1, ephemeral_grace=0.0, offset_interval=0.1)
    b = following(me="b", primary="a", isr="ab", live="ab", min_insync=1)
    assert b.follow is not None
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.1)), SendToPrimary)
    replicate(a, b, a.handle(FollowerFrame(LINK_B, hello.frame, 0.1)), 0.1)
    a.handle(ClientFrameIn("s", Sub(1, "t", None, From.EARLIEST), 0.15))
    replicate(a, b, a.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2")), 0.2)), 0.2)
    b.handle(PrimaryFrame(b.follow.id, Purge(1, [("t", 2)], 0), 0.3))
    b.handle(LinkEvent(b.follow.id, LinkEnd.CLOSED, 0.4))
    a.handle(ClientFrameIn("s", Sub(2, "t2", None, From.EARLIEST), 0.4))  # a's log moves on
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.5)), SendToPrimary)
    replicate(a, b, a.handle(FollowerFrame(LINK_B, hello.frame, 0.5)), 0.5)
    return a, b


def test_a_follower_lacking_records_a_reader_of_ours_holds_is_out_of_the_isr_until_we_purge() -> (
    None
):
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_follower_lacking_records_a_reader_of_ours_holds_stays_out_of_the_isr`:
    g0b1 purged g0.m up to 34 as primary; g0b2, elected without that purge, created a
    shared subscription at ``earliest`` and handed 29..34 to a member; g0b1 followed it
    and was in sync; elected, it had none of them and the offset was stored past them.
    A follower lacking records we keep for a reader is no in-sync replica until we
    purged them too."""
    a, b = lacking_follower()
    [prop] = only(a.handle(Tick(1.0)), ProposeState)
    assert prop.state.isr == ("a",) and "lacks" in prop.reason
    a.handle(CasDone(prop.request, CasOutcome.OK, replace(prop.state, version=2), 1.0))
    assert a.primary is not None and a.primary.isr == {"a"}
    assert not only(a.handle(Tick(1.5)), ProposeState), "not back while it lacks them"
    a.handle(ClientFrameIn("s", Ack(1, 2), 1.6))  # the reader lets go; a purges them
    rest = replicate(a, b, a.handle(Tick(2.0)), 2.0)  # the purge; b acknowledges its beat
    [prop] = only([*rest, *a.handle(Tick(3.0))], ProposeState)
    assert prop.state.isr == ("a", "b") and a.log.last_purged("t") == 2


def purged_primary_and_follower(**cfg: object) -> tuple[BrokerCore, BrokerCore]:
    """Primary a alone in its ISR purged t's ts 1..3 (nobody held them), then b followed
    it and caught up over them: b's log holds them as ``None``."""
    a = leading(isr="a", live="ab", min_insync=1, ephemeral_grace=0.0, offset_interval=0.1, **cfg)
    a.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3")), 0.1))
    a.handle(Tick(1.0))
    assert a.log.last_purged("t") == 3 and a.log.base_ts == 4
    b = following(me="b", primary="a", isr="a", live="ab", min_insync=1)
    assert b.follow is not None
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 1.1)), SendToPrimary)
    replicate(a, b, a.handle(FollowerFrame(LINK_B, hello.frame, 1.1)), 1.1)
    return a, b


def elected(b: BrokerCore, now: float) -> BrokerCore:
    """``b`` claims the group its primary a left and leads it."""
    [prop] = only(b.handle(ZkView(state(1, "a", "ab"), members("b"), None, now)), ProposeState)
    out = b.handle(CasDone(prop.request, CasOutcome.OK, replace(prop.state, version=2), now))
    [load] = only(out, LoadSubscriptions)
    b.handle(SubscriptionsLoaded(load.request, [], now))
    assert b.role is Role.LEADING
    return b


def test_a_backup_that_caught_up_over_purged_records_tells_a_resuming_reader_once_elected() -> None:
    """Simulator scenario `tests/sim/test_scenarios.py::test_a_backup_that_caught_up_over_purged_records_tells_a_resuming_reader_once_elected`: a backup that
    caught up over entries its primary had purged never learned their topic; elected, it
    let an unnamed subscriber resuming below them skip them silently (S6). The leader
    answer names each topic's newest purged record."""
    a, b = purged_primary_and_follower()
    assert b.log.last_purged("t") == 3
    b = elected(b, 2.0)
    [err] = only(b.handle(ClientFrameIn("sub", Sub(5, "t", None, 2, resume=True), 2.1)), SendError)
    assert (err.code, err.sid) == (ErrorCode.PURGED, 5) and "2 to 3" in err.message
    ok = b.handle(ClientFrameIn("sub", Sub(6, "t", None, 4, resume=True), 2.2))
    assert [s.sid for s in only(ok, SendSubOk)] == [6]


def test_a_backup_sent_the_dedup_state_in_pages_answers_a_late_retry_once_elected() -> None:
    """A page of two uuids (``dedup_page``): the leader answer carries the first, and each
    acknowledgement brings the next; elected, b answers a retry of every purged record
    with its ts instead of storing it again (R7)."""
    a, b = purged_primary_and_follower(dedup_page=2)
    assert b.log.base_ts == 4 and all(b.log.lookup(u) for u in (b"u1", b"u2", b"u3"))
    b = elected(b, 2.0)
    [ack] = only(b.handle(ClientFrameIn("prod", Pub(9, "t", recs("u1", "u3")), 2.1)), SendPubAck)
    assert ack.ts == (1, 3) and b.log.last_ts == 3, "answered, not stored again"


def test_a_purge_of_records_a_backup_has_not_caught_up_with_yet_is_remembered() -> None:
    """The same gap, reached by a purge that overtakes a follower's catch-up: it is told
    each topic's newest purged record, not the bound the primary purged to, so it
    remembers exactly what a reader would miss (ts 4 of t is past t's last record)."""
    a = leading(isr="a", live="ab", min_insync=1, ephemeral_grace=0.0, offset_interval=0.1)
    assert a.primary is not None
    a.primary.catchup_chunk = 1
    a.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2")), 0.1))
    a.handle(ClientFrameIn("prod", Pub(2, "other", recs("u3")), 0.1))
    b = following(me="b", primary="a", isr="a", live="ab")
    assert b.follow is not None
    [hello] = only(b.handle(LinkEvent(b.follow.id, LinkEnd.CONNECTED, 0.2)), SendToPrimary)
    for action in a.handle(FollowerFrame(LINK_B, hello.frame, 0.2)):
        if isinstance(action, SendLeader):  # the leader answer only: no entries yet
            b.handle(PrimaryFrame(b.follow.id, action.leader, 0.2))
    [purge] = only(a.handle(Tick(1.0)), SendPurge)
    assert dict(purge.purge.topics) == {"t": 2, "other": 3}
    b.handle(PrimaryFrame(b.follow.id, purge.purge, 1.0))
    assert b.log.last_purged("t") == 2 and b.log.last_purged("other") == 3


# --- follow admission (issue 8: attacks 1 and 2) ---------------------------------------

SECRET = b"cluster-secret-of-32-bytes......"


def secured(c: BrokerCore) -> BrokerCore:
    """``c`` as if built with the cluster secret (after the election the helpers drive)."""
    c.cluster_secret = c.follow_gate.secret = SECRET
    return c


def test_a_follow_as_an_unknown_id_gets_nothing_of_the_log() -> None:
    c = leading(live="abc")
    out = attach(c, "zz", "link-zz")  # attack 1: a made-up id
    assert not only(out, SendLeader) and not only(out, CloseLink), "held for the next view"
    out = c.handle(ZkView(state(1, "a", "abc", version=1), members("abc"), None, 0.1))
    [close] = only(out, CloseLink)
    assert close.link == "link-zz" and close.code is ErrorCode.FORBIDDEN
    assert not only(out, SendLeader) and "zz" not in c.links


def test_a_backup_our_view_does_not_show_yet_follows_once_a_fresh_read_shows_it() -> None:
    c = leading(live="ab")
    assert attach(c, "c", "link-c") == []
    out = c.handle(ZkView(state(1, "a", "ab", version=1), members("abc"), None, 0.1))
    assert only(out, SendLeader) and c.links["c"] == "link-c"


def test_a_follow_with_another_boot_than_zookeeper_shows_is_refused() -> None:
    c = leading(live="abc")
    hello = Follow(c.cfg.group, "b", "boot-forged", 1, 0, [])
    [close] = only(c.handle(FollowerFrame(LINK_B, hello, 0.0)), CloseLink)
    assert close.code is ErrorCode.FORBIDDEN


def test_with_a_secret_the_backup_signs_the_challenge_and_the_primary_admits_it() -> None:
    p, b = secured(leading(live="ab")), secured(following())
    [f] = [b.follow]
    assert f is not None
    [send] = only(b.handle(LinkEvent(f.id, LinkEnd.CONNECTED, 1.0, nonce=b"N" * 32)), SendToPrimary)
    assert isinstance(send.frame, Follow) and send.frame.proof
    assert only(p.handle(FollowerFrame(LINK_B, send.frame, 1.0, b"N" * 32)), SendLeader)
    # the same proof on another link (another challenge) is a replay
    [close] = only(p.handle(FollowerFrame("link-x", send.frame, 1.1, b"M" * 32)), CloseLink)
    assert close.code is ErrorCode.UNAUTHENTICATED


def test_with_a_secret_a_follow_with_the_right_id_and_boot_but_no_proof_is_refused() -> None:
    c = secured(leading(live="abc"))
    hello = Follow(c.cfg.group, "b", "boot-b", 1, 0, [])  # attack 2: id and boot read from ZK
    out = c.handle(FollowerFrame(LINK_B, hello, 0.0, b"N" * 32))
    [close] = only(out, CloseLink)
    assert close.code is ErrorCode.UNAUTHENTICATED and not only(out, SendLeader)
    assert "b" not in c.links


def test_a_rack_or_sack_on_a_link_that_never_followed_closes_it() -> None:
    """Issue 26: a link answering the challenge with anything but a follow was kept open
    and never counted; 10,400 of them took a primary to its open-file limit."""
    for c in (leading(live="abc"), following()):
        for frame in (ReplAck(1, 2**40), SharedAck(1, 1)):
            [close] = only(c.handle(FollowerFrame("link-x", frame, 0.1)), CloseLink)
            assert close.link == "link-x" and close.code is ErrorCode.BAD_REQUEST
            assert "follow" in close.reason
    c = leading(live="abc")
    attach(c, "b", LINK_B)
    assert not only(c.handle(FollowerFrame(LINK_B, ReplAck(1, 0), 0.2)), CloseLink)
