"""What purge may remove behind a durable subscription: its stored offset and its shared records."""

from __future__ import annotations

from tritonmq.core.consumers import Consumer, Durable, Mode


def test_a_durable_holds_back_from_the_offset_zookeeper_stored_not_the_one_in_memory() -> None:
    d = Durable("t", "s", Mode.BROADCAST, offset=10, stored=None)
    assert d.hold() == 10  # not registered yet: what it has acknowledged
    d.stored = 7
    assert d.hold() == 7  # acknowledged up to 10, but a new primary resumes from 7
    d.offset = 5  # reset below what is stored
    assert d.hold() == 5


def test_a_shared_low_watermark_is_below_every_record_not_yet_acknowledged() -> None:
    d = Durable("t", "s", Mode.SHARED, offset=10, stored=10)
    assert d.low_watermark() == 10  # nothing handed out: everything up to the offset
    d.cursor = 20
    assert d.low_watermark() == 19
    c = Consumer(object(), 1, "t", d, next_ts=11, acked_ts=10)
    d.inflight[15] = (c, 0.0)
    d.redeliver.append(13)
    assert d.low_watermark() == 12
    d.reserved[12] = "member-a"
    assert d.low_watermark() == 11
    d.gap = (11, 18)
    assert d.low_watermark() == 10
