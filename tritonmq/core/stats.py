"""The ``stats`` admin op (read-only): what a broker holds and serves, for operators.

An operator's tool (``tritonmq topics``, ``subscriptions``, ``top``) joins this with
what ZooKeeper holds (the slot map, group state, stored offsets). The figures only a
broker knows are answered here: records and bytes retained per topic, when the newest
was accepted, the publish rate, connected consumers, and each durable subscription's
offset in memory and lag (records after it, and how long the oldest has waited).

Rates are counted where a primary accepts a batch (:meth:`Rates.published`) and
turned into records per second over the last ``RATE_WINDOW_S`` seconds on ticks, so
they cost nothing per record and hold only topics published to in that window.
Who may ask (the ``admin`` claim) is decided in :mod:`tritonmq.core.auth`.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from tritonmq.core.actions import SendStats
from tritonmq.core.delivery import Delivery
from tritonmq.core.handover import HANDOVER_TOPIC
from tritonmq.core.log import GroupLog, TopicLog, lag_of
from tritonmq.wire.frames import STATS_MAX_ITEMS, Stats, StatsReply, SubStats, TopicStats

RATE_SAMPLE_S = 1.0  # a rate sample closes after this long
RATE_WINDOW_S = 5.0  # rates are averaged over the samples of this long


class Rates:
    """Records accepted per topic, as records per second over the last few seconds."""

    __slots__ = ("counts", "samples", "started")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # the open sample: topic -> records accepted
        self.samples: deque[tuple[float, dict[str, int]]] = deque()  # (seconds, counts)
        self.started: float | None = None  # when the open sample began

    def published(self, topic: str, n: int) -> None:
        """A primary appended ``n`` new records to ``topic`` (duplicates are not counted)."""
        if n > 0:
            self.counts[topic] = self.counts.get(topic, 0) + n

    def tick(self, now: float) -> None:
        if self.started is None:
            self.started = now
            return
        if now - self.started < RATE_SAMPLE_S:
            return
        self.samples.append((now - self.started, self.counts))
        self.counts, self.started = {}, now
        while sum(s for s, _ in self.samples) > RATE_WINDOW_S + RATE_SAMPLE_S / 2:
            self.samples.popleft()

    def clear(self) -> None:
        """Stepped down: what this broker accepted as primary says nothing now."""
        self.counts, self.samples, self.started = {}, deque(), None

    def of(self) -> tuple[float, dict[str, float]]:
        """(records/s of the whole group, records/s per topic) over the closed samples."""
        seconds = sum(s for s, _ in self.samples)
        if seconds <= 0:
            return 0.0, {}
        per: dict[str, int] = {}
        for _, counts in self.samples:
            for t, n in counts.items():
                per[t] = per.get(t, 0) + n
        return (
            round(sum(per.values()) / seconds, 2),
            {t: round(n / seconds, 2) for t, n in per.items()},
        )


def _topic_stats(
    name: str, t: TopicLog | None, log: GroupLog, rate: float, consumers: int
) -> TopicStats:
    recs = t.records if t is not None else []
    last = recs[-1][0] if recs else 0
    return TopicStats(
        name,
        len(recs),
        t.bytes if t is not None else 0,
        recs[0][0] if recs else 0,
        last,
        log.published_at(last) if last else None,
        rate,
        consumers,
    )


def _lag(
    log: GroupLog, topic: str, offset: int, commit_ts: int, wall_ms: int
) -> tuple[int, int | None]:
    """Committed records of ``topic`` after ``offset``, and how long the oldest has waited."""
    n, oldest = lag_of(log, topic, offset, commit_ts)
    if oldest is None:
        return 0, 0
    at = log.published_at(oldest)
    return n, None if at is None else max(0, wall_ms - at)


def answer(
    conn: Any,
    frame: Stats,
    head: dict[str, Any],
    log: GroupLog,
    delivery: Delivery,
    rates: Rates,
    commit_ts: int,
    max_bytes: int,
    wall_ms: int,
) -> SendStats:
    """The ``stats`` answer; ``head``: this broker's ``meta`` fields (group, role, epoch)."""
    group_rate, per_topic = rates.of()
    consumers = {t: len(cs) for t, cs in delivery.by_topic.items()}
    names = [frame.topic] if frame.topic else list({*log.topics, *consumers, *per_topic})
    if HANDOVER_TOPIC in names:  # the broker's own entries (slot moves), no client's topic
        names.remove(HANDOVER_TOPIC)
    top = heapq.nsmallest(
        STATS_MAX_ITEMS,
        names,
        key=lambda n: (-(log.topics[n].bytes if n in log.topics else 0), n),
    )
    topics = tuple(
        _topic_stats(n, log.topics.get(n), log, per_topic.get(n, 0.0), consumers.get(n, 0))
        for n in top
    )
    durables = sorted(
        (d for d in delivery.durables.values() if not frame.topic or d.topic == frame.topic),
        key=lambda d: (d.topic, d.name),
    )
    subs = []
    for d in durables[:STATS_MAX_ITEMS]:
        lag, lag_ms = _lag(log, d.topic, d.offset, commit_ts, wall_ms)
        subs.append(
            SubStats(
                d.topic, d.name, str(d.mode), d.offset, d.stored, lag, lag_ms, len(d.consumers)
            )
        )
    reply = StatsReply(
        frame.id,
        head["group"],
        head["broker"],
        head["role"],
        head["epoch"],
        commit_ts,
        log.records,
        log.bytes,
        max_bytes,
        group_rate,
        wall_ms,
        topics,
        tuple(subs),
        max(0, len(names) - len(topics)),
        max(0, len(durables) - len(subs)),
    )
    return SendStats(conn, reply)
