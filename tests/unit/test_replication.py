"""PrimaryCore and BackupCore driven directly with `now`: commit, ISR, dedup, fencing, failover."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pytest

from tritonmq.core.actions import (
    Action,
    ProposeIsr,
    Replicate,
    ReplicateDedup,
    SendError,
    SendPubAck,
)
from tritonmq.core.group import GroupState
from tritonmq.core.log import GroupLog
from tritonmq.core.replication import (
    CATCHUP_CHUNK,
    MAX_INFLIGHT_ENTRIES,
    BackupCore,
    DedupFeed,
    PrimaryCore,
    Rejected,
)
from tritonmq.errors import LogGap, StaleEpoch
from tritonmq.wire import repl
from tritonmq.wire.frames import Append, DedupPage, ErrorCode, Leader, PubRecord

BOOTS = {m: f"boot-{m}" for m in "abcdxy"}
LAG = 5.0


def boots(members: str) -> dict[str, str]:
    return {m: BOOTS[m] for m in members}


def state(epoch: int, primary: str, isr: str, start_ts: int) -> GroupState:
    return GroupState(epoch, primary, tuple(isr), boots(isr), start_ts)


def primary(
    me: str = "a",
    isr: str = "abc",
    *,
    log: GroupLog | None = None,
    epoch: int = 1,
    min_insync: int = 2,
    commit_ts: int = 0,
    members: str = "abc",
) -> PrimaryCore:
    log = GroupLog() if log is None else log
    st = state(epoch, me, isr, log.last_ts + 1)
    p = PrimaryCore(me, log, st, min_insync=min_insync, lag_timeout=LAG, commit_ts=commit_ts, now=0)
    assert p.members_changed(boots(members), 0.0) == []
    return p


def recs(*uuids: str) -> list[PubRecord]:
    return [(u.encode(), None, b"value of " + u.encode(), None) for u in uuids]


def attach(p: PrimaryCore, fid: str, log: GroupLog | None = None, now: float = 0.0) -> Leader:
    log = GroupLog() if log is None else log
    lead = p.attach(fid, BOOTS[fid], p.epoch, list(log.epochs), log.last_ts, now)
    assert isinstance(lead, Leader)
    return lead


def replicates(actions: Sequence[Action]) -> list[tuple[set[str], int, int]]:
    return [(set(a.followers), a.start, a.end) for a in actions if isinstance(a, Replicate)]


def run(
    p: PrimaryCore, backups: Mapping[str, BackupCore], actions: Iterable[Action], now: float = 0.0
) -> list[Action]:
    """Carry Replicates and dedup pages over the codec to the backups, feed acks back;
    return other actions."""
    out: list[Action] = []
    queue = list(actions)
    while queue:
        a = queue.pop(0)
        if isinstance(a, ReplicateDedup) and a.follower in backups:
            page = repl.decode_repl(repl.enc_dedup(a.page))
            assert isinstance(page, DedupPage)
            b = backups[a.follower]
            b.on_dedup(page)
            if page.more:
                queue += p.acked(a.follower, page.epoch, b.log.last_ts, now)
            continue
        if not isinstance(a, Replicate):
            out.append(a)
            continue
        frame = repl.decode_repl(repl.enc_append(*p.entries_for(a.start, a.end)))
        assert isinstance(frame, Append)
        for fid in a.followers:
            if fid in backups:
                queue += p.acked(fid, frame.epoch, backups[fid].on_append(frame), now)
    return out


def follow(p: PrimaryCore, fid: str, backup: BackupCore, now: float = 0.0) -> list[Action]:
    """The follow handshake, then catch-up until the backup has everything."""
    backup.on_leader(attach(p, fid, backup.log, now))
    return run(p, {fid: backup}, p.pump(fid), now)


def proposal(actions: Sequence[Action]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The ISR and boots of the single ProposeIsr in ``actions``."""
    [prop] = actions
    assert isinstance(prop, ProposeIsr)
    return prop.isr, dict(prop.boots)


# --- accepting writes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("min_insync", "accepting", "code"),
    [(3, True, ErrorCode.NOT_ENOUGH_REPLICAS), (2, False, ErrorCode.UNAVAILABLE)],
)
def test_publish_is_refused_retriably(min_insync: int, accepting: bool, code: ErrorCode) -> None:
    p = primary(isr="ab", min_insync=min_insync)
    p.accepting = accepting
    [err] = p.publish("prod", 7, "chat", recs("u1"))
    assert isinstance(err, SendError)
    assert (err.conn, err.code, err.id) == ("prod", code, 7)
    assert err.code.retriable
    assert len(p.log) == 0


def test_batch_is_acked_only_after_every_isr_follower_acked() -> None:
    p = primary()
    attach(p, "b")
    attach(p, "c")
    acts = p.publish("prod", 1, "chat", recs("u1", "u2", "u3"))
    assert acts == [a for a in acts if isinstance(a, Replicate)]
    assert replicates(acts) == [({"b", "c"}, 1, 3)]
    assert p.acked("b", 1, 3, 0.1) == []
    assert p.acked("c", 1, 2, 0.1) == []  # a partial ack does not cover the batch
    assert p.commit_ts == 2
    assert p.acked("c", 1, 3, 0.2) == [SendPubAck("prod", 1, (1, 2, 3))]
    assert p.commit_ts == 3


def test_new_entries_go_to_caught_up_followers_and_laggards_are_pumped() -> None:
    p = primary(isr="ab")
    attach(p, "b")
    assert replicates(p.publish("prod", 1, "chat", recs("u1", "u2"))) == [({"b"}, 1, 2)]
    attach(p, "c")  # not yet sent anything
    assert replicates(p.publish("prod", 2, "chat", recs("u3"))) == [({"b"}, 3, 3)]
    assert replicates(p.pump("c")) == [({"c"}, 1, 3)]
    assert p.pump("c") == []  # everything is in flight already


def test_far_behind_follower_catches_up_in_chunks_then_joins() -> None:
    p = primary(isr="a", min_insync=1)
    total = CATCHUP_CHUNK + 10
    for i in range(0, total, 1000):
        p.publish("prod", i, "bulk", recs(*(f"u{n}" for n in range(i, min(i + 1000, total)))))
    assert p.commit_ts == total  # alone in the ISR: committed at once
    backup = BackupCore(GroupLog(), 1)
    backup.on_leader(attach(p, "c", backup.log))
    sent: list[tuple[int, int]] = []
    acts = p.pump("c")
    while rep := [a for a in acts if isinstance(a, Replicate)]:
        sent.append((rep[0].start, rep[0].end))
        frame = Append(*p.entries_for(rep[0].start, rep[0].end))
        acts = p.acked("c", 1, backup.on_append(frame), 1.0)
    assert sent[0][0] == 1 and sent[-1][1] == total
    assert all(end - start < CATCHUP_CHUNK for start, end in sent)
    assert all(nxt[0] == prev[1] + 1 for prev, nxt in zip(sent, sent[1:], strict=False))
    assert proposal(acts) == (("a", "c"), boots("ac"))


def test_the_catch_up_chunk_is_a_parameter_a_small_one_makes_many_appends() -> None:
    """The simulator scales the chunk down so that its short logs catch up in several
    appends, as real logs do (issue 6, bug 1 needs a follower between two of them)."""
    log = GroupLog()
    st = state(1, "a", "a", 1)
    p = PrimaryCore(
        "a", log, st, min_insync=1, lag_timeout=LAG, commit_ts=0, now=0, catchup_chunk=2
    )
    p.members_changed(boots("ac"), 0.0)
    p.publish("prod", 1, "t", recs("u1", "u2", "u3", "u4", "u5"))
    backup = BackupCore(GroupLog(), 1)
    backup.on_leader(attach(p, "c", backup.log))
    sent: list[tuple[int, int]] = []
    acts = p.pump("c")
    while rep := [a for a in acts if isinstance(a, Replicate)]:
        sent.append((rep[0].start, rep[0].end))
        acts = p.acked(
            "c", 1, backup.on_append(Append(*p.entries_for(rep[0].start, rep[0].end))), 1.0
        )
    assert sent == [(1, 2), (3, 4), (5, 5)]


# --- ISR shrinks ----------------------------------------------------------------------


def test_lagging_follower_is_proposed_out_then_commit_proceeds() -> None:
    p = primary()
    attach(p, "b")
    attach(p, "c")
    assert p.tick(0.5) == []
    p.publish("prod", 1, "chat", recs("u1"))
    assert p.acked("b", 1, 1, 1.5) == []
    assert p.tick(3.0) == []  # c is behind, but not for lag_timeout yet
    assert proposal(p.tick(6.5)) == (("a", "b"), boots("ab"))
    assert p.acked("b", 1, 1, 6.6) == []  # not out until ZooKeeper says so
    assert p.tick(7.0) == []  # one proposal at a time
    assert p.isr_changed(state(1, "a", "ab", 1)) == [SendPubAck("prod", 1, (1,))]


def test_isr_member_that_never_follows_is_proposed_out() -> None:
    p = primary()
    attach(p, "b")
    assert p.tick(LAG - 1) == []
    assert proposal(p.tick(LAG + 1)) == (("a", "b"), boots("ab"))


@pytest.mark.parametrize(
    "members",
    [
        pytest.param({"a": "boot-a", "b": "boot-b"}, id="gone"),
        pytest.param({"a": "boot-a", "b": "boot-b", "c": "boot-c2"}, id="restarted"),
    ],
)
def test_departed_or_restarted_member_is_proposed_out(members: dict[str, str]) -> None:
    p = primary()
    attach(p, "b")
    attach(p, "c")
    p.publish("prod", 1, "chat", recs("u1"))
    assert proposal(p.members_changed(members, 0.1)) == (("a", "b"), boots("ab"))
    assert p.acked("b", 1, 1, 0.2) == []  # the in-memory ISR shrinks only after ZooKeeper's
    assert p.isr_changed(state(1, "a", "ab", 1)) == [SendPubAck("prod", 1, (1,))]


# --- ISR grows ------------------------------------------------------------------------


def test_caught_up_follower_joins_isr_and_counts_at_once() -> None:
    p = primary(isr="ab")
    attach(p, "b")
    p.publish("prod", 1, "chat", recs("u1"))
    assert p.acked("b", 1, 1, 0.1) == [SendPubAck("prod", 1, (1,))]
    attach(p, "c")
    assert replicates(p.pump("c")) == [({"c"}, 1, 1)]
    assert proposal(p.acked("c", 1, 1, 0.2)) == (("a", "b", "c"), boots("abc"))
    # Joining counts before ZooKeeper confirms: a new batch now needs c's ack too.
    assert replicates(p.publish("prod", 2, "chat", recs("u2"))) == [({"b", "c"}, 2, 2)]
    assert p.acked("b", 1, 2, 0.3) == []
    assert p.acked("c", 1, 2, 0.3) == [SendPubAck("prod", 2, (2,))]
    assert p.isr_changed(state(1, "a", "abc", 1)) == []


def test_failed_isr_proposal_rolls_back_the_join() -> None:
    p = primary(isr="ab")
    attach(p, "b")
    attach(p, "c")
    assert proposal(p.tick(0.1)) == (("a", "b", "c"), boots("abc"))  # c holds all committed
    p.proposal_failed()
    p.publish("prod", 1, "chat", recs("u1"))
    assert p.acked("b", 1, 1, 0.2) == [SendPubAck("prod", 1, (1,))]  # c no longer counted
    # and it is proposed afresh once caught up
    assert proposal(p.acked("c", 1, 1, 0.3)) == (("a", "b", "c"), boots("abc"))


# --- dedup ----------------------------------------------------------------------------


def test_duplicate_uuid_appends_once_and_gets_the_same_ts() -> None:
    p = primary(isr="ab")
    attach(p, "b")
    p.publish("prod", 1, "chat", recs("u1", "u2", "u1"))
    assert p.publish("prod", 2, "chat", recs("u2")) == []  # nothing new to replicate
    assert len(p.log) == 2
    acks = p.acked("b", 1, 2, 0.1)
    assert len(acks) == 2
    assert set(acks) == {SendPubAck("prod", 1, (1, 2, 1)), SendPubAck("prod", 2, (2,))}


def test_retry_after_commit_is_acked_immediately() -> None:
    p = primary(isr="ab")
    attach(p, "b")
    p.publish("prod", 1, "chat", recs("u1", "u2"))
    p.acked("b", 1, 2, 0.1)
    assert p.publish("prod2", 9, "chat", recs("u2", "u1")) == [SendPubAck("prod2", 9, (2, 1))]
    assert len(p.log) == 2


def test_disconnected_producer_gets_no_ack() -> None:
    p = primary(isr="ab")
    attach(p, "b")
    p.publish("gone", 1, "chat", recs("u1"))
    p.publish("stays", 1, "chat", recs("u2"))
    p.drop_conn("gone")
    assert p.acked("b", 1, 2, 0.1) == [SendPubAck("stays", 1, (2,))]


# --- fencing --------------------------------------------------------------------------


def test_follower_of_another_epoch_or_incarnation_is_rejected() -> None:
    log = GroupLog()
    log.begin_epoch(1, 1)
    p = primary(log=log, epoch=2)
    stale = p.attach("b", "boot-b", 1, [(1, 1)], 0, 0.0)
    assert isinstance(stale, Rejected) and stale.code == ErrorCode.STALE_EPOCH
    impostor = p.attach("c", "boot-impostor", 2, [], 0, 0.0)
    assert isinstance(impostor, Rejected) and impostor.code == ErrorCode.BAD_REQUEST


def test_acks_of_another_epoch_or_unattached_follower_do_not_count() -> None:
    p = primary(isr="ab")
    attach(p, "b")
    p.publish("prod", 1, "chat", recs("u1"))
    assert p.acked("b", 0, 1, 0.1) == []
    assert p.acked("c", 1, 1, 0.1) == []
    assert p.commit_ts == 0


# --- the backup -----------------------------------------------------------------------


def _source(n: int) -> GroupLog:
    log = GroupLog()
    log.begin_epoch(1, 1)
    for i in range(1, n + 1):
        log.append_new("chat", b"s%d" % i, None, b"v%d" % i, None)
    return log


def test_backup_takes_only_its_epoch_after_the_handshake_and_without_gaps() -> None:
    src = _source(4)
    backup = BackupCore(GroupLog(), 1)
    with pytest.raises(LogGap):
        backup.on_append(Append(1, 0, 1, src.entries_between(1, 1)))
    with pytest.raises(StaleEpoch):
        backup.on_leader(Leader(2, 0, [(2, 1)]))
    backup.on_leader(Leader(1, 0, list(src.epochs)))
    for epoch, start, end, error in (
        (0, 1, 1, StaleEpoch),
        (2, 1, 1, StaleEpoch),
        (1, 2, 3, LogGap),
    ):
        with pytest.raises(error):
            backup.on_append(Append(epoch, 0, start, src.entries_between(start, end)))
    assert len(backup.log) == 0
    assert backup.on_append(Append(1, 0, 1, src.entries_between(1, 2))) == 2
    for start, end in ((4, 4), (2, 3)):  # a gap, an overlap
        with pytest.raises(LogGap):
            backup.on_append(Append(1, 0, start, src.entries_between(start, end)))
    assert backup.log.entries == src.entries_between(1, 2)


def test_backup_commit_follows_the_primary_but_never_passes_its_own_log() -> None:
    src = _source(5)
    backup = BackupCore(GroupLog(), 1)
    backup.on_leader(Leader(1, 0, list(src.epochs)))
    backup.on_append(Append(1, 100, 1, src.entries_between(1, 2)))
    assert backup.commit_ts == 2
    backup.on_append(Append(1, 4, 3, src.entries_between(3, 5)))
    backup.on_append(Append(1, 3, 0, []))
    assert backup.commit_ts == 4
    backup.on_append(Append(1, 5, 0, []))
    assert backup.commit_ts == 5


def test_backup_truncates_uncommitted_divergent_tail_on_leader() -> None:
    old = BackupCore(GroupLog(), 1)
    old.on_leader(Leader(1, 0, [(1, 1)]))
    old.on_append(Append(1, 3, 1, _source(5).entries))  # 4 and 5 were never committed
    new_log = GroupLog()
    new_log.begin_epoch(1, 1)
    new_log.append_replicated(1, _source(5).entries_between(1, 3))
    p = primary("b", "bc", log=new_log, epoch=2, min_insync=1, commit_ts=3)
    p.publish("prod", 1, "chat", recs("n4"))
    follower = BackupCore(old.log, 2)
    lead = attach(p, "c", follower.log)
    assert lead.truncate_to == 3
    assert follower.on_leader(lead) == 2
    assert follower.log.lookup(b"s4") is None and follower.log.lookup(b"s3") == 3
    run(p, {"c": follower}, p.pump("c"))
    assert follower.log.entries == new_log.entries
    assert follower.log.epochs == new_log.epochs


# --- whole groups -----------------------------------------------------------------------


def test_round_trip_then_failover_keeps_committed_records_and_dedup() -> None:
    p = primary(min_insync=2, members="abc")
    backups = {f: BackupCore(GroupLog(), 1) for f in "bc"}
    for f, b in backups.items():
        assert follow(p, f, b) == []
    out = run(p, backups, p.publish("prod", 1, "chat", recs("u1", "u2")))
    out += run(p, backups, p.publish("prod", 2, "news", recs("u3")))
    assert out == [SendPubAck("prod", 1, (1, 2)), SendPubAck("prod", 2, (3,))]
    for f, bk in backups.items():  # a heartbeat: an empty append carrying the commit point
        p.acked(f, 1, bk.on_append(Append(1, p.commit_ts, 0, [])), 0.0)
    # a dies; b takes over with a new epoch starting after its log, c follows b.
    b, c = backups["b"], backups["c"]
    p2 = primary("b", "bc", log=b.log, epoch=2, commit_ts=b.commit_ts, members="bc")
    c2 = BackupCore(c.log, 2)
    assert follow(p2, "c", c2) == []
    assert [r[3] for r in b.log.topic("chat").records] == [b"value of u1", b"value of u2"]
    assert [r[3] for r in c.log.topic("news").records] == [b"value of u3"]
    assert p2.publish("prod", 3, "chat", recs("u2")) == [SendPubAck("prod", 3, (2,))]
    assert run(p2, {"c": c2}, p2.publish("prod", 4, "chat", recs("u4"))) == [
        SendPubAck("prod", 4, (4,))
    ]
    assert c.log.entries == b.log.entries


def test_failover_to_a_sole_replica_acks_a_retry_of_its_unacked_record() -> None:
    p = primary(isr="ab", min_insync=1, members="ab")
    b = BackupCore(GroupLog(), 1)
    follow(p, "b", b)
    run(p, {"b": b}, p.publish("prod", 1, "chat", recs("u1")))
    [rep] = p.publish("prod", 2, "chat", recs("u2"))
    assert isinstance(rep, Replicate)
    b.on_append(Append(*p.entries_for(rep.start, rep.end)))  # a dies before b's ack arrives
    p2 = primary("b", "b", log=b.log, epoch=2, min_insync=1, commit_ts=b.commit_ts, members="b")
    # The ISR is b alone, so all b holds is committed: the producer's retry is acked, once.
    acts = p2.publish("prod", 3, "chat", recs("u2")) + p2.tick(0.1)
    assert SendPubAck("prod", 3, (2,)) in acts
    assert len(b.log) == 2


def test_deposed_primary_rejoins_dropping_its_unacked_tail() -> None:
    p = primary(isr="ab", members="ab")
    b = BackupCore(GroupLog(), 1)
    follow(p, "b", b)
    run(p, {"b": b}, p.publish("prod", 1, "chat", recs("u1")))
    p.publish("prod", 2, "chat", recs("lost"))  # never reaches b; a is partitioned away
    p2 = primary("b", "b", log=b.log, epoch=2, min_insync=1, commit_ts=1, members="ab")
    run(p2, {}, p2.publish("prod", 2, "chat", recs("lost")))  # the producer retried at b
    a = BackupCore(p.log, 2)
    assert proposal(follow(p2, "a", a)) == (("a", "b"), boots("ab"))
    assert a.log.entries == b.log.entries
    assert a.log.lookup(b"lost") == 2


def test_backup_elected_before_catching_up_still_truncates_followers() -> None:
    """d writes 1..10 in epoch 1 and commits 8; a and c got all ten, b only 1..8. a wins epoch
    2 (starting at 11) and b follows it, but a dies before b receives 9..10. b wins epoch 3 from
    its own end (9) and accepts a batch there. c, still holding d's uncommitted 9..10, must cut
    them before it may count toward b's commit: logs are prefixes."""
    d = _source(10)
    logs = {f: GroupLog() for f in "abc"}
    for f, log in logs.items():
        bk = BackupCore(log, 1)
        bk.on_leader(Leader(1, 0, list(d.epochs)))
        bk.on_append(Append(1, 8, 1, d.entries_between(1, 8 if f == "b" else 10)))
    pa = primary("a", "abc", log=logs["a"], epoch=2, commit_ts=8, members="abc")
    BackupCore(logs["b"], 2).on_leader(attach(pa, "b", logs["b"]))
    pb = primary("b", "bc", log=logs["b"], epoch=3, commit_ts=8, members="bc")
    pb.publish("prod", 1, "chat", recs("n9", "n10", "n11"))
    c = BackupCore(logs["c"], 3)
    assert follow(pb, "c", c) == [SendPubAck("prod", 1, (9, 10, 11))]
    assert logs["c"].entries == logs["b"].entries


def test_a_refused_connection_stays_refused_so_no_later_batch_overtakes() -> None:
    p = primary(isr="a", members="abc")  # ISR below min_insync: writes are refused
    first = p.publish("conn", 1, "t", recs("u1"))
    assert [(a.code, a.id) for a in first if isinstance(a, SendError)] == [
        (ErrorCode.NOT_ENOUGH_REPLICAS, 1)
    ]
    p.isr_changed(state(1, "a", "ab", 1))  # the ISR recovers
    second = p.publish("conn", 2, "t", recs("u2"))
    assert [(type(a), a.id) for a in second] == [(SendError, 2)], "batch 2 overtook batch 1"
    assert len(p.log) == 0
    p.drop_conn("conn")  # the producer reconnects and resends 1, 2 in order
    p.publish("conn2", 1, "t", recs("u1"))
    p.publish("conn2", 2, "t", recs("u2"))
    assert [rec[1] for _, rec in p.log.entries] == [b"u1", b"u2"]


def test_a_retry_of_held_records_is_answered_even_while_refusing_writes() -> None:
    p = primary(isr="a", members="a", min_insync=1)
    acks = p.publish("conn", 1, "t", recs("u1", "u2"))
    assert [a.ts for a in acks if isinstance(a, SendPubAck)] == [(1, 2)]
    p.accepting = False  # ZooKeeper session suspended
    retry = p.publish("conn", 2, "t", recs("u2", "u1"))
    assert [(type(a), a.ts) for a in retry if isinstance(a, SendPubAck)] == [(SendPubAck, (2, 1))]
    fresh = p.publish("conn", 3, "t", recs("u3"))
    assert [a.code for a in fresh if isinstance(a, SendError)] == [ErrorCode.UNAVAILABLE]


def test_step_down_tells_every_waiting_producer_to_retry_elsewhere() -> None:
    p = primary()
    attach(p, "b")
    attach(p, "c")
    p.publish("x", 1, "t", recs("u1"))
    p.publish("y", 2, "t", recs("u2"))
    out = p.step_down()
    assert sorted((a.conn, a.id, a.code) for a in out if isinstance(a, SendError)) == [
        ("x", 1, ErrorCode.NOT_PRIMARY),
        ("y", 2, ErrorCode.NOT_PRIMARY),
    ]
    assert [a for a in p.publish("z", 3, "t", recs("u3")) if isinstance(a, SendPubAck)] == []


def test_dedup_never_forgets_inside_the_window_and_refuses_writes_past_its_bound() -> None:
    p = primary(isr="a", members="a", min_insync=1)
    p.dedup_max = 3
    for i in range(3):
        p.publish("conn", i, "t", recs(f"u{i}"))
    frame = p.purge({"t": 3}, forget=0)
    assert frame is not None and frame.forget == 0  # the window has not passed: nothing forgotten
    assert [p.log.lookup(f"u{i}".encode()) for i in range(3)] == [1, 2, 3]
    [full] = p.publish("conn2", 9, "t", recs("u9"))
    assert isinstance(full, SendError) and full.code is ErrorCode.FULL and full.code.retriable
    assert p.publish("conn3", 10, "t", recs("u1")) == [SendPubAck("conn3", 10, (2,))]
    frame = p.purge({}, forget=2)  # the window passed for ts 1..2
    assert frame is not None and frame.forget == 2
    assert [p.log.lookup(f"u{i}".encode()) for i in range(3)] == [None, None, 3]
    assert p.publish("conn4", 11, "t", recs("u9")) == [SendPubAck("conn4", 11, (4,))]


# --- the bugs --------------------------------------------------------------------


def test_a_follower_joins_the_isr_only_once_it_holds_the_epoch_start_not_an_inherited_commit() -> (
    None
):
    """Bug 1: b is elected holding 1..10 but inherited commit 8 from its backup role (the
    ack for 9..10 reached the old primary's producer). d, holding only 1..8, must not be
    admitted to the ISR on that stale commit point: elected later, it would lose 9..10."""
    src = _source(10)
    b_log = GroupLog()
    bk = BackupCore(b_log, 1)
    bk.on_leader(Leader(1, 0, list(src.epochs)))
    bk.on_append(Append(1, 8, 1, src.entries_between(1, 10)))
    p = primary("b", "bc", log=b_log, epoch=2, commit_ts=bk.commit_ts, members="bc")
    d_log = GroupLog()
    d = BackupCore(d_log, 1)
    d.on_leader(Leader(1, 0, list(src.epochs)))
    d.on_append(Append(1, 8, 1, src.entries_between(1, 8)))
    d2 = BackupCore(d_log, 2)
    lead = p.attach("d", "boot-d", 2, list(d_log.epochs), d_log.last_ts, 0.1)
    assert isinstance(lead, Leader) and lead.truncate_to == 8
    d2.on_leader(lead)
    p.members_changed({**boots("bc"), "d": "boot-d"}, 0.1)
    assert [a for a in p.tick(0.2) if isinstance(a, ProposeIsr)] == [], "d lacks 9..10"
    acts = p.pump("d")
    for a in acts:
        assert isinstance(a, Replicate)
        frame = Append(*p.entries_for(a.start, a.end))
        acts = p.acked("d", 2, d2.on_append(frame), 0.3)
    assert d_log.last_ts == 10
    assert [a.isr for a in acts if isinstance(a, ProposeIsr)] == [("b", "c", "d")]


def test_a_batch_whose_isr_shrinks_below_min_insync_before_commit_is_refused_not_acked() -> None:
    """Bug 2: accepted with ISR {a, b}; b leaves the ISR before acknowledging. The batch is
    now held by a alone: the producer gets a retriable NOT_ENOUGH_REPLICAS, and its retry
    (same uuids) is acknowledged with the original ts once the ISR is strong again."""
    p = primary(isr="ab", members="abc", min_insync=2)
    attach(p, "b")
    p.publish("prod", 1, "chat", recs("u1"))
    out = p.isr_changed(state(1, "a", "a", 1))
    assert [(type(a), a.code, a.id) for a in out if isinstance(a, SendError)] == [
        (SendError, ErrorCode.NOT_ENOUGH_REPLICAS, 1)
    ]
    assert [a for a in out if isinstance(a, SendPubAck)] == []
    retry = p.publish("prod2", 2, "chat", recs("u1"))
    assert [a.code for a in retry if isinstance(a, SendError)] == [ErrorCode.NOT_ENOUGH_REPLICAS]
    c = BackupCore(GroupLog(), 1)
    assert proposal(follow(p, "c", c, 0.5)) == (("a", "c"), boots("ac"))
    p.isr_changed(state(1, "a", "ac", 1))
    assert p.publish("prod3", 3, "chat", recs("u1")) == [SendPubAck("prod3", 3, (1,))]
    assert len(p.log) == 1


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "catch-up-over-purged"])
def test_a_follower_that_missed_purged_records_still_dedups_a_late_retry_once_elected(
    reset: bool,
) -> None:
    """Bug 4: x purged 1..5 (committed, acknowledged, consumed). y starts over (by reset, or
    by a catch-up that carries the purged records as holes), then x dies and y is elected.
    The producer's late retry of u3 must get ts 3 again, not a second copy."""
    x = primary("x", "xy", members="xy", min_insync=1)
    if not reset:
        x.publish("prod", 0, "keep", recs("k0"))  # an unpurged head: no compaction, no reset
    x.publish("prod", 1, "chat", recs("u1", "u2", "u3", "u4", "u5"))
    x.isr_changed(state(1, "x", "x", 1))
    x.purge({"chat": x.commit_ts}, forget=0)
    y = BackupCore(GroupLog(), 1)
    lead = x.attach("y", "boot-y", 1, [], 0, 1.0)
    assert isinstance(lead, Leader) and lead.reset is reset
    y.on_leader(repl.decode_repl(repl.enc_leader(lead)))  # type: ignore[arg-type]
    run(x, {"y": y}, x.pump("y"))
    assert y.log.last_ts == x.log.last_ts
    st = state(2, "y", "y", y.log.last_ts + 1)
    py = PrimaryCore("y", y.log, st, min_insync=1, lag_timeout=LAG, commit_ts=0, now=2.0)
    first = 2 if not reset else 1
    assert py.publish("prod", 7, "chat", recs("u3")) + py.tick(2.1) == [
        SendPubAck("prod", 7, (first + 2,))
    ]
    assert y.log.last_ts == x.log.last_ts, "the retry was stored twice"
    py.purge({}, forget=py.commit_ts)  # the dedup window passed on the new primary too
    assert y.log.lookup(b"u3") is None


def test_a_follower_sent_its_dedup_state_in_pages_gets_no_entry_and_no_isr_before_the_last() -> (
    None
):
    """2,000,000 purged uuids in one ``leader`` answer held the primary's event loop 3 to
    6 s (building and framing them, replication.md R7). They go a page per
    acknowledgement; the follower gets no entry before the last page, and is not counted
    in sync before it has them all (elected without them, it would store a retry again)."""
    x = primary("x", "xy", members="xy", min_insync=1)
    x.dedup_page = 2
    x.publish("prod", 1, "chat", recs("u1", "u2", "u3", "u4", "u5"))
    x.isr_changed(state(1, "x", "x", 1))
    x.purge({"chat": x.commit_ts}, forget=0)
    x.publish("prod", 2, "chat", recs("u6"))
    y = BackupCore(GroupLog(), 1)
    lead = x.attach("y", "boot-y", 1, [], 0, 1.0)
    assert isinstance(lead, Leader) and lead.reset and lead.more and len(lead.dedup) == 2
    y.on_leader(repl.decode_repl(repl.enc_leader(lead)))  # type: ignore[arg-type]
    assert x.pump("y") == [], "nothing more before the leader answer is acknowledged"
    assert not replicates(x.publish("prod", 3, "chat", recs("u7"))), "nor new entries"
    handed = [u for _, u, _ in lead.dedup]
    out = x.acked("y", 1, y.log.last_ts, 1.1)
    while True:
        [page] = [a.page for a in out if isinstance(a, ReplicateDedup)]
        assert not [a for a in out if isinstance(a, ProposeIsr)] and not x.followers["y"].confirmed
        y.on_dedup(repl.decode_repl(repl.enc_dedup(page)))  # type: ignore[arg-type]
        handed += [u for _, u, _ in page.dedup]
        if not page.more:
            break
        assert not replicates(out)
        out = x.acked("y", 1, y.log.last_ts, 1.2)
    assert sorted(handed) == [b"u1", b"u2", b"u3", b"u4", b"u5"]
    assert replicates(out) == [({"y"}, 6, 7)], "the entries follow the last page"
    proposed = [a for a in run(x, {"y": y}, out, 1.3) if isinstance(a, ProposeIsr)]
    assert [a.isr for a in proposed] == [("x", "y")]
    assert all(y.log.lookup(f"u{n}".encode()) for n in range(1, 8))


def test_records_purged_before_a_catching_up_follower_was_sent_them_still_dedup_there() -> None:
    """Found while paging the dedup state: the primary purged committed records a follower
    still catching up had not been sent; they reached it as ``None``, without their uuids,
    and it joined the ISR; elected, it stored a late retry again. Their uuids go to it
    first now, as a dedup page before the entries."""
    x = primary("x", "xy", members="xy", min_insync=1)
    x.catchup_chunk = 1
    x.publish("prod", 0, "keep", recs("k0"))
    x.publish("prod", 1, "chat", recs("u1", "u2", "u3"))
    x.isr_changed(state(1, "x", "x", 1))
    y = BackupCore(GroupLog(), 1)
    y.on_leader(repl.decode_repl(repl.enc_leader(attach(x, "y"))))  # type: ignore[arg-type]
    first = x.pump("y")  # ts 1, a chunk of one
    x.purge({"chat": x.commit_ts}, forget=0)  # ts 2..4, not sent to y yet
    proposed = [a for a in run(x, {"y": y}, first, 1.1) if isinstance(a, ProposeIsr)]
    assert [a.isr for a in proposed] == [("x", "y")] and y.log.last_ts == 4
    st = state(2, "y", "y", y.log.last_ts + 1)
    py = PrimaryCore("y", y.log, st, min_insync=1, lag_timeout=LAG, commit_ts=0, now=2.0)
    assert py.publish("prod", 7, "chat", recs("u2")) + py.tick(2.1) == [
        SendPubAck("prod", 7, (3,))
    ], "the retry was stored again"


def test_a_dedup_feed_hands_every_purged_uuid_after_the_point_once_whatever_the_page() -> None:
    log = GroupLog()
    log.slots = 64
    for n in range(1, 9):
        log.append_new("a" if n % 2 else "b", f"u{n}".encode(), None, b"v", None)
    log.purge("a", 8)
    log.purge("b", 8)
    want = sorted((t, u, s) for s, d in log.purged_by_slot.items() for t, u in d if t > 3)
    assert [ts for ts, _, _ in want] == [4, 5, 6, 7, 8]
    for size in (1, 2, 3, 100):
        feed, got = DedupFeed(log, 3), []
        while not feed.done:
            page = feed.page(size)
            assert len(page) <= size
            got.extend(page)
        assert sorted(got) == want, size


def test_a_follower_that_starts_by_reset_joins_the_isr_only_after_it_acked_the_reset() -> None:
    """Found by the simulator (scenario `tests/sim/test_scenarios.py::test_a_reset_follower_is_not_admitted_to_the_isr_before_it_holds_anything`): a follower behind the purge horizon was counted as
    holding everything up to our base before it even received the leader frame, and the
    next tick admitted it; elected then, it would start its epoch at ts 1."""
    p = primary(isr="a", members="ab", min_insync=1)
    p.publish("prod", 1, "t", recs("u1", "u2"))
    p.purge({"t": 2}, forget=0)
    assert p.log.base_ts == 3
    b = BackupCore(GroupLog(), 1)
    lead = attach(p, "b", b.log, 1.0)
    assert lead.reset
    assert [a for a in p.tick(1.1) if isinstance(a, ProposeIsr)] == [], "b holds nothing yet"
    b.on_leader(lead)
    beat = p.heartbeat()
    assert beat == ("b",)
    out = p.acked("b", 1, b.on_append(Append(1, p.commit_ts, p.log.last_ts + 1, [])), 1.2)
    assert proposal(out) == (("a", "b"), boots("ab"))


def test_a_follower_that_starts_by_reset_far_into_the_log_is_sent_entries_and_joins() -> None:
    """Found by a long chaos run: a follower that starts by reset was counted as having
    acknowledged nothing at all (-1), so with a purge base past MAX_INFLIGHT_ENTRIES its
    in-flight allowance looked spent: it was never sent an entry, never acknowledged, and
    the group stayed below min_insync, refusing every write, for good."""
    p = primary(isr="a", members="ab", min_insync=1)
    n = MAX_INFLIGHT_ENTRIES + 1_000
    for i in range(0, n, 1_000):
        p.publish("prod", i, "t", recs(*(f"u{j}" for j in range(i, i + 1_000))))
    p.publish("prod", n, "keep", recs("k"))  # one record stays: the log is not empty
    p.purge({"t": n}, forget=0)
    assert p.log.base_ts == n + 1
    b = BackupCore(GroupLog(), 1)
    lead = attach(p, "b", b.log, 1.0)
    assert lead.reset
    assert [a for a in p.tick(1.1) if isinstance(a, ProposeIsr)] == [], "b holds nothing yet"
    b.on_leader(lead)
    out = run(p, {"b": b}, p.pump("b"), 1.2)
    assert b.log.last_ts == p.log.last_ts, "the reset follower was never sent the retained tail"
    assert proposal([a for a in [*out, *p.tick(1.3)] if isinstance(a, ProposeIsr)]) == (
        ("a", "b"),
        boots("ab"),
    )


# --- published times travel with the records (spark support) --------------------------


def test_backups_learn_when_the_primary_accepted_each_batch() -> None:
    p = primary(isr="ab", members="ab")
    b = BackupCore(GroupLog(), 1)
    follow(p, "b", b)
    run(p, {"b": b}, p.publish("c1", 1, "t", recs("u1", "u2"), wall_ms=1000))
    run(p, {"b": b}, p.publish("c1", 2, "t", recs("u3"), wall_ms=2000))
    assert [b.log.published_at(ts) for ts in (1, 2, 3)] == [1000, 1000, 2000]
    assert b.log.published == p.log.published


def test_a_backup_catching_up_mid_batch_gets_the_covering_time() -> None:
    p = primary(isr="a", members="ab", min_insync=1)
    p.publish("c1", 1, "t", recs("u1", "u2", "u3"), wall_ms=1000)
    frame = repl.decode_repl(repl.enc_append(*p.entries_for(2, 3)))
    assert isinstance(frame, Append) and frame.published == ((1, 1000),)
    b = BackupCore(GroupLog(), 1)
    b.on_leader(Leader(1, 1, list(p.log.epochs), reset=True))  # starts at ts 2
    b.on_append(frame)
    assert b.log.published_at(2) == 1000 and b.log.published_at(3) == 1000
