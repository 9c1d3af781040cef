"""The pure part of the Spark connector: offsets, read plans, record uuids. No Spark, no I/O.

A source offset is a JSON-able dict kept in Spark's checkpoint::

    {"subscription": "spark-1f2e...", "groups": {"g1": 1201, "g2": 88}, "topics": ["a", "b"]}

``groups[g]`` is the next ``ts`` to read in group ``g``: every record of the
listed topics with a lower ``ts`` has been handed to Spark (ts are per group,
so one number covers every topic of a group). ``0`` means "from the beginning
of what is retained, nothing needed yet" (``startingPosition=earliest``).
The subscription name travels in the offset, so the name Spark commits to is
the one its checkpoint holds, stable across restarts.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonmq.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Offset:
    subscription: str
    groups: Mapping[str, int]
    topics: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "subscription": self.subscription,
            "groups": dict(sorted(self.groups.items())),
            "topics": list(self.topics),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Offset:
        try:
            groups = {str(g): int(ts) for g, ts in d["groups"].items()}
            return cls(str(d["subscription"]), groups, tuple(str(t) for t in d["topics"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"not a TritonMQ source offset: {d!r} ({e})") from None


@dataclass(frozen=True, slots=True)
class Range:
    """One Spark task's read: ``topic``'s records with ``start <= ts <= end`` in ``group``.

    ``needed``: every record of the range must still be there (the checkpoint needs it);
    False where nothing before it was promised (a topic new to the query, an earliest start).
    """

    group: str
    topic: str
    start: int
    end: int
    needed: bool


def advance(
    start: Offset,
    heads: Mapping[str, int],
    topics: Mapping[str, str],
    max_rows: int | None = None,
    until: Mapping[str, int] | None = None,
    floors: Mapping[str, int] | None = None,
) -> Offset:
    """The end offset of the next batch.

    ``heads[g]``: the group's newest committed ts. ``topics``: topic -> group, the
    topics the query reads now (new ones join). ``max_rows`` caps each group's ts
    span so the batch holds at most that many records in all (ts spans count other
    topics of the group too, so it may hold fewer). ``until`` caps groups at the
    head seen when an availableNow query began. ``floors[g]``: the first retained ts
    of a group still at 0, where a capped span starts.
    """
    groups = dict(start.groups)
    for g in set(topics.values()):
        groups.setdefault(g, 0)
    targets = {}
    for g in sorted(groups):
        if g not in heads:
            continue
        target = heads[g] + 1
        if until is not None and g in until:
            target = min(target, until[g])
        if target > max(groups[g], 1):
            targets[g] = target
    share = None if max_rows is None else max(1, max_rows // max(1, len(targets)))
    for g, target in targets.items():
        lo = groups[g] if groups[g] else (floors or {}).get(g, 0)
        groups[g] = target if share is None else min(target, max(lo, 1) + share)
    names = tuple(sorted(set(start.topics) | set(topics)))
    return Offset(start.subscription, groups, names)


def ranges(
    start: Offset,
    end: Offset,
    topics: Mapping[str, str],
    min_partitions: int = 1,
    first_retained: Mapping[str, int] | None = None,
) -> list[Range]:
    """Split the batch ``start..end`` into per-topic ts ranges for parallel tasks.

    Each topic of ``end`` reads ``[start[g], end[g])`` of its group; a topic new in
    ``end`` reads from 0 (records published before the query found it). Ranges are
    cut so there are about ``min_partitions`` of them, in proportion to their span;
    ``first_retained[topic]`` (when known) moves a from-the-beginning start up to the
    first retained ts so empty spans are not split.
    """
    spans: list[Range] = []
    for topic in end.topics:
        g = topics.get(topic)
        if g is None or g not in end.groups:
            continue
        new = topic not in start.topics
        lo = 0 if new else start.groups.get(g, 0)
        hi = end.groups[g] - 1
        needed = not new and lo > 0
        if first_retained and not needed and topic in first_retained:
            lo = max(lo, first_retained[topic])
        if hi >= max(lo, 1):
            spans.append(Range(g, topic, lo, hi, needed))
    total = sum(r.end - r.start + 1 for r in spans)
    out: list[Range] = []
    for r in spans:
        span = r.end - r.start + 1
        pieces = max(1, min(span, round(min_partitions * span / total))) if total else 1
        step = -(-span // pieces)
        for lo in range(r.start, r.end + 1, step):
            out.append(Range(r.group, r.topic, lo, min(r.end, lo + step - 1), r.needed))
    return out


def commit_points(end: Offset, topics: Mapping[str, str]) -> list[tuple[str, int]]:
    """(topic, ts) to acknowledge the query's subscription at once ``end`` is processed."""
    out = []
    for t in end.topics:
        g = topics.get(t)
        if g is not None and g in end.groups and end.groups[g] > 1:
            out.append((t, end.groups[g] - 1))
    return out


def data_loss_message(r: Range, purged_to: int) -> str:
    return (
        f"TritonMQ records this query still needs are gone: topic {r.topic!r} in group"
        f" {r.group}, ts {r.start}..{min(purged_to, r.end)}, were purged before they were"
        " read (e.g. the subscription was acknowledged past them by someone else, or"
        " the query was down longer than retention allowed). Set failOnDataLoss=false"
        " to skip them with a warning."
    )


def record_uuid(sink_id: str, batch_id: int | str, partition_id: int, row: int) -> bytes:
    """The uuid of row ``row`` of ``partition_id`` in batch ``batch_id`` of sink ``sink_id``:
    the same on every replay of that batch, so the broker's dedup drops the repeat."""
    key = f"{sink_id}\x00{batch_id}\x00{partition_id}\x00{row}".encode()
    return hashlib.blake2b(key, digest_size=16).digest()


def publish_times(ts: Sequence[int], pairs: Sequence[tuple[int, int]]) -> list[int | None]:
    """Per record (``ts`` ascending): the ms of the ``(first_ts, ms)`` pair that covers it."""
    out: list[int | None] = []
    n = len(ts)
    i = 0
    for k, (first, ms) in enumerate(pairs):
        j = bisect_left(ts, pairs[k + 1][0]) if k + 1 < len(pairs) else n
        lo = bisect_left(ts, first)
        if lo > i:  # records before the first pair: date unknown
            out.extend([None] * (lo - i))
            i = lo
        if j > i:
            out.extend([ms] * (j - i))
            i = j
    out.extend([None] * (n - i))
    return out


def resolve_start(
    position: str | Mapping[str, int], heads: Mapping[str, int], groups: Iterable[str]
) -> dict[str, int]:
    """Per group start for ``earliest`` (0), ``latest`` (head + 1) or an explicit map."""
    if position == "earliest":
        return {g: 0 for g in groups}
    if position == "latest":
        return {g: heads.get(g, 0) + 1 for g in groups}
    assert not isinstance(position, str)
    return {g: int(position.get(g, 0)) for g in groups}
