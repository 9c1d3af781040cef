"""The pure part of the Spark connector: offsets, read plans, record uuids. No Spark, no I/O.

A source offset is a JSON-able dict kept in Spark's checkpoint::

    {"subscription": "spark-1f2e...", "groups": {"g1": 1201, "g2": 88}, "topics": ["a", "b"]}

``groups[g]`` is the next ``ts`` to read in group ``g``: every record of the
listed topics with a lower ``ts`` has been handed to Spark (ts are per group,
so one number covers every topic of a group). ``0`` means "from the beginning
of what is retained, nothing needed yet" (``startingPosition=earliest``).
The subscription name travels in the offset, so the name Spark commits to is
the one its checkpoint holds, stable across restarts.

A topic whose slot moved between groups (docs/replication.md M3) also has its era in
``eras`` (absent: 0): the era it was planned in. Its records of that era are the era's
group's ``ts``; a batch planned after the era changed reads the rest of the old era
(up to its seal point ``until``), every later finished era whole, and the current era
from its ``after`` + 1: whatever the group offsets say, since those count other topics
of the group too (:func:`ranges`). A checkpoint without ``eras`` is era 0 everywhere.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Offset:
    subscription: str
    groups: Mapping[str, int]
    topics: tuple[str, ...]
    eras: Mapping[str, int] = field(default_factory=dict)  # topic -> era (absent: 0)

    def as_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "subscription": self.subscription,
            "groups": dict(sorted(self.groups.items())),
            "topics": list(self.topics),
        }
        eras = {t: e for t, e in sorted(self.eras.items()) if e}
        if eras:
            d["eras"] = eras
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Offset:
        try:
            groups = {str(g): int(ts) for g, ts in d["groups"].items()}
            eras = {str(t): int(e) for t, e in d.get("eras", {}).items()}
            topics = tuple(str(t) for t in d["topics"])
            return cls(str(d["subscription"]), groups, topics, eras)
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
    histories: Mapping[str, SlotHistory] | None = None,
) -> Offset:
    """The end offset of the next batch.

    ``heads[g]``: the group's newest committed ts. ``topics``: topic -> group, the
    topics the query reads now (new ones join). ``max_rows`` caps each group's ts
    span so the batch holds at most that many records in all (ts spans count other
    topics of the group too, so it may hold fewer). ``until`` caps every group at the
    head seen when an availableNow query began; a group it does not name (one that
    appeared since, e.g. a slot's new owner) holds nothing of then and is not read.
    ``floors[g]``: the first retained ts
    of a group still at 0, where a capped span starts. ``histories``: the slot history
    of each topic whose slot moved; the offset records each one's era now.
    """
    groups = dict(start.groups)
    for g in set(topics.values()):
        groups.setdefault(g, 0)
    targets = {}
    for g in sorted(groups):
        if g not in heads:
            continue
        target = heads[g] + 1
        if until is not None:
            target = min(target, until.get(g, 1))
        if target > max(groups[g], 1):
            targets[g] = target
    share = None if max_rows is None else max(1, max_rows // max(1, len(targets)))
    for g, target in targets.items():
        lo = groups[g] if groups[g] else (floors or {}).get(g, 0)
        groups[g] = target if share is None else min(target, max(lo, 1) + share)
    names = tuple(sorted(set(start.topics) | set(topics)))
    eras = dict(start.eras)
    eras.update({t: h.era for t, h in (histories or {}).items() if t in names})
    return Offset(start.subscription, groups, names, eras)


def ranges(
    start: Offset,
    end: Offset,
    topics: Mapping[str, str],
    min_partitions: int = 1,
    first_retained: Mapping[str, int] | None = None,
    histories: Mapping[str, SlotHistory] | None = None,
) -> list[Range]:
    """Split the batch ``start..end`` into per-topic ts ranges for parallel tasks.

    Each topic of ``end`` reads ``[start[g], end[g])`` of its group; a topic new in
    ``end`` reads from 0 (records published before the query found it). Ranges are
    cut so there are about ``min_partitions`` of them, in proportion to their span;
    ``first_retained[topic]`` (when known) moves a from-the-beginning start up to the
    first retained ts so empty spans are not split. A topic in ``histories`` whose era
    is not 0 is read by its eras (see the module docstring).
    """
    spans: list[Range] = []
    for topic in end.topics:
        h = (histories or {}).get(topic)
        if h is not None and (end.eras.get(topic, 0) or start.eras.get(topic, 0)):
            spans.extend(_era_spans(start, end, topic, h))
            continue
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


def _era_spans(start: Offset, end: Offset, topic: str, h: SlotHistory) -> list[Range]:
    """``topic``'s reads in the batch ``start..end`` by era: from the era it was planned
    in at ``start`` (a topic new to the query: from era 0) to its era at ``end``."""
    new = topic not in start.topics
    first, last = (0 if new else start.eras.get(topic, 0)), end.eras.get(topic, 0)
    out: list[Range] = []
    for e in range(first, last + 1):
        g = h.group_of_era(e)
        lo = h.after_of(e) + 1
        if e == first and not new:
            lo = max(lo, start.groups.get(g, 0))  # read up to there already
        hi = end.groups.get(g, 0) - 1 if e == last else h.history[e].until
        if e == last and e < h.era:
            hi = min(hi, h.history[e].until)  # the era ended since it was planned
        if hi >= lo:
            out.append(Range(g, topic, lo, hi, not new))
    return out


def commit_points(
    end: Offset,
    topics: Mapping[str, str],
    histories: Mapping[str, SlotHistory] | None = None,
) -> list[tuple[str, int, str]]:
    """(topic, ts, group) to acknowledge the query's subscription at once ``end`` is
    processed, each named by the group whose ts it is (the owner may change before the
    commit reaches it: a ts sent without its group would be read in the new owner's ts;
    the commit names it, docs/protocol.md ``commit``). A topic in ``histories`` (its slot moved) is
    acknowledged at every group that held an era of it up to the one ``end`` was planned
    in, each in its own ts: an earlier era to its seal point, that era to the batch's end.
    The subscription is stored at one era, and only that era's group writes its offset and
    hands it on (docs/replication.md M5), so each group gets the query's position in its
    ts; one holding several eras, the furthest (it acknowledges the one it serves, up to
    that era's seal point). Older eras first: the group of the stored era hands it on."""
    out: list[tuple[str, int, str]] = []
    for t in end.topics:
        h = (histories or {}).get(t)
        if h is not None:  # by era even if planned in era 0: the owner may have changed
            last = min(end.eras.get(t, 0), h.era)
            out.extend((t, ts, g) for g, ts in _era_points(end, h, last).items())
            continue
        g = topics.get(t)
        if g is not None and g in end.groups and end.groups[g] > 1:
            out.append((t, end.groups[g] - 1, g))
    return out


def _era_points(end: Offset, h: SlotHistory, last: int) -> dict[str, int]:
    """Per group (in the order of their first era), the ts the query has read to of a
    moved topic whose batch ``end`` was planned in era ``last``."""
    points: dict[str, int] = {}
    for e in range(last + 1):
        g = h.group_of_era(e)
        after, until = h.after_of(e), (h.history[e].until if e < h.era else None)
        if e < last:
            ts = until
        elif g in end.groups:
            ts = end.groups[g] - 1 if until is None else min(end.groups[g] - 1, until)
        else:
            continue
        if ts is not None and ts > after:
            points[g] = max(points.get(g, ts), ts)
    return points


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


def start_offset(
    subscription: str,
    start: Mapping[str, int],
    topics: Iterable[str],
    histories: Mapping[str, SlotHistory],
    every_era: bool,
    first_eras: Mapping[str, int] | None = None,
) -> Offset:
    """Where a read begins. ``start``: per group (a group's ts cover all its eras). With
    ``every_era`` (``earliest``) a moved topic is read from its first era; otherwise from
    its current era (a ``latest`` or given position: the older eras lie before it, and
    reading them from era 0 handed a new query records published before it began), or
    from ``first_eras[topic]`` (a time: the first era holding a record at or after it,
    read from ``start`` of its group)."""
    eras = {} if every_era else {t: h.era for t, h in histories.items()}
    eras.update({t: e for t, e in (first_eras or {}).items() if t in eras and e < eras[t]})
    return Offset(subscription, dict(start), tuple(sorted(topics)), eras)


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
