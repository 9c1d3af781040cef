"""How far purge may go: committed, released by every subscription, old enough."""

from __future__ import annotations

from tritonmq.core.retention import Retention


def test_with_no_retention_purge_follows_holds_and_commit() -> None:
    r = Retention()
    points = r.purge_points(["a", "b", "c"], {"a": 5, "b": 50}, commit_ts=20, now=0.0)
    assert points == {"a": 5, "b": 20, "c": 20}  # never past the commit point


def test_retention_keeps_records_younger_than_the_window() -> None:
    r = Retention(default_s=10.0, per_topic={"short": 1.0})
    for t, ts in ((0.0, 10), (5.0, 20), (9.0, 30)):
        r.committed(ts, t)
    # At t=12 only what was committed by t=2 is older than 10 s; for "short", by t=11.
    assert r.purge_points(["long", "short"], {}, commit_ts=30, now=12.0) == {
        "long": 10,
        "short": 30,
    }
    assert r.purge_points(["long"], {}, commit_ts=30, now=1.0) == {}


def test_samples_are_coalesced_and_old_ones_dropped() -> None:
    r = Retention(default_s=1.0, dedup_window_s=1.0)
    for i in range(1000):
        r.committed(i, i * 0.001)  # 1 ms apart: mostly coalesced
    assert len(r._times) < 30
    r.committed(5000, 100.0)
    assert r.ts_before(99.9) == r.ts_before(50.0)  # the last sample before the window stays
    assert r.ts_before(100.0) == 5000


def test_forget_point_lags_the_dedup_window() -> None:
    r = Retention(dedup_window_s=60.0)
    r.committed(100, 0.0)
    r.committed(200, 30.0)
    assert r.forget_point(59.0) == 0
    assert r.forget_point(61.0) == 100
    assert r.forget_point(91.0) == 200
