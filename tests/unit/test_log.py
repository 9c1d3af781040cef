"""The group log: dense ts, per-topic order, the uuid table, and where two histories agree."""

from __future__ import annotations

from itertools import count

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonmq.core.log import (
    COMPACT_AT,
    RECORD_MEMORY,
    GroupLog,
    TopicLog,
    divergence,
    memory_size,
    pub_memory,
    record_size,
)
from tritonmq.core.slots import slot_of
from tritonmq.errors import LogGap
from tritonmq.wire.frames import Entry

TOPICS = ("chat", "orders", "logs")
writes = st.lists(st.tuples(st.sampled_from(TOPICS), st.binary(max_size=8)), max_size=8)
batches = st.lists(writes, max_size=6)


class Producer:
    """Hands out unique uuids, as real producers do."""

    def __init__(self) -> None:
        self._n = count()

    def uuid(self) -> bytes:
        return b"u%d" % next(self._n)

    def write(self, log: GroupLog, batch: list[tuple[str, bytes]]) -> list[int]:
        return [log.append_new(topic, self.uuid(), None, value, None) for topic, value in batch]


def assert_consistent(log: GroupLog) -> None:
    """Every index of the log agrees with the entries, and it accounts its size exactly like a
    log freshly built from the same entries (so truncation leaves no stale bytes behind)."""
    stamps = [rec[0] for _, rec in log.entries]
    assert stamps == list(range(log.base_ts, log.base_ts + len(log)))
    assert log.last_ts == log.base_ts + len(log) - 1
    assert log.uuids == {rec[1]: rec[0] for _, rec in log.entries}
    fresh = GroupLog(log.base_ts)
    fresh.append_replicated(log.base_ts, log.entries)
    for topic in {t for t, _ in log.entries} | set(log.topics):
        expected = [rec for t, rec in log.entries if t == topic]
        assert log.topic(topic).records == expected
        assert log.topic(topic).bytes == fresh.topic(topic).bytes >= 0
    assert log.bytes == fresh.bytes
    assert (log.bytes == 0) == (len(log) == 0)


# --- appending ----------------------------------------------------------------------


@given(batches, st.integers(1, 1000))
def test_appends_stamp_dense_ts_and_keep_topic_order(
    batches: list[list[tuple[str, bytes]]], base_ts: int
) -> None:
    log = GroupLog(base_ts)
    producer = Producer()
    written: list[tuple[str, bytes]] = []
    stamps: list[int] = []
    for batch in batches:
        stamps += producer.write(log, batch)
        written += batch
    assert stamps == list(range(base_ts, base_ts + len(written)))
    assert_consistent(log)
    for topic in TOPICS:
        assert [r[3] for r in log.topic(topic).records] == [v for t, v in written if t == topic]


@given(batches, st.data())
def test_truncate_then_reappend_stays_consistent(
    batches: list[list[tuple[str, bytes]]], data: st.DataObject
) -> None:
    log = GroupLog()
    producer = Producer()
    for batch in batches:
        producer.write(log, batch)
    before = list(log.entries)
    cut = data.draw(st.integers(-1, log.last_ts + 2), label="truncate_after")
    kept = max(0, min(cut, log.last_ts))

    dropped = log.truncate_after(cut)

    assert dropped == len(before) - kept
    assert log.entries == before[:kept]
    assert_consistent(log)
    for _, rec in before[kept:]:
        assert log.lookup(rec[1]) is None  # a retry of a dropped record is accepted anew
    again = data.draw(writes, label="reappend")
    assert producer.write(log, again) == list(range(kept + 1, kept + 1 + len(again)))
    assert_consistent(log)


@given(batches, st.integers(-2, 60), st.integers(-2, 60), st.integers(1, 20))
def test_range_reads_return_exactly_the_records_in_range(
    batches: list[list[tuple[str, bytes]]], start: int, end: int, limit: int
) -> None:
    log = GroupLog()
    Producer().write(log, [w for b in batches for w in b])
    assert log.entries_between(start, end) == [e for e in log.entries if start <= e[1][0] <= end]
    for topic in TOPICS:
        t = log.topic(topic)
        assert (
            t.between(start, end, limit) == [r for r in t.records if start <= r[0] <= end][:limit]
        )


def test_topic_log_positions() -> None:
    t = TopicLog()
    assert t.first_ts() is None and t.index_of(5) == 0
    t.records = [(2, b"a", None, b"", None), (5, b"b", None, b"", None)]
    assert t.first_ts() == 2
    assert [t.index_of(ts) for ts in (1, 2, 3, 5, 6)] == [0, 0, 1, 1, 2]


# --- replicated appends -------------------------------------------------------------


def _entries(first_ts: int, n: int, topic: str = "chat") -> list[Entry]:
    return [(topic, (ts, b"r%d" % ts, None, b"v", None)) for ts in range(first_ts, first_ts + n)]


def test_replicated_entries_rebuild_topics_and_dedup_table() -> None:
    primary = GroupLog()
    producer = Producer()
    producer.write(primary, [("chat", b"hi"), ("orders", b"o1"), ("chat", b"yo")])
    backup = GroupLog()
    backup.append_replicated(1, primary.entries_between(1, 2))
    backup.append_replicated(3, primary.entries_between(3, 3))
    backup.append_replicated(backup.last_ts + 1, [])
    assert backup.entries == primary.entries
    assert backup.uuids == primary.uuids
    assert backup.topic("chat").records == primary.topic("chat").records
    assert_consistent(backup)


@pytest.mark.parametrize(
    "batch",
    [
        pytest.param(_entries(5, 2), id="gap"),
        pytest.param(_entries(3, 2), id="overlap"),
        pytest.param(_entries(4, 1) + _entries(6, 1), id="hole-inside"),
    ],
)
def test_replicated_append_must_continue_the_log(batch: list[Entry]) -> None:
    log = GroupLog()
    log.append_replicated(1, _entries(1, 3))
    before = list(log.entries)
    with pytest.raises(LogGap):
        log.append_replicated(batch[0][1][0], batch)
    assert log.entries == before
    assert_consistent(log)


# --- epochs -------------------------------------------------------------------------


def test_begin_epoch_requires_a_newer_epoch_at_the_log_end() -> None:
    log = GroupLog()
    log.begin_epoch(1, 1)
    Producer().write(log, [("chat", b"a"), ("chat", b"b")])
    with pytest.raises(ValueError):
        log.begin_epoch(1, 3)
    with pytest.raises(ValueError):
        log.begin_epoch(2, 2)
    log.begin_epoch(2, 3)
    assert log.epochs == [(1, 1), (2, 3)]


def test_beginning_the_last_epoch_again_with_nothing_written_changes_nothing() -> None:
    """A primary named again for the epoch it began (a stale view made it step down)."""
    log = GroupLog()
    log.begin_epoch(1, 1)
    log.begin_epoch(1, 1)
    assert log.epochs == [(1, 1)]
    Producer().write(log, [("chat", b"a")])
    with pytest.raises(ValueError):  # once written in, the epoch is not begun again
        log.begin_epoch(1, 1)
    assert log.epochs == [(1, 1)]


def test_truncation_forgets_epochs_that_started_after_the_cut() -> None:
    log = GroupLog()
    producer = Producer()
    log.begin_epoch(1, 1)
    producer.write(log, [("chat", b"a")] * 3)
    log.begin_epoch(3, 4)
    producer.write(log, [("chat", b"b")] * 2)
    log.truncate_after(4)
    assert log.epochs == [(1, 1), (3, 4)]
    log.truncate_after(3)
    assert log.epochs == [(1, 1)]


@pytest.mark.parametrize(
    ("follower", "f_last", "leader", "l_last", "agree"),
    [
        ([(1, 1)], 5, [(1, 1)], 5, 5),  # same history
        ([(1, 1)], 3, [(1, 1)], 9, 3),  # follower behind
        ([(1, 1)], 9, [(1, 1), (2, 6)], 8, 5),  # follower has epoch 1's uncommitted tail
        ([(1, 1), (2, 6)], 8, [(1, 1), (3, 6)], 9, 5),  # two primaries wrote after ts 5
        ([(1, 1)], 5, [(2, 1)], 4, 0),  # nothing in common
        ([], 0, [(1, 1)], 4, 0),  # empty follower
    ],
)
def test_divergence_examples(
    follower: list[tuple[int, int]],
    f_last: int,
    leader: list[tuple[int, int]],
    l_last: int,
    agree: int,
) -> None:
    assert divergence(follower, f_last, leader, l_last) == agree


def _sync(follower: GroupLog, leader: GroupLog, take: int) -> None:
    """Follow ``leader``: check the agreement point against the entries, cut, copy ``take`` more."""
    agree = divergence(follower.epochs, follower.last_ts, leader.epochs, leader.last_ts)
    mine, theirs = follower.entries, leader.entries
    assert 0 <= agree <= min(len(mine), len(theirs))
    assert mine[:agree] == theirs[:agree], "truncating to divergence must leave a prefix"
    assert agree in (len(mine), len(theirs)) or mine[agree] != theirs[agree], "not maximal"
    follower.truncate_after(agree)
    follower.adopt_epochs(agree, leader.epochs)
    follower.append_replicated(agree + 1, leader.entries_between(agree + 1, agree + take))
    assert follower.entries == theirs[: follower.last_ts]
    assert_consistent(follower)
    # Having copied a prefix, a second handshake finds nothing to cut.
    again = divergence(follower.epochs, follower.last_ts, leader.epochs, leader.last_ts)
    assert again == follower.last_ts


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_divergence_finds_the_longest_common_prefix_in_any_history(data: st.DataObject) -> None:
    """Replicas live through epochs: the primary writes, followers copy prefixes, any replica
    may start the next epoch from its own end (clean or not)."""
    replicas = [GroupLog() for _ in range(3)]
    producer = Producer()
    primary, epoch = 0, 1
    replicas[primary].begin_epoch(epoch, 1)
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        step = data.draw(st.sampled_from(["write", "copy", "copy", "elect"]))
        if step == "write":
            n = data.draw(st.integers(1, 4), label="writes")
            producer.write(replicas[primary], [("chat", b"e%d" % epoch)] * n)
        elif step == "copy":
            follower = data.draw(st.sampled_from([i for i in range(3) if i != primary]))
            _sync(replicas[follower], replicas[primary], data.draw(st.integers(0, 6), label="take"))
        else:
            primary = data.draw(st.integers(0, 2), label="new primary")
            epoch += 1
            replicas[primary].begin_epoch(epoch, replicas[primary].last_ts + 1)
    for i, log in enumerate(replicas):
        if i != primary:
            _sync(log, replicas[primary], len(replicas[primary]))
            assert log.entries == replicas[primary].entries


# --- purge ---------------------------------------------------------------------------


def test_purge_frees_one_topic_keeps_ts_dense_and_keeps_dedup_until_forgotten() -> None:
    log = GroupLog()
    for i in range(10):
        log.append_new("a" if i % 2 == 0 else "b", b"u%d" % i, None, b"x" * 100, None)
    before = log.bytes
    assert log.purge("a", 7) == 4  # a's ts 1, 3, 5, 7
    assert [r[0] for r in log.topic("a").records] == [9]
    assert [r[0] for r in log.topic("b").records] == [2, 4, 6, 8, 10]
    assert log.bytes == before - 4 * before // 10  # ten records of the same cost
    assert log.last_ts == 10 and log.entries[0] is None and log.entries[1] is not None
    assert log.lookup(b"u0") == 1, "a purged record's uuid still deduplicates"
    log.forget_uuids_upto(5)
    assert log.lookup(b"u0") is None and log.lookup(b"u6") == 7


def test_purged_heads_are_compacted_and_indexing_stays_exact() -> None:
    log = GroupLog()
    for i in range(COMPACT_AT + 10):
        log.append_new("t", b"%d" % i, None, b"v", None)
    log.purge("t", COMPACT_AT + 2)
    assert log.base_ts == COMPACT_AT + 3
    assert log.entries_between(COMPACT_AT + 3, COMPACT_AT + 3)[0][1][0] == COMPACT_AT + 3  # type: ignore[index]
    assert log.last_ts == COMPACT_AT + 10
    log.purge("t", COMPACT_AT + 10)
    assert len(log) == 0 and log.last_ts == COMPACT_AT + 10 and log.bytes == 0
    assert log.append_new("t", b"next", None, b"v", None) == COMPACT_AT + 11


def test_a_backup_behind_the_purge_horizon_starts_over_at_the_primary_base() -> None:
    primary = GroupLog()
    for i in range(20):
        primary.append_new("t", b"%d" % i, None, b"v", None)
    primary.purge("t", 15)
    backup = GroupLog()
    backup.reset_to(primary.base_ts)
    backup.append_replicated(primary.base_ts, primary.entries_between(primary.base_ts, 20))
    assert [r[0] for r in backup.topic("t").records] == [16, 17, 18, 19, 20]
    assert backup.last_ts == primary.last_ts


# --- published times (spark support) -------------------------------------------------


def test_published_is_looked_up_per_batch() -> None:
    log = GroupLog()
    for i in range(1, 6):
        log.append_new("t", b"u%d" % i, None, b"v", None)
        if i in (1, 4):
            log.mark_published(i, 1000 * i)
    assert [log.published_at(ts) for ts in (1, 2, 3, 4, 5)] == [1000, 1000, 1000, 4000, 4000]
    assert log.published_between(2, 3) == [(1, 1000)]
    assert log.published_between(3, 5) == [(1, 1000), (4, 4000)]
    assert GroupLog().published_at(1) is None


def test_published_never_goes_back_in_time_or_repeats_a_batch() -> None:
    log = GroupLog()
    log.mark_published(1, 500)
    log.mark_published(1, 900)  # the same batch again: ignored
    log.mark_published(3, 100)  # the wall clock stepped back: keep the order readers see
    assert log.published == [(1, 500), (3, 500)]


def test_published_follows_truncation_reset_and_purge() -> None:
    log = GroupLog()
    for i in range(1, 5001):
        log.append_new("t", b"u%d" % i, None, b"v", None)
        log.mark_published(i, i)
    log.truncate_after(4000)
    assert log.published[-1] == (4000, 4000)
    log.purge("t", 4100)  # compaction moves base_ts: pairs before it go
    assert log.base_ts == 4001 and log.published == [(4000, 4000)]
    log.reset_to(9000)
    assert log.published == []


def test_last_purged_remembers_the_newest_purged_record_of_a_topic() -> None:
    log = GroupLog()
    for topic in ["t", "x", "t", "x"]:
        log.append_new(topic, bytes([len(log.entries)]), None, b"v", None)
    log.purge("t", 2)
    assert log.topics["t"].last_purged == 1 and log.topics["x"].last_purged == 0
    log.purge("t", 100)
    assert "t" not in log.topics, "an empty topic nobody subscribes to is freed"
    assert log.last_purged("t") == 3


def test_purge_points_name_every_topic_purged_freed_or_not() -> None:
    """What a backup tells a primary it follows (``follow``'s ``purged``, S3)."""
    log = GroupLog()
    for topic in ["t", "x", "t", "y"]:
        log.append_new(topic, bytes([len(log.entries)]), None, b"v", None)
    assert log.purge_points() == ()
    log.purge("t", 1)
    log.purge("y", 100)  # emptied and freed
    assert "y" not in log.topics and log.purge_points() == (("t", 1), ("y", 4))


# --- issue 8: empty topics are freed; max_bytes counts what records cost ---------------------


def test_an_emptied_topic_without_subscribers_is_freed_and_its_purge_forgotten_later() -> None:
    log = GroupLog()
    for i in range(200):
        log.append_new(f"t{i}", b"u%d" % i, None, b"v", None)
    assert len(log.topics) == 200
    for i in range(200):
        log.purge(f"t{i}", 1_000)
    assert log.topics == {} and log.bytes == 0
    assert log.last_purged("t7") == 8, "a reader resuming on a freed topic is still told PURGED"
    log.forget_uuids_upto(100)  # the dedup window passes: what was purged up to 100 goes too
    assert log.last_purged("t7") == 0 and log.last_purged("t150") == 151
    assert len(log.freed) == 100
    log.forget_uuids_upto(1_000)
    assert log.freed == {} and log.freed_order == []


def test_a_topic_with_a_subscriber_is_kept_and_a_recreated_topic_keeps_its_purge_point() -> None:
    log = GroupLog()
    log.append_new("s", b"u1", None, b"v", None)
    log.append_new("t", b"u2", None, b"v", None)
    log.topic("s").subscribers = 1
    log.purge("s", 10)
    log.purge("t", 10)
    assert "s" in log.topics and "t" not in log.topics
    log.topic("s").subscribers = 0
    log.free_if_unused("s")
    assert "s" not in log.topics
    log.append_new("t", b"u3", None, b"v", None)
    assert log.topics["t"].last_purged == 2 and "t" not in log.freed


def test_truncation_frees_a_topic_it_empties() -> None:
    log = GroupLog()
    log.append_new("a", b"u1", None, b"v", None)
    log.append_new("b", b"u2", None, b"v", None)
    log.truncate_after(1)
    assert list(log.topics) == ["a"]
    assert log.bytes == memory_size(log.topics["a"].records[0], log.topics["a"].bytes)


def test_max_bytes_counts_the_per_record_overhead_not_only_the_value() -> None:
    """Issue 8: 1 M empty records were counted as 30.5 MB but cost ~385 MB."""
    log = GroupLog()
    for i in range(1000):
        log.append_new("t", b"%016d" % i, None, b"", None)
    assert log.bytes >= 1000 * (RECORD_MEMORY + 32)  # >= ~360 bytes per empty record
    assert log.bytes == pub_memory([(b"%016d" % i, None, b"", None) for i in range(1000)])
    rec = (1, b"u" * 16, b"key", b"v" * 100, {"h": "x"})
    assert memory_size(rec, record_size(rec)) > record_size(rec) + RECORD_MEMORY
    log.purge("t", 500)
    assert log.bytes == 500 * memory_size((0, b"%016d" % 0, None, b"", None), 32)


def test_distinct_topics_published_once_cost_no_memory_once_purged_and_forgotten() -> None:
    """Issue 8: 200,000 distinct topics cost +95 MB on every broker, permanently (20,000
    here, for time: the dicts' peak size is what is checked to go)."""
    import tracemalloc

    log = GroupLog()
    log.append_new("warm", b"u", None, b"v", None)
    log.purge("warm", 1)
    log.forget_uuids_upto(1)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        n = 20_000
        for i in range(n):
            log.append_new(f"topic-{i}", i.to_bytes(16, "big"), None, b"", None)
        for i in range(n):
            log.purge(f"topic-{i}", log.last_ts)
        assert log.topics == {} and log.bytes == 0
        log.forget_uuids_upto(log.last_ts)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert log.freed == {} and log.uuids == {}
    # CPython keeps up to 2,000 freed tuples of each size for reuse (~280 KB here): allowed.
    # Without the dicts rebuilt ~131 bytes per topic stayed (200,000 topics); unfreed, more.
    assert after - before < n * 20, f"{(after - before) / n:.0f} bytes per topic left behind"


def test_the_purged_head_is_rescanned_after_a_truncation_below_it() -> None:
    log = GroupLog()
    for i in range(10):
        log.append_new("a", b"a%d" % i, None, b"v", None)
    log.purge("a", 6)  # placeholders at ts 1..6: the head scan has reached them
    assert log.base_ts == 1 and log.entries[:6] == [None] * 6
    log.truncate_after(3)  # a new primary's history ends at 3
    for i in range(3):
        log.append_new("b", b"b%d" % i, None, b"v", None)  # ts 4, 5, 6
    log.purge("b", 4)
    assert log.base_ts == 1, "records at ts 5 and 6 are not placeholders to compact away"
    assert [e[1][0] for e in log.entries_between(5, 6) if e is not None] == [5, 6]


def test_the_record_count_follows_appends_purges_truncation_and_reset() -> None:
    """meta's ``records`` is one read, not a walk over every topic (a `hello` flood on a
    group of 100,000 topics walked them all for each)."""
    log = GroupLog()

    def walked() -> int:
        return sum(len(t.records) for t in log.topics.values())

    for i in range(20):
        log.append_new("abc"[i % 3], b"u%d" % i, None, b"v", None)
    log.purge("a", 10)
    assert log.records == walked() == 16
    log.truncate_after(15)
    assert log.records == walked() == 11
    other = GroupLog()
    other.append_replicated(1, log.entries_between(1, 15))
    assert other.records == 11
    log.reset_to(100)
    assert log.records == walked() == 0


def test_a_slots_purged_uuids_are_kept_as_runs_each_in_ts_order() -> None:
    """A slot's topics purge in turn, each purge in ts order: a handover merges the runs.
    Sorting a hot slot's 2,000,000 at once held the old group's loop up to 0.9 s."""
    log = GroupLog()
    log.slots = 64
    a = "a"
    b = next(f"t{i}" for i in range(200) if slot_of(f"t{i}", 64) == slot_of(a, 64))
    for n in range(1, 9):
        log.append_new(a if n % 2 else b, bytes([n]), None, b"v", None)
    log.purge(a, 3)  # 1, 3
    log.purge(b, 4)  # 2, 4: 2 comes after 3
    log.purge(a, 5)  # 5: in order after 4
    slot = slot_of(a, 64)
    assert [[ts for ts, _ in run] for run in log.purged_runs(slot)] == [[1, 3], [2, 4, 5]]
    log.forget_uuids_upto(2)  # 1 goes; 3 holds back 2 (forgotten with it, a little later)
    assert [[ts for ts, _ in run] for run in log.purged_runs(slot)] == [[3], [2, 4, 5]]
    log.forget_uuids_upto(3)  # 3 and 2 go: one run left
    assert [[ts for ts, _ in run] for run in log.purged_runs(slot)] == [[4, 5]]
    log.forget_uuids_upto(8)
    assert not log.purged_by_slot and not log.run_starts and not log.popped
    log.purge(b, 6)
    log.purge(a, 7)
    assert [[ts for ts, _ in run] for run in log.purged_runs(slot)] == [[6, 7]]


def test_a_backup_appends_a_dedup_page_out_of_order_as_a_run_not_sorting_its_slot_again() -> None:
    """Pages of purged uuids come in the primary's order, out of ts order where its
    topics purged out of turn: sorting the backup's whole slot again for each page held
    its loop up to 0.28 s a page for a hot slot's 2,000,000 (replication.md M2.3)."""
    backup = GroupLog()
    backup.adopt_dedup([(1, b"u1", 3), (3, b"u3", 3)])
    held = backup.purged_by_slot[3]
    backup.adopt_dedup([(2, b"u2", 3), (4, b"u4", 3)])  # a's 1, 3, then b's 2, 4
    assert backup.purged_by_slot[3] is held and list(held) == [
        (1, b"u1"),
        (3, b"u3"),
        (2, b"u2"),
        (4, b"u4"),
    ]
    assert [[ts for ts, _ in run] for run in backup.purged_runs(3)] == [[1, 3], [2, 4]]
    assert backup.uuids == {b"u1": 1, b"u2": 2, b"u3": 3, b"u4": 4}
