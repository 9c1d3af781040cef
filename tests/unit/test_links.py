"""The core's links to its followers: the follow handshake, catch-up, what a follower
purged, and who may follow (issue 8)."""

from __future__ import annotations

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
    ProposeState,
    RegisterSubscription,
    SendEntries,
    SendLeader,
    SendPubAck,
    SendPurge,
    SendToPrimary,
)
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import (
    ClientFrameIn,
    FollowerFrame,
    LinkEnd,
    LinkEvent,
    PrimaryFrame,
    Tick,
    ZkView,
)
from tritonmq.errors import ErrorCode
from tritonmq.wire.frames import Follow, From, Pub, Purge, ReplAck, Sub

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
    """Simulator seed 360 of ``--groups 3 --moves 6 --refusals --check-whole``: g0b1 purged
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
