"""The Spark connector's pure parts: offsets, batch ends, read ranges, uuids. No Spark needed."""

from __future__ import annotations

import pytest

from tritonmq.core.slothistory import Era, SlotHistory
from tritonmq.errors import ConfigError
from tritonmq.spark.plan import (
    Offset,
    Range,
    advance,
    commit_points,
    data_loss_message,
    publish_times,
    ranges,
    record_uuid,
    resolve_start,
    start_offset,
)

TOPICS = {"a": "g1", "b": "g1", "c": "g2"}


def off(groups: dict[str, int], topics: tuple[str, ...] = ("a", "b", "c")) -> Offset:
    return Offset("spark-x", groups, topics)


def test_offsets_round_trip_through_json_and_bad_ones_are_refused() -> None:
    o = off({"g2": 5, "g1": 7})
    assert Offset.from_json(o.as_json()) == o
    assert o.as_json() == {
        "subscription": "spark-x",
        "groups": {"g1": 7, "g2": 5},
        "topics": ["a", "b", "c"],
    }
    with pytest.raises(ConfigError, match="not a TritonMQ source offset"):
        Offset.from_json({"groups": {"g1": "x"}})


def test_a_batch_ends_after_each_groups_head_and_keeps_idle_groups() -> None:
    end = advance(off({"g1": 11, "g2": 4}), {"g1": 20, "g2": 3}, TOPICS)
    assert end.groups == {"g1": 21, "g2": 4}
    assert advance(end, {"g1": 20, "g2": 3}, TOPICS) == end  # nothing new: same offset


def test_max_rows_is_shared_between_busy_groups_and_until_caps_available_now() -> None:
    end = advance(off({"g1": 1, "g2": 1}), {"g1": 1000, "g2": 1000}, TOPICS, max_rows=100)
    assert end.groups == {"g1": 51, "g2": 51}
    until = {"g1": 10, "g2": 500}
    end = advance(off({"g1": 1, "g2": 1}), {"g1": 1000, "g2": 1000}, TOPICS, until=until)
    assert end.groups == {"g1": 10, "g2": 500}


def test_available_now_reads_nothing_of_a_group_it_did_not_see_at_its_start() -> None:
    """Topic c's slot moved to g3, a group added after the availableNow query began: every
    record there was published after the start, so the query ends without them (it used
    to cap only the groups it had seen, and read g3 as far as its head went)."""
    now = {"a": "g1", "b": "g1", "c": "g3"}
    end = advance(off({"g1": 1, "g2": 1}), {"g1": 9, "g3": 50}, now, until={"g1": 5, "g2": 3})
    assert end.groups == {"g1": 5, "g2": 1, "g3": 0}


def test_an_earliest_start_with_a_row_limit_counts_from_the_first_retained_ts() -> None:
    end = advance(off({"g1": 0}, ("a",)), {"g1": 5000}, {"a": "g1"}, 100, floors={"g1": 4000})
    assert end.groups == {"g1": 4100}


def test_new_topics_join_and_are_read_from_the_beginning() -> None:
    start = off({"g1": 50}, ("a",))
    end = advance(start, {"g1": 60}, {"a": "g1", "b": "g1"})
    assert end.topics == ("a", "b")
    got = ranges(start, end, {"a": "g1", "b": "g1"})
    assert got == [Range("g1", "a", 50, 60, True), Range("g1", "b", 0, 60, False)]


def test_ranges_split_in_proportion_and_cover_each_span_exactly_once() -> None:
    start, end = off({"g1": 1, "g2": 1}), off({"g1": 1001, "g2": 101})
    got = ranges(start, end, TOPICS, min_partitions=8)
    for topic, hi in (("a", 1000), ("b", 1000), ("c", 100)):
        mine = [r for r in got if r.topic == topic]
        covered = [ts for r in mine for ts in range(r.start, r.end + 1)]
        assert covered == list(range(1, hi + 1))
    assert len([r for r in got if r.topic == "a"]) > len([r for r in got if r.topic == "c"])


def test_an_earliest_range_skips_to_the_first_retained_record_and_is_not_needed() -> None:
    got = ranges(off({"g1": 0}, ("a",)), off({"g1": 101}, ("a",)), {"a": "g1"}, 1, {"a": 90})
    assert got == [Range("g1", "a", 90, 100, False)]


def test_commit_points_acknowledge_up_to_the_last_ts_of_the_batch() -> None:
    assert commit_points(off({"g1": 21, "g2": 1}), TOPICS) == [("a", 20, "g1"), ("b", 20, "g1")]


def test_resolve_start() -> None:
    heads = {"g1": 10, "g2": 0}
    assert resolve_start("earliest", heads, ["g1", "g2"]) == {"g1": 0, "g2": 0}
    assert resolve_start("latest", heads, ["g1", "g2"]) == {"g1": 11, "g2": 1}
    assert resolve_start({"g1": 4}, heads, ["g1", "g2"]) == {"g1": 4, "g2": 0}


def test_record_uuids_are_stable_per_row_and_distinct_across_rows_batches_and_sinks() -> None:
    u = record_uuid("q1", 3, 0, 7)
    assert u == record_uuid("q1", 3, 0, 7) and len(u) == 16
    others = {
        record_uuid(*k)
        for k in [("q1", 3, 0, 8), ("q1", 4, 0, 7), ("q1", 3, 1, 7), ("q2", 3, 0, 7)]
    }
    assert u not in others and len(others) == 4


def test_publish_times_expand_batch_pairs_to_records() -> None:
    assert publish_times([3, 4, 7, 9], [(1, 100), (7, 200)]) == [100, 100, 200, 200]
    assert publish_times([3, 4], [(4, 100)]) == [None, 100]
    assert publish_times([3], []) == [None]


def test_the_data_loss_message_names_topic_group_and_range() -> None:
    msg = data_loss_message(Range("g2", "orders", 40, 90, True), 55)
    assert "'orders'" in msg and "group g2" in msg and "ts 40..55" in msg
    assert "failOnDataLoss=false" in msg


# --- a topic whose slot moves between groups (docs/replication.md M3) ---------------------------

# topic "a": era 0 in g1 (ts <= 40), era 1 in g2 (sealed at 30), era 2 back in g1 (ts > 40)
MOVED = SlotHistory("g1", 2, (Era("g1", 0, 0, 40), Era("g2", 1, 0, 30)))


def test_an_offset_keeps_the_era_of_a_moved_topic_and_reads_without_it_as_era_0() -> None:
    o = Offset("spark-x", {"g1": 5}, ("a", "b"), {"a": 2, "b": 0})
    assert o.as_json()["eras"] == {"a": 2}, "era 0 is not written"
    assert Offset.from_json(o.as_json()) == Offset("spark-x", {"g1": 5}, ("a", "b"), {"a": 2})
    assert Offset.from_json(off({"g1": 1}).as_json()).eras == {}
    end = advance(off({"g1": 11, "g2": 4}), {"g1": 20, "g2": 9}, TOPICS, histories={"a": MOVED})
    assert end.eras == {"a": 2}


def test_a_batch_after_moves_reads_the_old_remainder_every_later_era_then_the_new_one() -> None:
    """Planned in era 0 with g1 read up to ts 35; two moves later: g1's era-0 records 35..40,
    g2's era 1 whole (1..30: g2's offset, 50, counts its other topics and is no guide), then
    g1's era 2 from its start (41) to the batch's end. Nothing twice, nothing missed."""
    start = Offset("spark-x", {"g1": 35, "g2": 50}, ("a", "c"))
    end = Offset("spark-x", {"g1": 61, "g2": 70}, ("a", "c"), {"a": 2})
    got = ranges(start, end, TOPICS, histories={"a": MOVED})
    assert [r for r in got if r.topic == "a"] == [
        Range("g1", "a", 35, 40, True),
        Range("g2", "a", 1, 30, True),
        Range("g1", "a", 41, 60, True),
    ]
    assert [r for r in got if r.topic == "c"] == [Range("g2", "c", 50, 69, True)]
    # the next batch of the same era reads on from the group offset only
    later = Offset("spark-x", {"g1": 80, "g2": 75}, ("a", "c"), {"a": 2})
    assert [r for r in ranges(end, later, TOPICS, histories={"a": MOVED}) if r.topic == "a"] == [
        Range("g1", "a", 61, 79, True)
    ]


def test_an_era_that_ended_after_it_was_planned_is_read_to_its_seal_point_only() -> None:
    """Planned in era 1 (g2) with g2's end at 31 (its head then); the slot has moved on since
    (a replay of the batch reads the history as it is now): g2's range stops at the seal."""
    start = Offset("spark-x", {"g2": 20}, ("a",), {"a": 1})
    end = Offset("spark-x", {"g2": 36}, ("a",), {"a": 1})
    assert ranges(start, end, TOPICS, histories={"a": MOVED}) == [Range("g2", "a", 20, 30, True)]


def test_a_query_started_at_latest_on_a_moved_topic_reads_no_earlier_era() -> None:
    """Started at latest when topic a is in era 2 (g1's again): its first batch reads g1
    from the start on, not eras 0 and 1, which were published before the query began
    (a streaming query started at era 0 and read them); earliest reads every era."""
    topics = {"a": "g1", "c": "g2"}
    latest = start_offset("spark-x", {"g1": 46, "g2": 31}, topics, {"a": MOVED}, False)
    end = advance(latest, {"g1": 50, "g2": 40}, topics, histories={"a": MOVED})
    got = ranges(latest, end, topics, histories={"a": MOVED})
    assert got == [Range("g1", "a", 46, 50, True), Range("g2", "c", 31, 40, True)]
    assert commit_points(latest, topics, {"a": MOVED})[:2] == [("a", 45, "g1"), ("a", 30, "g2")]
    earliest = start_offset("spark-x", {"g1": 0, "g2": 0}, topics, {"a": MOVED}, True)
    read = ranges(earliest, end, topics, histories={"a": MOVED})
    assert [r.group for r in read if r.topic == "a"] == ["g1", "g2", "g1"]


def test_a_time_start_before_a_move_reads_from_its_first_later_record_in_an_older_era() -> None:
    """Started at a time whose first later record of topic a is g2's ts 12, in era 1: the
    first batch reads era 1 from 12 and era 2 whole, not era 0; what it skips is committed
    at each group in its own ts (a time start read only the current era before)."""
    topics = {"a": "g1", "c": "g2"}
    start = start_offset("spark-x", {"g1": 46, "g2": 12}, topics, {"a": MOVED}, False, {"a": 1})
    end = advance(start, {"g1": 50, "g2": 40}, topics, histories={"a": MOVED})
    assert [
        (r.group, r.topic, r.start, r.end)
        for r in ranges(start, end, topics, 1, None, {"a": MOVED})
    ] == [
        ("g2", "a", 12, 30),
        ("g1", "a", 41, 50),
        ("g2", "c", 12, 40),
    ]
    assert commit_points(start, topics, {"a": MOVED})[:2] == [("a", 40, "g1"), ("a", 11, "g2")]
    # a first era not older than the current one changes nothing
    same = start_offset("spark-x", {"g1": 46, "g2": 12}, topics, {"a": MOVED}, False, {"a": 2})
    assert same.eras == {"a": 2}


def test_a_moved_topic_new_to_the_query_reads_every_era_and_needs_none() -> None:
    start = Offset("spark-x", {"g1": 50}, ())
    end = Offset("spark-x", {"g1": 46, "g2": 31}, ("a",), {"a": 2})
    assert ranges(start, end, TOPICS, histories={"a": MOVED}) == [
        Range("g1", "a", 1, 40, False),
        Range("g2", "a", 1, 30, False),
        Range("g1", "a", 41, 45, False),
    ]


def test_a_moved_topic_is_committed_at_every_group_that_held_an_era_in_its_own_ts() -> None:
    """Planned in era 2: g1's era 0 was read to its seal point (40) and its era 2 to the
    batch's end (60), g2's era 1 whole (30): g1 gets 60 (it acknowledges the era it serves,
    up to that era's seal point), g2 gets 30; older eras' groups first."""
    end = Offset("spark-x", {"g1": 61, "g2": 70}, ("a", "c"), {"a": 2})
    assert commit_points(end, TOPICS, {"a": MOVED}) == [
        ("a", 60, "g1"),
        ("a", 30, "g2"),
        ("c", 69, "g2"),
    ]


def test_a_moved_topic_planned_in_an_earlier_era_is_committed_within_it() -> None:
    """Planned in era 1 (g2, its end at 36): the era has ended since (sealed at 30), so g2
    gets 30; g1's era 0 gets its seal point; nothing of era 2 was read."""
    end = Offset("spark-x", {"g2": 37}, ("a",), {"a": 1})
    assert commit_points(end, TOPICS, {"a": MOVED}) == [("a", 40, "g1"), ("a", 30, "g2")]
    # planned in era 0, before the moves: g1, in era 0, not the owner now with its ts
    now = {"a": "g2"}
    assert commit_points(off({"g1": 21, "g2": 9}, ("a",)), now, {"a": MOVED}) == [("a", 20, "g1")]
