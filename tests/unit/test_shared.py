"""The shared-subscription state a primary replicates: ranges of a topic's records."""

from __future__ import annotations

from tritonmq.core.log import GroupLog
from tritonmq.core.shared import SharedMirror, expand, range_minus, ranges_of
from tritonmq.wire.frames import SharedState, SharedSub


def log_of(topics: str) -> GroupLog:
    log = GroupLog()
    for i, t in enumerate(topics, 1):
        log.append_new(t, b"u%d" % i, None, b"v", None)
    return log


def test_neighbours_in_a_topic_merge_across_other_topics_records() -> None:
    log = log_of("txtxtt")  # t at 1, 3, 5, 6
    t = log.topics["t"]
    assert ranges_of(t, [1, 3, 6]) == ((1, 3), (6, 6)), "5 lies between 3 and 6"
    assert ranges_of(t, [1, 3, 5, 6]) == ((1, 6),)
    assert expand(t, ((1, 6),), upto=5) == [1, 3, 5]
    assert expand(t, ((2, 2), (4, 4)), upto=9) == [], "ts of another topic name nothing"
    assert expand(None, ((1, 6),), upto=9) == []


def test_a_range_minus_some_ts_is_what_is_left_of_it() -> None:
    assert range_minus(5, 10, [3, 5, 7, 8, 12]) == ((6, 6), (9, 10))
    assert range_minus(5, 4, [5]) == ()


def test_the_mirror_keeps_the_latest_per_subscription_and_the_primary_sends_changes_only() -> None:
    one = SharedSub("t", "s", 0, 5, (("m", ((1, 2),)),), (), (), ("m",))
    two = SharedSub("t", "s", 2, 5, (), (), (), ("m",))
    m = SharedMirror()
    m.adopt(SharedState(1, (one,)))
    m.adopt(SharedState(1, (two,)))
    assert m.subs == {("t", "s"): two}
    assert m.due(1, (one,), [10]) == SharedState(1, (one,))
    assert m.due(1, (one,), [10]) is None, "nothing changed"
    assert m.due(1, (one,), [10, 11]) == SharedState(1, (one,)), "a new backup gets it all"
    assert m.due(1, (), [10]) is None
