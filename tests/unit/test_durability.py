"""Durability levels through BrokerCore (docs/replication.md D1, D4): every acknowledgement
of a broker with a data_dir follows its writes; a `synced` publish is acknowledged only once
every in-sync replica fsynced it; a broker without files says so when a level is asked."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tests.unit.test_moves import leading, member, only, recs
from tritonmq.config import BrokerConfig
from tritonmq.core.actions import (
    Action,
    SendEntries,
    SendError,
    SendPubAck,
    SendToPrimary,
    SyncLog,
    WriteLog,
)
from tritonmq.core.broker import BrokerCore, Role
from tritonmq.core.events import ClientFrameIn, FollowerFrame, PrimaryFrame, Synced, ZkView
from tritonmq.wire import codec, repl
from tritonmq.wire.frames import Append, ErrorCode, Follow, Pub, ReplAck

FILES = {"data_dir": "unused-by-the-core"}  # the core only needs to know there are files


def with_files_pair() -> tuple[BrokerCore, BrokerCore]:
    """Primary a and in-sync backup b, both with segment files, b following on "link-b"."""
    a = leading("a", isr="ab", min_insync=2, **FILES)
    b = BrokerCore(BrokerConfig(id="b", group="g1", min_insync=1, **FILES), member("b"))
    st = a.state
    assert st is not None
    b.handle(ZkView(st, {m: member(m) for m in "ab"}, None, 0.0))
    assert b.role is Role.FOLLOWING
    carry(a, b, a.handle(FollowerFrame("link-b", Follow("g1", "b", "boot-b", 1, 0, []), 0.0)), 0.0)
    return a, b


def carry(a: BrokerCore, b: BrokerCore, out: Sequence[Action], now: float) -> list[Action]:
    """What ``a`` sends ``b`` delivered, ``b``'s answers back, until quiet; ``a``'s other
    actions and ``b``'s own (WriteLog, SyncLog) returned, in order."""
    rest: list[Action] = []
    todo = list(out)
    while todo:
        act = todo.pop(0)
        if isinstance(act, SendEntries) and "link-b" in act.links:
            entries, published = a.entries_for(act.start, act.end)
            frame = Append(act.epoch, act.commit, act.start, entries, tuple(published), act.sync)
        elif hasattr(act, "leader") and getattr(act, "link", None) == "link-b":
            frame = act.leader  # type: ignore[attr-defined]
        else:
            rest.append(act)
            continue
        assert b.follow is not None
        for back in b.handle(PrimaryFrame(b.follow.id, frame, now)):
            if isinstance(back, SendToPrimary):
                todo.extend(a.handle(FollowerFrame("link-b", back.frame, now)))
            else:
                rest.append(back)
    return rest


def pub(c: BrokerCore, pid: int, durability: str, *uuids: str, now: float = 0.1) -> list[Action]:
    return c.handle(ClientFrameIn("prod", Pub(pid, "t", recs(*uuids), durability), now))


def test_every_event_writes_its_log_changes_before_its_other_actions() -> None:
    a, b = with_files_pair()
    out = pub(a, 1, "", "u1", "u2")
    assert isinstance(out[0], WriteLog), "the records reach the OS before they are sent"
    rest = carry(a, b, out, 0.2)
    writes = [x for x in rest if isinstance(x, WriteLog)]
    assert writes, "the backup writes what it receives before it acknowledges"
    assert only(rest, SendPubAck), "written by every in-sync replica: acknowledged (D1)"


def test_a_synced_publish_waits_for_every_in_sync_replicas_fsync() -> None:
    a, b = with_files_pair()
    out = pub(a, 1, "synced", "u1", "u2")
    assert only(out, SyncLog), "the primary syncs its own files at once"
    sends = only(out, SendEntries)
    assert sends and all(s.sync for s in sends), "and asks its followers to"
    rest = carry(a, b, out, 0.2)
    assert only(rest, SyncLog), "the backup syncs what it was asked to"
    assert not only(rest, SendPubAck), "committed, not fsynced yet: not acknowledged"
    last = a.log.last_ts
    assert not only(a.handle(Synced(last, 0.3)), SendPubAck), "the backup has not fsynced"
    back = b.handle(Synced(last, 0.3))
    [rack] = only(back, SendToPrimary)
    assert isinstance(rack.frame, ReplAck) and rack.frame.synced == last
    [ack] = only(a.handle(FollowerFrame("link-b", rack.frame, 0.31)), SendPubAck)
    assert ack.id == 1
    # a `written` publish after it is acknowledged once committed, fsync or not
    rest = carry(a, b, pub(a, 2, "written", "u3", now=0.4), 0.4)
    assert [x.id for x in only(rest, SendPubAck)] == [2]


def test_a_truncation_takes_back_what_was_fsynced_above_it() -> None:
    a, b = with_files_pair()
    carry(a, b, pub(a, 1, "", "u1", "u2", "u3"), 0.2)
    b.handle(Synced(b.log.last_ts, 0.3))
    assert b.synced_ts == 3
    b.log.journal = []
    b.log.truncate_after(1)  # as a new primary's `leader` answer does (R-rules)
    b.handle(Synced(0, 0.4))  # any event drains the journal
    assert b.synced_ts == 1


def test_a_level_asked_of_a_broker_without_files_is_refused_and_the_default_is_memory() -> None:
    c = leading("a")
    [err] = only(pub(c, 1, "synced", "u1"), SendError)
    assert err.code is ErrorCode.BAD_REQUEST and "data_dir" in err.message
    assert only(pub(c, 2, "", "u2"), SendPubAck), "the broker's default: memory, without files"


def test_the_level_and_the_fsync_point_cross_both_wires() -> None:
    frame = Pub(7, "t", recs("u1"), "synced")
    assert codec.decode_client(codec.enc_client(frame)) == frame
    assert codec.decode_client(codec.enc_client(dataclasses.replace(frame, durability=""))) == (
        dataclasses.replace(frame, durability="")
    )
    assert repl.decode_repl(repl.enc_rack(2, 10, 9)) == ReplAck(2, 10, 9)
    append = repl.decode_repl(repl.enc_append(2, 1, 5, [], (), sync=True))
    assert isinstance(append, Append) and append.sync
