"""The shared-subscription state a primary replicates: ranges of a topic's records."""

from __future__ import annotations

from tritonmq.core.actions import Deliver
from tritonmq.core.consumers import Consumer, Durable, Mode
from tritonmq.core.log import GroupLog
from tritonmq.core.shared import SharedGate, SharedMirror, expand, range_minus, ranges_of
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
    assert m.due(1, (one,), [10]) == SharedState(1, (one,), 1)
    assert m.due(1, (one,), [10]) is None, "nothing changed"
    assert m.due(1, (one,), [10, 11]) == SharedState(1, (one,), 2), "a new backup gets it all"
    assert m.due(1, (), [10]) is None


def test_ranges_of_a_long_run_of_neighbours_is_one_range() -> None:
    log = log_of("t" * 5000)
    assert ranges_of(log.topics["t"], range(10, 4001)) == ((10, 4000),)
    assert ranges_of(log.topics["t"], [*range(10, 20), *range(30, 40)]) == ((10, 19), (30, 39))


def _member(conn: str, d: Durable, *held: int) -> Consumer:
    c = Consumer(conn, 1, d.topic, d, 1, 0)
    for ts in held:
        d.inflight[ts] = (c, 30.0)
    return c


def test_the_gate_releases_a_frame_once_every_backup_has_it_or_a_later_one() -> None:
    d = Durable("t", "work", Mode.SHARED, 0, 0)
    m1, m2 = _member("m1", d, 1, 2), _member("m2", d, 3)
    consumers = {(id(c.conn), c.sid): c for c in (m1, m2)}
    recs = {ts: (ts, b"u", None, b"v", None) for ts in (1, 2, 3)}
    gate = SharedGate()
    gate.waiting.append((m1, Deliver("m1", 1, "t", [recs[1], recs[2]])))
    gate.framed(4)
    gate.waiting.append((m2, Deliver("m2", 1, "t", [recs[3]])))
    gate.framed(5)
    assert gate.confirmed(["b", "c"], 5) == 0, "nobody answered"
    gate.acked_by("b", 5)
    gate.acked_by("c", 4)
    gate.acked_by("c", 3)  # an older answer arriving late changes nothing
    assert gate.confirmed(["b", "c"], 5) == 4
    assert gate.release(4, consumers) == [Deliver("m1", 1, "t", [recs[1], recs[2]])]
    assert gate.release(4, consumers) == [], "sent once"
    assert gate.confirmed([], 5) == 5, "no backup to wait for: the last frame sent"
    assert gate.release(5, consumers) == [Deliver("m2", 1, "t", [recs[3]])]


def test_the_gate_sends_nothing_a_member_left_or_no_longer_holds() -> None:
    d = Durable("t", "work", Mode.SHARED, 0, 0)
    m1, m2 = _member("m1", d, 1, 2), _member("m2", d, 3)
    recs = {ts: (ts, b"u", None, b"v", None) for ts in (1, 2, 3)}
    gate = SharedGate()
    gate.waiting.append((m1, Deliver("m1", 1, "t", [recs[1], recs[2]])))
    gate.waiting.append((m2, Deliver("m2", 1, "t", [recs[3]])))
    gate.framed(1)
    del d.inflight[2]  # timed out while it waited, say: handed to someone else later
    consumers = {(id(m1.conn), m1.sid): m1}  # m2 left
    assert gate.release(1, consumers) == [Deliver("m1", 1, "t", [recs[1]])]
    gate.clear()
    assert not (gate.waiting or gate.pending or gate.acked)
