"""A log's journal replayed rebuilds the log (core/journal.py, docs/replication.md D2): for
any mix of what a primary and a backup do to their logs, the log a broker restarts with
from its segment files is the one it had."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tritonmq.core import journal
from tritonmq.core.log import GroupLog

TOPICS = ("a", "b", "c")


def snapshot(log: GroupLog) -> dict[str, Any]:
    """Everything a broker reads of its log, as comparable values."""
    return {
        "last_ts": log.last_ts,
        "entries": [e for e in log.entries_between(log.base_ts, log.last_ts) if e is not None],
        "topics": {
            t: (list(tl.records), tl.last_purged) for t, tl in log.topics.items() if tl.records
        },
        "purge_points": log.purge_points(),
        "uuids": dict(log.uuids),
        "purged": {s: list(d) for s, d in log.purged_by_slot.items() if d},
        "epochs": list(log.epochs),
        "published": {  # when each retained record was accepted, as fetch answers it
            e[1][0]: log.published_at(e[1][0])
            for e in log.entries_between(log.base_ts, log.last_ts)
            if e is not None
        },
        "records": log.records,
        "bytes": log.bytes,
        "slots": log.slots,
    }


ops = st.lists(
    st.one_of(
        st.tuples(st.just("pub"), st.sampled_from(TOPICS), st.integers(1, 4)),
        st.tuples(st.just("replicated"), st.sampled_from(TOPICS), st.integers(1, 3)),
        st.tuples(st.just("epoch")),
        st.tuples(st.just("truncate"), st.integers(0, 3)),
        st.tuples(st.just("purge"), st.sampled_from(TOPICS), st.integers(0, 6)),
        st.tuples(st.just("purge_points"), st.sampled_from(TOPICS), st.integers(0, 6)),
        st.tuples(st.just("forget"), st.integers(0, 8)),
        st.tuples(st.just("dedup"), st.integers(1, 3)),
        st.tuples(st.just("slots"), st.sampled_from((0, 4, 64))),
    ),
    max_size=40,
)


def drive(log: GroupLog, steps: list[tuple[Any, ...]]) -> None:
    """Apply ``steps`` through the log's public methods, as the cores do."""
    n = 0
    for step in steps:
        n += 1
        match step:
            case ("pub", topic, k):
                first = log.last_ts + 1
                for i in range(k):
                    log.append_new(topic, f"u{n}.{i}".encode(), None, b"v" * i, None)
                log.mark_published(first, 1000 + n)
            case ("replicated", topic, k):
                start = log.last_ts + 1
                entries = [
                    (topic, (start + i, f"r{n}.{i}".encode(), b"k", b"x", {"h": 1}))
                    for i in range(k)
                ]
                log.append_replicated(start, [None, *entries[1:]] if k > 1 else entries)
            case ("epoch",):
                log.begin_epoch((log.epochs[-1][0] if log.epochs else 0) + 1, log.last_ts + 1)
            case ("truncate", back):
                # only entries never purged are ever truncated (uncommitted ones, R-rules)
                log.truncate_after(max(log.purged_through, log.last_ts - back))
            case ("purge", topic, upto):
                log.purge(topic, log.base_ts + upto)
            case ("purge_points", topic, upto):
                log.purge_as_primary([(topic, log.base_ts + upto)])
            case ("forget", upto):
                log.forget_uuids_upto(log.base_ts + upto)
            case ("dedup", k):
                log.adopt_dedup([(i, f"d{n}.{i}".encode(), 0) for i in range(1, k + 1)])
            case ("slots", count):
                log.set_slots(count)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_replaying_a_logs_journal_rebuilds_it(steps: list[tuple[Any, ...]]) -> None:
    log = GroupLog()
    log.journal = []
    drive(log, steps)
    rebuilt = journal.replay(log.journal)
    assert snapshot(rebuilt) == snapshot(log)


@settings(max_examples=200, deadline=None)
@given(ops, ops)
def test_replay_from_a_base_rebuilds_what_followed_it(
    first: list[tuple[Any, ...]], then: list[tuple[Any, ...]]
) -> None:
    """Segments deleted by retention leave a BASE: once everything below a point is purged
    and forgotten, replaying the BASE and what follows gives the log's retained state."""
    log = GroupLog()
    log.journal = []
    drive(log, first)
    for topic in TOPICS:
        log.purge(topic, log.last_ts)
    log.forget_uuids_upto(max(log.last_ts, log.purged_max))
    assume(journal.purged_and_forgotten(log) >= log.last_ts)  # what retention waits for
    base = journal.base_of(log, log.last_ts + 1)
    log.journal = []
    drive(log, then)
    rebuilt = journal.replay([base, *log.journal])
    got, want = snapshot(rebuilt), snapshot(log)
    assert got == want


def test_a_pub_batch_is_one_append_operation() -> None:
    log = GroupLog()
    log.journal = []
    for i in range(100):
        log.append_new("t", f"u{i}".encode(), None, b"v", None)
    assert [op[0] for op in log.journal] == ["a"] and len(log.journal[0][2]) == 100


def test_a_log_without_a_journal_notes_nothing() -> None:
    log = GroupLog()
    drive(log, [("pub", "a", 3), ("purge", "a", 2), ("epoch",)])
    assert log.journal is None
