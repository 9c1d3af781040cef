"""The Spark connector's pure parts: offsets, batch ends, read ranges, uuids. No Spark needed."""

from __future__ import annotations

import pytest

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
    end = advance(off({"g1": 1, "g2": 1}), {"g1": 1000, "g2": 1000}, TOPICS, until={"g1": 10})
    assert end.groups == {"g1": 10, "g2": 1001}


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
    assert commit_points(off({"g1": 21, "g2": 1}), TOPICS) == [("a", 20), ("b", 20)]


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
