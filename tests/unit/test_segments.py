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
