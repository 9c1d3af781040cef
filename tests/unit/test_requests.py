"""fetch and commit on their own (BrokerCore's routing of them is in test_core_broker)."""

from __future__ import annotations

from tritonmq.core.actions import RegisterSubscription, SendCommitted, SendError, SendFetched
from tritonmq.core.delivery import Delivery
from tritonmq.core.log import GroupLog
from tritonmq.core.requests import FETCH_BYTES, Commits, fetch
from tritonmq.wire.frames import Commit, ErrorCode, Fetch
from tritonmq.wire.jsoncodec import record_size


def log_of(n: int, value: bytes = b"v") -> GroupLog:
    log = GroupLog()
    for i in range(1, n + 1):
        log.append_new("t", b"u%d" % i, None, value, None)
        log.mark_published(i, 1000 * i)
    return log


def test_a_fetch_stops_at_the_commit_point_the_record_limit_and_the_byte_cut() -> None:
    log = log_of(10)
    got = fetch(log, "g1", 3, "c", Fetch(1, "t", 2, 100, 50), commit_ts=8)
    assert isinstance(got, SendFetched) and [r[0] for r in got.records] == [2, 3, 4]
    assert got.next_ts == 5 and got.published == ((2, 2000), (3, 3000), (4, 4000))
    past = fetch(log, "g1", 100, "c", Fetch(2, "t", 9, 100, 50), commit_ts=8)
    assert isinstance(past, SendFetched) and (past.records, past.next_ts) == ([], 9)
    big = log_of(3, b"x" * FETCH_BYTES)
    one = fetch(big, "g1", 100, "c", Fetch(3, "t", 1, 3, 50), commit_ts=3)
    assert isinstance(one, SendFetched) and [r[0] for r in one.records] == [1]


def test_a_fetch_for_a_json_connection_is_cut_by_the_size_json_writes() -> None:
    # 8 records of 512 KiB control bytes: 4 MiB as the log counts them, 24 MiB as JSON
    log = log_of(8, b"\x01" * (512 * 1024))
    plain = fetch(log, "g1", 100, "c", Fetch(1, "t", 1, 8, 50), commit_ts=8)
    assert isinstance(plain, SendFetched) and len(plain.records) == 7
    got = fetch(log, "g1", 100, "c", Fetch(1, "t", 1, 8, 50), commit_ts=8, record_size=record_size)
    assert isinstance(got, SendFetched) and [r[0] for r in got.records] == [1]
    assert got.next_ts == 2  # the rest on the next fetch
    assert sum(record_size(r) for r in got.records) <= FETCH_BYTES
    # a record larger than the cut by itself still goes, alone
    huge = log_of(2, b"\x01" * FETCH_BYTES)
    one = fetch(huge, "g1", 100, "c", Fetch(2, "t", 1, 2, 50), commit_ts=2, record_size=record_size)
    assert isinstance(one, SendFetched) and [r[0] for r in one.records] == [1]


def test_a_fetch_of_purged_records_is_refused_with_the_range_unless_told_to_skip() -> None:
    log = log_of(6)
    log.purge("t", 3)
    err = fetch(log, "g7", 100, "c", Fetch(1, "t", 1, 6, 50), commit_ts=6)
    assert isinstance(err, SendError) and (err.code, err.first, err.last) == (
        ErrorCode.PURGED,
        1,
        3,
    )
    assert "g7" in err.message
    got = fetch(log, "g7", 100, "c", Fetch(2, "t", 1, 6, 50, skip_purged=True), commit_ts=6)
    assert isinstance(got, SendFetched) and got.purged == 3
    assert [r[0] for r in got.records] == [4, 5, 6]


def test_commits_wait_for_registration_and_step_down_takes_them() -> None:
    log = log_of(5)
    commits = Commits(Delivery(log, window=10, window_bytes=1 << 20))
    assert commits.commit("c1", Commit(1, "t", "q", 3), 5) == [
        RegisterSubscription("t", "q", "broadcast", 3)
    ]
    assert commits.commit("c2", Commit(2, "t", "q", 4), 5) == []
    commits.drop_conn("c2")
    assert commits.registered("t", "q", 3, 5) == [SendCommitted("c1", 1, 4, 5)]
    commits.commit("c3", Commit(3, "t", "other", 1), 5)
    assert commits.take_all() == [("c3", 3)] and commits.waiting == {}
