"""Segment files on a real disk (storage/segments.py, docs/replication.md D3): what was
appended is read back; a torn tail is cut and is not damage; a flipped byte anywhere ends
the valid log there, drops what follows and is never read back; segments roll by size and
retention deletes whole ones, leaving a BASE a replay starts from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonmq.core import journal
from tritonmq.core.log import GroupLog
from tritonmq.storage.recovery import open_data_dir
from tritonmq.storage.segments import HEADER, SegmentStore


def written_log(store: SegmentStore, batches: int, per: int = 10) -> GroupLog:
    """A primary's log of ``batches`` pub batches on two topics, each event's operations
    appended to ``store`` as the shell does."""
    log = GroupLog()
    log.journal = []
    log.begin_epoch(1, 1)
    for b in range(batches):
        first = log.last_ts + 1
        for i in range(per):
            log.append_new(f"t{b % 2}", f"u{b}.{i}".encode(), None, b"x" * 50, {"n": i})
        log.mark_published(first, 1_000 + b)
        store.append(log.journal)
        log.journal = []
    return log


def records(log: GroupLog) -> list[tuple[str, tuple[object, ...]]]:
    return [e for e in log.entries_between(log.base_ts, log.last_ts) if e is not None]


def test_what_was_appended_is_read_back_as_the_same_log(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path, segment_bytes=4096)
    store.recover()
    log = written_log(store, 40)
    store.sync()
    store.close()
    assert len(store.segments) > 3, "rolled by size"
    again = SegmentStore(tmp_path, segment_bytes=4096)
    got = again.recover()
    assert not got.cut and got.frames == 1 + 40 * 2
    rebuilt = journal.replay(got.ops)
    assert records(rebuilt) == records(log) and rebuilt.uuids == log.uuids
    assert rebuilt.epochs == [(1, 1)] and rebuilt.published_at(400) == 1_039


def test_a_torn_tail_is_cut_and_the_rest_kept(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    store.recover()
    log = written_log(store, 5)
    store.close()
    seg = store.segments[-1].path
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 30)  # the last batch's frames cut, as by a crash mid-write
    got = SegmentStore(tmp_path).recover()
    assert (got.cut, got.damaged) == ("torn tail", False)
    rebuilt = journal.replay(got.ops)
    assert records(rebuilt) == records(log)[:40], "the last batch's operation is gone whole"
    assert seg.stat().st_size < size - 7, "cut at the frame's start"
    again = SegmentStore(tmp_path).recover()
    assert not again.cut, "a second start finds the files clean"


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_a_flipped_byte_ends_the_valid_log_there_and_is_never_read_back(
    tmp_path: Path, where: float
) -> None:
    store = SegmentStore(tmp_path, segment_bytes=2048)
    store.recover()
    log = written_log(store, 30)
    store.close()
    files = sorted(tmp_path.glob("*.seg"))
    victim = files[len(files) // 2]
    data = bytearray(victim.read_bytes())
    at = max(HEADER.size, int(len(data) * where))
    data[at] ^= 0x40
    victim.write_bytes(bytes(data))
    got = SegmentStore(tmp_path, segment_bytes=2048).recover()
    assert got.damaged and got.cut in ("crc mismatch", "bad frame header", "frame cut short")
    assert got.cut_at.startswith(victim.name)
    rebuilt = journal.replay(got.ops)
    kept = records(rebuilt)
    assert kept == records(log)[: len(kept)], "a prefix of what was written, nothing altered"
    assert len(kept) < len(records(log))
    assert not any(p.exists() for p in files[len(files) // 2 + 1 :]), "what follows is dropped"


def test_a_replica_with_damaged_files_comes_back_as_a_new_incarnation(tmp_path: Path) -> None:
    first = open_data_dir(tmp_path, 4096)
    written_log(first.store, 10)
    first.store.close()
    second = open_data_dir(tmp_path, 4096)
    assert second.kept_boot and second.boot == first.boot, "whole: the same incarnation"
    assert second.log.records == 100
    second.store.close()
    seg = sorted((tmp_path / "log").glob("*.seg"))[0]
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 1
    seg.write_bytes(bytes(data))
    third = open_data_dir(tmp_path, 4096)
    assert not third.kept_boot and third.boot != first.boot, "it lost what it acknowledged"
    assert third.log.records < 100
    third.store.close()


def test_retention_deletes_whole_purged_segments_and_a_replay_starts_from_their_base(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path, segment_bytes=2048)
    store.recover()
    log = written_log(store, 30)
    for topic in ("t0", "t1"):
        log.purge(topic, 200)
    log.forget_uuids_upto(200)
    store.append(log.journal)
    log.journal = []
    upto = journal.purged_and_forgotten(log)
    assert upto >= 200
    gone = store.deletable(upto, now_ms=2_000, retention_s=0.0, retention_bytes=0)
    assert gone and all(s.end_ts <= 200 for s in gone)
    kept_ms = store.deletable(upto, now_ms=2_000, retention_s=3600.0, retention_bytes=0)
    assert not kept_ms, "disk_retention_s keeps purged segments until they are that old"
    store.delete(gone, journal.base_of(log, gone[-1].end_ts + 1))
    store.close()
    got = SegmentStore(tmp_path, segment_bytes=2048).recover()
    assert not got.cut and got.ops[0][0] == journal.BASE
    rebuilt = journal.replay(got.ops)
    assert records(rebuilt) == records(log) and rebuilt.last_purged("t0") == log.last_purged("t0")


def test_a_flipped_length_that_runs_past_the_end_is_damage_not_a_torn_tail(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path)
    store.recover()
    written_log(store, 20)
    store.close()
    seg = store.segments[-1].path
    data = bytearray(seg.read_bytes())
    data[6] ^= 0x01  # the first frame's length grows 64 KiB: past the end of the file
    seg.write_bytes(bytes(data))
    got = SegmentStore(tmp_path).recover()
    assert got.damaged and got.cut == "frame cut short" and got.frames == 0


# --- found in review: retention, a crash mid-delete, a damaged length ---------------------


def event(store: SegmentStore, log: GroupLog) -> None:
    """One event's operations appended, as the shell does for a WriteLog."""
    store.append(log.journal or [])
    log.journal = []


def rec(ts: int, topic: str = "a") -> tuple[str, tuple[object, ...]]:
    return (topic, (ts, f"u{ts}".encode(), None, b"v", None))


def test_retention_keeps_a_segment_whose_reset_and_adopted_uuids_are_still_needed(
    tmp_path: Path,
) -> None:
    """A backup started over by a reset at the primary's base 1000, with the uuid of a
    purged record 990 still deduplicating: the segment holding them said it covered up to
    ts 5 only, retention deleted it, and every later start failed (LogGap at 1000)."""
    store = SegmentStore(tmp_path, segment_bytes=1)  # rolls after every event
    store.recover()
    log = GroupLog()
    log.journal = []
    log.begin_epoch(1, 1)
    log.append_replicated(1, [rec(t) for t in range(1, 6)])
    event(store, log)
    log.reset_to(1000)
    log.adopt_epochs(999, [(1, 1), (2, 500)])
    log.adopt_dedup([(990, b"U990", 0)])
    event(store, log)
    log.append_replicated(1000, [rec(1000)])
    log.mark_published(1000, 5_000)
    event(store, log)
    gone = store.deletable(journal.purged_and_forgotten(log), 10_000, 0.0, 0)
    if gone:
        store.delete(gone, journal.base_of(log, gone[-1].end_ts + 1))
    store.close()
    rebuilt = journal.replay(SegmentStore(tmp_path, segment_bytes=1).recover().ops)
    assert rebuilt.last_ts == 1000 and rebuilt.uuids.get(b"U990") == 990


def test_retention_keeps_the_uuids_a_catching_up_follower_adopted_for_holes(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path, segment_bytes=1)
    store.recover()
    log = GroupLog()
    log.journal = []
    log.begin_epoch(1, 1)
    log.append_replicated(1, [rec(t) for t in range(1, 6)])
    log.purge_as_primary([("a", 5)])
    log.forget_uuids_upto(5)
    event(store, log)
    log.adopt_epochs(5, [(1, 1)])
    log.adopt_dedup([(8, b"U8", 0)])  # purged at the primary, its uuid deduplicating still
    event(store, log)
    log.append_replicated(6, [None, None, None, rec(9)])
    event(store, log)
    gone = store.deletable(journal.purged_and_forgotten(log), 10_000, 0.0, 0)
    if gone:
        store.delete(gone, journal.base_of(log, gone[-1].end_ts + 1))
    store.close()
    rebuilt = journal.replay(SegmentStore(tmp_path, segment_bytes=1).recover().ops)
    assert rebuilt.uuids.get(b"U8") == 8, "elected, it would store a retry of ts 8 again"


def test_a_crash_between_writing_the_base_and_deleting_the_segments_restarts_cleanly(
    tmp_path: Path,
) -> None:
    store = SegmentStore(tmp_path, segment_bytes=1)
    store.recover()
    log = GroupLog()
    log.journal = []
    log.begin_epoch(1, 1)
    for b in range(3):
        first = log.last_ts + 1
        for i in range(3):
            log.append_new("a", f"u{b}.{i}".encode(), None, b"v", None)
        log.mark_published(first, 1000 + b)
        event(store, log)
    log.purge("a", 6)
    log.forget_uuids_upto(6)
    event(store, log)
    gone = store.deletable(journal.purged_and_forgotten(log), 10_000, 0.0, 0)
    assert gone
    real_unlink = Path.unlink
    Path.unlink = lambda self, missing_ok=False: None  # type: ignore[method-assign,assignment]
    try:  # the process dies after the BASE is in place and before any segment goes
        store.delete_files(gone, journal.base_of(log, gone[-1].end_ts + 1))
    finally:
        Path.unlink = real_unlink  # type: ignore[method-assign]
    store.close()
    got = SegmentStore(tmp_path, segment_bytes=1).recover()
    rebuilt = journal.replay(got.ops)
    assert rebuilt.last_ts == log.last_ts and records(rebuilt) == records(log)
    assert not any(p.exists() for p in (s.path for s in gone)), "deleted at the start"


def test_a_length_damaged_upward_in_the_last_frame_is_damage_not_a_torn_tail(
    tmp_path: Path,
) -> None:
    """The last frame of the newest segment, written, fsynced and acknowledged, with one
    bit of its length flipped: it runs past the end, nothing valid follows, so it looked
    like an unfinished write and the broker kept its boot without an acknowledged record."""
    first = open_data_dir(tmp_path, 4096)
    log = GroupLog()
    log.journal = []
    log.begin_epoch(1, 1)
    for b in range(3):
        log.append_new("a", f"u{b}".encode(), None, b"v" * 20, None)
        first.store.append(log.journal)
        log.journal = []
    first.store.close()
    seg = sorted((tmp_path / "log").glob("*.seg"))[-1]
    data = bytearray(seg.read_bytes())
    pos, starts = 0, []
    while pos < len(data):
        starts.append(pos)
        pos += HEADER.size + HEADER.unpack_from(data, pos)[2]
    data[starts[-1] + 8] ^= 0x80  # the low byte of the last frame's length: +128
    seg.write_bytes(bytes(data))
    second = open_data_dir(tmp_path, 4096)
    second.store.close()
    assert second.recovered.cut == "bad frame length" and not second.kept_boot
