"""Delivery across a failover: a new primary restores shared subscriptions from what the
old one replicated (replication.md S7), and only a state of the era it loads them at."""

from __future__ import annotations

from dataclasses import replace

from tests.unit.test_delivery import ALL_T, BIG, MIXED, make_log, shared_ts
from tritonmq.core.actions import Deliver
from tritonmq.core.consumers import Mode
from tritonmq.core.delivery import Delivery
from tritonmq.wire.frames import From, SharedState, SharedSub
from tritonmq.wire.repl import decode_repl, enc_shared


def failed_over(grace: float = 10.0) -> tuple[Delivery, Delivery]:
    """Old primary ``old`` (window 2) handed 1, 2 to member a and 3, 4 to b, told its
    backups so, then (unreplicated) took a's acks of 1 and 2 and handed it 5 and 6. It
    dies with 1..8 committed; ``new`` (window 4) loads the subscription at offset 0 and
    starts its epoch at ts 9."""
    log = make_log(["t"] * 8)
    old = Delivery(log, window=2, window_bytes=BIG)
    for conn in ("a", "b"):
        old.subscribe(
            conn, 1, "t", "s", From.EARLIEST, None, 4, mode=Mode.SHARED, member=f"m{conn}"
        )
    snap = old.shared_state()
    assert shared_ts(old.ack("a", 1, 1, 8, many=(2,))) == {"a": [5, 6]}
    new = Delivery(log, window=4, window_bytes=BIG, grace=grace, shared_hold=1.0)
    new.mirror.adopt(SharedState(1, snap))
    new.load([("t", "s", "shared", 0)], now=0.0, start_ts=9)
    return old, new


def test_a_shared_subscription_is_restored_only_from_a_state_of_the_era_it_is_loaded_at() -> None:
    """The mirror keeps what the primary said last of a subscription: of one it handed on
    to the next era (since let go), its offset is that era's ``after``, another group's
    ts. Loaded later at our new era 6 from 28, restored from it the offset jumped to 47
    over era 6's records 29..47, stored so and never handed out (simulator scenario `tests/sim/test_scenarios.py::test_a_shared_subscription_is_restored_only_from_a_state_of_its_era`)."""
    handed_on = SharedSub("t", "s", 47, 48, (), (), (), (), era=4)
    new = Delivery(make_log(["t"] * 50), window=4, window_bytes=BIG)
    new.mirror.adopt(SharedState(1, (handed_on,)))
    new.load([("t", "s", "shared", 28)], now=0.0, start_ts=51, eras={("t", "s"): 6})
    d = new.durables[("t", "s")]
    assert d.offset == 28, "from what ZooKeeper holds: 29.. wait for the members (S7)"
    same = Delivery(make_log(["t"] * 50), window=4, window_bytes=BIG)
    same.mirror.adopt(SharedState(1, (replace(handed_on, offset=30, cursor=31, era=6),)))
    same.load([("t", "s", "shared", 28)], now=0.0, start_ts=51, eras={("t", "s"): 6})
    assert same.durables[("t", "s")].offset == 30, "of its era: acknowledged up to 30"


def resub(
    d: Delivery, conn: str, now: float, acked: tuple[int, ...], held: tuple[int, ...]
) -> dict[str, list[int]]:
    _, out = d.subscribe(
        conn, 2, "t", "s", From.LATEST, None, d.log.last_ts, mode=Mode.SHARED, resume=True, now=now,
        acked=acked, held=held, member=f"m{conn}",
    )  # fmt: skip
    return shared_ts([o for o in out if isinstance(o, Deliver)])


def test_records_handed_out_after_the_last_replicated_state_wait_for_every_member() -> None:
    """b is back at once and gets the new epoch's records at once; 7 and 8 (maybe handed out
    after the old primary's last frame) and a's 1 and 2 wait for a, for longer than the old
    1 s hold. a says it acked 1, 2 and holds 5, 6: only 7 and 8 go out, once."""
    _, new = failed_over()
    assert resub(new, "b", 0.5, (), (3, 4)) == {}
    new.log.append_new("t", b"u9", None, b"v", None)
    new.log.append_new("t", b"u10", None, b"v", None)
    assert shared_ts(new.on_commit(10, now=0.6)) == {"b": [9, 10]}
    for now in (1.0, 2.0, 5.0):
        assert shared_ts(new.tick(10, now)) == {}
    got = resub(new, "a", 6.0, (1, 2), (5, 6))
    assert sorted(ts for one in got.values() for ts in one) == [7, 8]
    new.ack("b", 2, 3, 10, many=(4, 9, 10))
    for conn, ts in got.items():
        new.ack(conn, 2, ts[0], 10, many=tuple(ts[1:]))
    new.ack("a", 2, 5, 10, many=(6,))
    assert new.durables[("t", "s")].offset == 10


def test_a_member_that_never_comes_back_gets_its_records_handed_out_after_the_grace() -> None:
    _, new = failed_over(grace=10.0)
    assert resub(new, "b", 0.5, (), (3, 4)) == {}
    new.ack("b", 2, 3, 8, many=(4,))
    assert shared_ts(new.tick(8, 9.9)) == {}, "a's records were handed out before the grace"
    got = shared_ts(new.tick(8, 10.0))["b"]
    assert sorted(got) == [1, 2, 5, 6], "b's window (4) is full with what a held"
    got += shared_ts(new.ack("b", 2, got[0], 8, many=tuple(got[1:]), now=10.1))["b"]
    assert sorted(got) == [1, 2, 5, 6, 7, 8], "at least once: each goes out once more"


def test_the_replicated_state_is_a_few_ranges_and_survives_the_codec() -> None:
    log = make_log(MIXED * 100)  # t at odd ts: its neighbours in the log are 2 apart
    d = Delivery(log, window=150, window_bytes=BIG)
    d.subscribe("a", 1, "t", "s", From.EARLIEST, None, 800, mode=Mode.SHARED, member="ma")
    [snap] = d.shared_state()
    assert snap.held == (("ma", ((1, 299),)),) and snap.members == ("ma",)
    frame = SharedState(3, (snap,))
    assert decode_repl(enc_shared(frame)) == frame


def test_a_member_whose_connection_drops_finds_its_records_kept_for_it() -> None:
    """b's connection drops with 3 and 4 unacknowledged: they wait for b (not handed to a),
    b comes back holding 4 (3's ack was lost with the connection: it says it acked it)."""
    d = Delivery(make_log(ALL_T[:6]), window=2, window_bytes=BIG, grace=10.0)
    for conn in ("a", "b"):
        d.subscribe(conn, 1, "t", "s", From.EARLIEST, None, 6, mode=Mode.SHARED, member=conn)
    d.drop_conn("b", now=1.0)
    assert shared_ts(d.ack("a", 1, 1, 6, many=(2,), now=1.1)) == {"a": [5, 6]}
    d.ack("a", 1, 5, 6, many=(6,), now=1.2)
    assert shared_ts(d.tick(6, now=5.0)) == {}, "b's records went to a while b was away"
    _, out = d.subscribe(
        "b2", 1, "t", "s", From.LATEST, None, 6, mode=Mode.SHARED, resume=True, now=6.0,
        acked=(3,), held=(4,), member="b",
    )  # fmt: skip
    assert shared_ts([o for o in out if isinstance(o, Deliver)]) == {}
    d.ack("b2", 1, 4, 6, now=6.1)
    assert d.durables[("t", "s")].offset == 6


def test_a_member_that_unsubscribes_or_stays_away_past_the_grace_lets_its_records_go() -> None:
    d = Delivery(make_log(ALL_T[:6]), window=2, window_bytes=BIG, grace=10.0)
    for conn in ("a", "b", "c"):
        d.subscribe(conn, 1, "t", "s", From.EARLIEST, None, 6, mode=Mode.SHARED, member=conn)
    d.unsubscribe("c", 1, now=1.0)  # c leaves: 5 and 6 go to the others at once
    assert shared_ts(d.ack("a", 1, 1, 6, many=(2,), now=1.1)) == {"a": [5, 6]}
    d.drop_conn("b", now=1.2)
    d.ack("a", 1, 5, 6, many=(6,), now=1.3)
    assert shared_ts(d.tick(6, now=11.1)) == {}
    assert shared_ts(d.tick(6, now=11.2)) == {"a": [3, 4]}


def test_a_member_back_without_what_the_old_primary_said_it_held_waits_for_the_others() -> None:
    """S7: the old frame says b holds 3 and 4. b lost them, came back to the old primary
    (deposed while alive, after its last frame) without them, and the old primary handed
    them to a. b now comes to the new primary without them: they are unsure and wait for
    a (which says it acknowledged them), not go to b again; a member that never comes back
    lets them go after the grace (at least once)."""
    _, new = failed_over(grace=10.0)
    assert resub(new, "b", 0.5, (), ()) == {}, "3 and 4 went to b again before a was back"
    got = resub(new, "a", 0.6, (1, 2, 3, 4), (5, 6))
    assert sorted(ts for one in got.values() for ts in one) == [7, 8]
    _, late = failed_over(grace=10.0)
    assert resub(late, "b", 0.5, (), ()) == {}
    assert sorted(shared_ts(late.tick(8, 10.0))["b"]) == [1, 2, 3, 4]


def test_a_new_primary_hands_out_nothing_above_an_ended_eras_seal_point_from_the_gap() -> None:
    """A moved slot came back to us: `t`'s ts 1..3 are an ended era (sealed at 3), 4 and 5
    a later era of ours. The old primary served `s` at the ended era, handed member a 1..3
    and died; the new one's gap (what the old one may have handed out after its last
    frame) runs to its epoch's start, over 4 and 5. Walked once a was back, it handed them
    out as the ended era's (simulator scenario `tests/sim/test_scenarios.py::test_a_restored_shared_subscription_hands_out_nothing_above_its_era_s_seal_point`: `g0s7 got g0.m ts 23 from g0 in era 2, outside the eras g0
    held`, era 2 sealed at 15). Nor does a primary after it, which restores them from the
    gap as free records, hand them out."""
    log = make_log(ALL_T[:5])
    old = Delivery(log, window=3, window_bytes=BIG)
    old.subscribe("a", 1, "t", "s", From.EARLIEST, None, 3, mode=Mode.SHARED, member="ma")
    old.durables[("t", "s")].until = 3
    primary = old
    for now in (0.0, 20.0):  # two failovers in a row
        new = Delivery(log, window=3, window_bytes=BIG, grace=10.0, shared_hold=1.0)
        new.mirror.adopt(SharedState(1, primary.shared_state()))
        new.load([("t", "s", "shared", 0)], now=now, start_ts=6)
        new.durables[("t", "s")].until = 3  # the readers cap it at its era's seal point
        assert resub(new, "a", now + 0.5, (1, 2, 3), ()) == {}
        assert shared_ts(new.tick(5, now + 11.0)) == {}, "a later era's records went out"
        assert new.durables[("t", "s")].offset == 3
        primary = new
