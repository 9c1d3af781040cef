"""The group log: every accepted record of a broker group, in ``ts`` order.

``ts`` is dense within one log (entry ``i`` has ``ts == base_ts + i``), which is
what makes "logs are prefixes" checkable with one comparison. Each topic keeps
its own list of the same record tuples for delivery, and a uuid table makes
producer retries idempotent. ``epochs`` records at which ``ts`` each epoch's
primary started writing; two logs agree up to the point their epoch histories
say they do (see :func:`divergence`).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from itertools import islice
from typing import Any

from tritonmq.core.slots import slot_of
from tritonmq.errors import LogGap
from tritonmq.wire.frames import Entry, PubRecord, Record


def _ts_of(rec: Record) -> int:
    return rec[0]


def _first(pair: tuple[int, int]) -> int:
    return pair[0]


RECORD_OVERHEAD = 32  # ts, uuid and framing, roughly, on the wire


# What a retained record costs in memory beyond the bytes of its value, key and headers:
# the record and entry tuples, its ts int and uuid bytes (16 bytes), its slots in the
# group's and the topic's lists with their two cumulative-size ints, and its dedup-table
# entry. tracemalloc counts ~334 bytes of objects; a broker's RSS grows ~395 bytes per
# empty record (allocator and list/dict over-allocation included: docs/security.md).
# ``max_bytes`` counts this, so that it bounds what the process really grows by.
RECORD_MEMORY = 360
BYTES_OBJECT = 33  # a non-empty bytes object's own header (an empty value is shared)
HEADERS_MEMORY = 150  # a small dict (estimated, not measured per size)
HEADER_MEMORY = 60  # one header's entry and its key and value objects (estimated)


def memory_size(rec: Record, size: int) -> int:
    """What ``rec`` (of wire size ``size``) costs retained in the log: what ``max_bytes``
    counts."""
    mem = size + RECORD_MEMORY
    if rec[3]:
        mem += BYTES_OBJECT
    if rec[2] is not None:
        mem += BYTES_OBJECT
    h = rec[4]
    if h:
        mem += HEADERS_MEMORY + HEADER_MEMORY * len(h)
    return mem


def pub_memory(records: Sequence[PubRecord]) -> int:
    """What a ``pub`` batch's records will cost once appended (see :func:`memory_size`)."""
    total = 0
    for uuid, key, value, headers in records:
        rec: Record = (0, uuid, key, value, headers)
        total += memory_size(rec, record_size(rec))
    return total


def record_size(rec: Record) -> int:
    """Bytes a record costs on the wire, near enough for windows and frame limits."""
    size = len(rec[3]) + RECORD_OVERHEAD
    if rec[2] is not None:
        size += len(rec[2])
    h = rec[4]
    if h:
        for k, v in h.items():
            size += len(k) + (len(v) if isinstance(v, str | bytes) else 8)
    return size


class TopicLog:
    """Retained records of one topic, ascending by ``ts`` (not dense: other topics interleave).

    ``cum[i]`` is the size of every record up to ``records[i]`` since the topic began
    (``cum0`` covers those already purged), so the bytes of any range is one
    subtraction and a byte limit is one bisect.
    """

    __slots__ = ("records", "cum", "cum0", "last_purged", "subscribers")

    def __init__(self, last_purged: int = 0) -> None:
        self.records: list[Record] = []
        self.cum: list[int] = []
        self.cum0 = 0
        self.last_purged = (
            last_purged  # ts of the newest record purged: a reader before it missed some
        )
        self.subscribers = 0  # consumers attached (Delivery): a topic is freed only without any

    @property
    def bytes(self) -> int:
        return self.cum[-1] - self.cum0 if self.cum else 0

    def add(self, rec: Record, size: int) -> None:
        self.records.append(rec)
        self.cum.append((self.cum[-1] if self.cum else self.cum0) + size)

    def pop(self) -> None:
        self.records.pop()
        self.cum.pop()

    def purge_upto(self, ts: int) -> list[Record]:
        """Remove and return the records with ``ts <= ts``."""
        j = bisect_left(self.records, ts + 1, key=_ts_of)
        if j == 0:
            return []
        gone = self.records[:j]
        self.last_purged = max(self.last_purged, gone[-1][0])
        self.cum0 = self.cum[j - 1]
        del self.records[:j]
        del self.cum[:j]
        return gone

    def index_of(self, ts: int) -> int:
        """Position of the first record with ``ts >= ts``."""
        return bisect_left(self.records, ts, key=_ts_of)

    def bytes_in(self, i: int, j: int) -> int:
        """Size of ``records[i:j]``."""
        if j <= i:
            return 0
        return self.cum[j - 1] - (self.cum[i - 1] if i > 0 else self.cum0)

    def between(
        self, start: int, end: int, limit: int, max_bytes: int | None = None
    ) -> list[Record]:
        """Records with ``start <= ts <= end``: at most ``limit`` of them and (but for the
        first) at most ``max_bytes`` bytes."""
        recs = self.records
        i = bisect_left(recs, start, key=_ts_of)
        j = min(i + limit, len(recs))
        if j > i and recs[j - 1][0] > end:
            j = bisect_left(recs, end + 1, i, j, key=_ts_of)
        if max_bytes is not None and j > i + 1 and self.bytes_in(i, j) > max_bytes:
            base = self.cum[i - 1] if i > 0 else self.cum0
            j = max(i + 1, bisect_right(self.cum, base + max_bytes, i, j))
        return recs[i:j]

    def first_ts(self) -> int | None:
        return self.records[0][0] if self.records else None


COMPACT_AT = 4096  # purged placeholders at the head of the group log before it is shifted
UNKNOWN_SLOT = -1  # purged uuids of records purged while the log's slot count was unknown


class GroupLog:
    """Entries are dense by ``ts``; a purged record leaves a ``None`` placeholder so that
    indexing stays one subtraction, and runs of placeholders at the head are dropped.
    Purged records' uuids stay in the dedup table until :meth:`forget_uuids_upto`.

    A topic with no records and no subscribers is dropped from ``topics`` (a flood of
    distinct topics must not cost memory for good); what it had purged is remembered in
    ``freed`` until the dedup window forgets it, so a reader resuming there is still told
    PURGED. ``bytes`` is what the records cost in memory (:func:`memory_size`)."""

    __slots__ = (
        "base_ts",
        "entries",
        "cum",
        "cum0",
        "topics",
        "freed",
        "freed_order",
        "uuids",
        "purged_by_slot",
        "run_starts",
        "popped",
        "purged_count",
        "purged_max",
        "slots",
        "epochs",
        "bytes",
        "published",
        "_head",
        "_deleted",
        "records",
        "cuts",
        "journal",
    )

    def __init__(self, base_ts: int = 1) -> None:
        self.base_ts = base_ts
        self.entries: list[Entry | None] = []
        self.cum: list[int] = []  # cum[i]: size of everything up to entries[i]
        self.cum0 = 0
        self.topics: dict[str, TopicLog] = {}
        self.freed: dict[str, int] = {}  # dropped topic -> the last ts it purged
        self.freed_order: list[tuple[int, str]] = []  # heap of (last purged ts, topic)
        self.uuids: dict[bytes, int] = {}
        # (ts, uuid) of purged records still in the dedup table, per slot: a move hands over
        # its slot's without walking the whole table (replication.md M2.3). Kept per slot
        # once ``slots`` is known (the cluster's slot count, set when the map is read;
        # before it: UNKNOWN_SLOT, which every handover carries).
        self.purged_by_slot: dict[int, deque[tuple[int, bytes]]] = {}
        # Each purge appends one topic's records in ts order, but a slot's topics purge in
        # turn: per slot, where (counted since the deque began) a run out of order begins,
        # and how many pairs were forgotten from its left. A handover merges the runs
        # (:meth:`purged_runs`): sorting a hot slot's 2,000,000 took up to 0.9 s.
        self.run_starts: dict[int, deque[int]] = {}
        self.popped: dict[int, int] = {}
        self.purged_count = 0
        # at or above every ts in purged_by_slot: a follower caught up past it lacks none
        # of them, and is not walked through millions to find that out
        self.purged_max = 0
        self.slots = 0
        self.epochs: list[tuple[int, int]] = []
        self.bytes = 0  # what the retained records cost in memory
        self.records = 0  # retained records (meta answers it without walking every topic)
        # (first ts of a batch, wall-clock ms at which the primary accepted it), ascending:
        # recorded once per batch by the primary and replicated, so every replica agrees.
        self.published: list[tuple[int, int]] = []
        self._head = 0  # entries before it are purged placeholders (see _compact)
        # per topic, how many of its records truncations took: what reads a topic's new
        # records from the last ts it saw knows whether that ts still holds what it saw
        self.cuts: dict[str, int] = {}
        self._deleted = 0  # keys deleted from uuids, topics, freed since they were rebuilt
        # every change, as operations that rebuild the log (core/journal.py); None: kept in
        # memory only, nothing noted
        self.journal: list[tuple[Any, ...]] | None = None

    @property
    def last_ts(self) -> int:
        return self.base_ts + len(self.entries) - 1

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def purged_through(self) -> int:
        """Every entry up to this ts is purged (or was never held here)."""
        return self.base_ts + self._head - 1

    def topic(self, name: str) -> TopicLog:
        t = self.topics.get(name)
        if t is None:
            t = self.topics[name] = TopicLog(self.freed.pop(name, 0))
        return t

    def last_purged(self, topic: str) -> int:
        """The newest ``ts`` of ``topic`` purged (0: none, or forgotten)."""
        t = self.topics.get(topic)
        return t.last_purged if t is not None else self.freed.get(topic, 0)

    def purge_points(self) -> tuple[tuple[str, int], ...]:
        """(topic, newest ts purged) of every topic that had a record purged."""
        got = {t: tl.last_purged for t, tl in self.topics.items() if tl.last_purged}
        return tuple(sorted({**self.freed, **got}.items()))

    def free_if_unused(self, topic: str) -> None:
        """Drop ``topic`` if it holds no records and has no subscribers."""
        t = self.topics.get(topic)
        if t is None or t.records or t.subscribers > 0:
            return
        del self.topics[topic]
        self._deleted += 1
        if t.last_purged:
            self.freed[topic] = t.last_purged
            heapq.heappush(self.freed_order, (t.last_purged, topic))

    def set_slots(self, n: int) -> None:
        """The cluster's slot count: purged uuids are kept per slot from now on."""
        if n != self.slots:
            self.slots = n
            if self.journal is not None:
                self.journal.append(("s", n))

    def begin_epoch(self, epoch: int, start_ts: int) -> None:
        """A primary starts writing ``epoch`` at ``start_ts`` (== last_ts + 1).

        Beginning the epoch the log last began, at the same start and with nothing written
        since, changes nothing: a primary that stepped down on a stale view and is named
        again by ZooKeeper goes on leading it (found by the simulator on a variant branch).
        """
        if self.epochs and self.epochs[-1] == (epoch, start_ts) and start_ts == self.last_ts + 1:
            return
        if self.epochs and self.epochs[-1][0] >= epoch:
            raise ValueError(f"epoch {epoch} does not follow {self.epochs[-1][0]}")
        if start_ts != self.last_ts + 1:
            raise ValueError(f"epoch start {start_ts} is not log end + 1 ({self.last_ts + 1})")
        # Epochs adopted from a primary whose entries never arrived describe nothing we hold.
        self.epochs = [e for e in self.epochs if e[1] <= start_ts]
        self.epochs.append((epoch, start_ts))
        if self.journal is not None:
            self.journal.append(("e", epoch, start_ts))

    def lookup(self, uuid: bytes) -> int | None:
        return self.uuids.get(uuid)

    def append_new(
        self,
        topic: str,
        uuid: bytes,
        key: bytes | None,
        value: bytes,
        headers: dict[str, Any] | None,
    ) -> int:
        """Stamp and append a record the primary accepted; returns its ``ts``."""
        ts = self.base_ts + len(self.entries)
        rec: Record = (ts, uuid, key, value, headers)
        self.entries.append((topic, rec))
        t = self.topics.get(topic)
        if t is None:
            t = self.topic(topic)
        size = record_size(rec)
        t.add(rec, size)
        self.cum.append((self.cum[-1] if self.cum else self.cum0) + size)
        self.bytes += memory_size(rec, size)
        self.records += 1
        self.uuids[uuid] = ts
        j = self.journal
        if j is not None:  # one operation per batch: the records of a pub come in a row
            last = j[-1] if j else None
            if last is not None and last[0] == "a" and last[1] + len(last[2]) == ts:
                last[2].append((topic, rec))
            else:
                j.append(("a", ts, [(topic, rec)]))
        return ts

    def append_replicated(self, start: int, entries: Sequence[Entry | None]) -> None:
        """Append entries streamed by the primary from ``start``, which must be ``last_ts + 1``."""
        if not entries:
            return
        expect = self.base_ts + len(self.entries)
        if start != expect:
            raise LogGap(f"append at ts {start}, expected {expect}")
        for i, e in enumerate(entries):  # check all before changing anything
            if e is not None and e[1][0] != start + i:
                raise LogGap(f"entry {i} of an append at {start} has ts {e[1][0]}")
        topics = self.topics
        uuids = self.uuids
        cum = self.cum
        total = cum[-1] if cum else self.cum0
        for e in entries:
            if e is not None:
                topic, rec = e
                t = topics.get(topic)
                if t is None:
                    t = self.topic(topic)
                size = record_size(rec)
                t.add(rec, size)
                total += size
                self.bytes += memory_size(rec, size)
                self.records += 1
                uuids[rec[1]] = rec[0]
            cum.append(total)
        self.entries.extend(entries)
        if self.journal is not None:
            self.journal.append(("a", start, list(entries)))

    def mark_published(self, first_ts: int, wall_ms: int) -> None:
        """Records from ``first_ts`` on were accepted at ``wall_ms`` (never earlier than the last)."""
        pub = self.published
        if pub and pub[-1][0] >= first_ts:
            return
        pub.append((first_ts, max(wall_ms, pub[-1][1]) if pub else wall_ms))
        if self.journal is not None:
            self.journal.append(("p", first_ts, wall_ms))

    def adopt_published(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Take the primary's ``(first_ts, ms)`` pairs for entries we now hold."""
        for first_ts, ms in pairs:
            self.mark_published(first_ts, ms)

    def published_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """The pairs that say when records ``start..end`` were accepted (the one covering
        ``start`` included)."""
        pub = self.published
        i = max(0, bisect_right(pub, start, key=_first) - 1)
        j = bisect_right(pub, end, key=_first)
        return pub[i:j]

    def published_at(self, ts: int) -> int | None:
        """Wall-clock ms at which the record ``ts`` was accepted (None: not known here)."""
        i = bisect_right(self.published, ts, key=_first) - 1
        return self.published[i][1] if i >= 0 else None

    def _trim_published(self) -> None:
        """Forget pairs that only describe records before ``base_ts``."""
        i = bisect_right(self.published, self.base_ts, key=_first) - 1
        if i > 0:
            del self.published[:i]

    def entries_between(self, start: int, end: int) -> list[Entry | None]:
        """Entries with ``start <= ts <= end`` (clamped to what the log holds)."""
        i = max(0, start - self.base_ts)
        j = max(i, min(len(self.entries), end - self.base_ts + 1))
        return self.entries[i:j]

    def end_within(self, start: int, end: int, max_bytes: int) -> int:
        """The last ``ts <= end`` such that ``start..ts`` fits in ``max_bytes`` (at least ``start``)."""
        i = max(0, start - self.base_ts)
        j = max(i, min(len(self.entries), end - self.base_ts + 1))
        if j > i + 1:
            base = self.cum[i - 1] if i > 0 else self.cum0
            if self.cum[j - 1] - base > max_bytes:
                j = max(i + 1, bisect_right(self.cum, base + max_bytes, i, j))
        return self.base_ts + j - 1

    def truncate_after(self, ts: int) -> int:
        """Drop every entry with ``ts`` greater than ``ts``; returns how many were dropped."""
        keep = max(0, ts - self.base_ts + 1)
        if keep >= len(self.entries):
            return 0
        dropped = self.entries[keep:]
        del self.entries[keep:]
        self._head = min(self._head, keep)
        del self.cum[keep:]
        for e in reversed(dropped):
            if e is None:
                continue
            topic, rec = e
            t = self.topics[topic]
            self.bytes -= memory_size(rec, t.bytes_in(len(t.records) - 1, len(t.records)))
            self.records -= 1
            self.cuts[topic] = self.cuts.get(topic, 0) + 1
            t.pop()
            if not t.records:
                self.free_if_unused(topic)
            if self.uuids.get(rec[1]) == rec[0]:
                del self.uuids[rec[1]]
        self.epochs = [e for e in self.epochs if e[1] <= ts]
        self.published = [p for p in self.published if p[0] <= ts]
        if self.journal is not None:
            self.journal.append(("t", ts))
        return len(dropped)

    def reset_to(self, base_ts: int) -> None:
        """Forget everything: the primary has purged what precedes ``base_ts``."""
        self.base_ts = base_ts
        self.entries = []
        self._head = 0
        self.cum = []
        self.cum0 = 0
        pinned = {t: tl.subscribers for t, tl in self.topics.items() if tl.subscribers}
        self.topics = {}
        for t, n in pinned.items():
            self.topics[t] = TopicLog()
            self.topics[t].subscribers = n
        self.freed = {}
        self.freed_order = []
        self.uuids = {}
        self.purged_by_slot = {}
        self.run_starts = {}
        self.popped = {}
        self.purged_count = 0
        self.purged_max = 0
        self.bytes = 0
        self.records = 0
        self.epochs = [e for e in self.epochs if e[1] < base_ts]
        self.published = []  # the primary's next append carries the pair covering base_ts
        if self.journal is not None:
            self.journal.append(("r", base_ts))

    def purge_as_primary(self, points: Sequence[tuple[str, int]]) -> None:
        """Purge as the primary did; ``points`` are each topic's newest record it purged.
        They are remembered even where we held none of them: a backup that caught up over
        purged entries (``None``) never learned their topics, and elected it would let a
        reader resuming below them skip them silently (S6; simulator scenario
        ``test_a_backup_that_caught_up_over_purged_records_tells_a_resuming_reader_once_elected``)."""
        journal, self.journal = self.journal, None  # one operation, not one per topic
        try:
            self._purge_points(points)
        finally:
            self.journal = journal
        if journal is not None and points:
            journal.append(("U", list(points)))

    def _purge_points(self, points: Sequence[tuple[str, int]]) -> None:
        for topic, ts in points:
            self.purge(topic, ts)
            t = self.topics.get(topic)
            if t is not None:
                t.last_purged = max(t.last_purged, ts)
            elif ts > self.freed.get(topic, 0):
                self.freed[topic] = ts
                heapq.heappush(self.freed_order, (ts, topic))

    def purged_tail(self, topic: str, n: int) -> tuple[int, list[tuple[int, bytes]]]:
        """The slot of ``topic`` and the (ts, uuid) of its ``n`` records purged last (by
        the :meth:`purge` just done: they end their slot's list)."""
        slot = slot_of(topic, self.slots) if self.slots else UNKNOWN_SLOT
        tail = list(islice(reversed(self.purged_by_slot.get(slot, ())), n))
        tail.reverse()
        return slot, tail

    def purge(self, topic: str, upto: int) -> int:
        """Drop ``topic``'s records with ``ts <= upto``; returns how many. Their uuids stay
        in the dedup table (see :meth:`forget_uuids_upto`)."""
        t = self.topics.get(topic)
        if t is None:
            return 0
        gone = t.purge_upto(upto)
        if not gone:
            return 0
        if self.journal is not None:
            self.journal.append(("u", topic, upto))
        slot = slot_of(topic, self.slots) if self.slots else UNKNOWN_SLOT
        purged = self.purged_by_slot.get(slot)
        if purged is None:
            purged = self.purged_by_slot[slot] = deque()
        elif purged and purged[-1][0] > gone[0][0]:
            self._run_starts_here(slot, purged)
        base, entries = self.base_ts, self.entries
        freed = 0
        for rec in gone:
            entries[rec[0] - base] = None
            purged.append((rec[0], rec[1]))
            freed += memory_size(rec, record_size(rec))
        self.purged_count += len(gone)
        self.purged_max = max(self.purged_max, gone[-1][0])
        self.bytes -= freed
        self.records -= len(gone)
        if not t.records:
            self.free_if_unused(topic)
        self._compact()
        return len(gone)

    def _run_starts_here(self, slot: int, purged: deque[tuple[int, bytes]]) -> None:
        """The pairs about to be appended to ``slot``'s deque begin a run out of order."""
        starts = self.run_starts.get(slot)
        if starts is None:
            starts = self.run_starts[slot] = deque()
        starts.append(self.popped.get(slot, 0) + len(purged))

    def purged_runs(self, slot: int) -> list[list[tuple[int, bytes]]]:
        """``slot``'s purged (ts, uuid), copied, as runs each ascending by ts."""
        held = self.purged_by_slot.get(slot)
        if not held:
            return []
        popped = self.popped.get(slot, 0)
        cuts = [0, *(s - popped for s in self.run_starts.get(slot, ())), len(held)]
        it = iter(held)  # one pass, each run copied in C
        return [list(islice(it, b - a)) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]

    def _compact(self) -> None:
        # entries[:head] are known placeholders: each purge scans on from there, not from 0
        # (200,000 one-record topics purged in one cycle scanned ~4096 entries each).
        entries = self.entries
        n = len(entries)
        k = min(self._head, n)
        while k < n and entries[k] is None:
            k += 1
        self._head = k
        if k and (k >= COMPACT_AT or k == n):
            self.cum0 = self.cum[k - 1]
            del entries[:k]
            del self.cum[:k]
            self.base_ts += k
            self._head = 0
            self._trim_published()

    def forget_uuids_upto(self, ts: int) -> None:
        """End deduplication for purged records with ``ts <= ts``."""
        uuids, by_slot = self.uuids, self.purged_by_slot
        due = [s for s, d in by_slot.items() if d[0][0] <= ts]  # O(slots) per purge
        if self.journal is not None and (
            due or (self.freed_order and self.freed_order[0][0] <= ts)
        ):
            self.journal.append(("f", ts))
        for slot in due:
            purged = by_slot[slot]
            before = len(purged)
            while purged and purged[0][0] <= ts:
                old_ts, uuid = purged.popleft()
                self.purged_count -= 1
                if uuids.get(uuid) == old_ts:
                    del uuids[uuid]
                    self._deleted += 1
            if not purged:
                del by_slot[slot]
                self.run_starts.pop(slot, None)
                self.popped.pop(slot, None)
                continue
            popped = self.popped[slot] = self.popped.get(slot, 0) + before - len(purged)
            starts = self.run_starts.get(slot)
            while starts and starts[0] <= popped:  # the run now begins the deque
                starts.popleft()
        order, freed = self.freed_order, self.freed
        while order and order[0][0] <= ts:
            old_ts, topic = heapq.heappop(order)
            if freed.get(topic) == old_ts:
                del freed[topic]
                self._deleted += 1
        if self._deleted > max(1024, len(uuids) + len(self.topics) + len(freed)):
            # A dict keeps its peak size after deletions: rebuilt, a past flood of topics or
            # records stops costing memory (the cost is paid for by the deletions).
            self.uuids, self.topics, self.freed = dict(uuids), dict(self.topics), dict(freed)
            self._deleted = 0

    def adopt_dedup(self, purged: Sequence[tuple[int, bytes, int]]) -> None:
        """Remember uuids of records purged before we saw them (the primary's dedup state),
        each under the slot the primary kept it in."""
        uuids = self.uuids
        fresh: dict[int, list[tuple[int, bytes]]] = {}
        for ts, u, slot in purged:
            if u not in uuids:
                uuids[u] = ts
                fresh.setdefault(slot, []).append((ts, u))
        for slot, pairs in fresh.items():
            pairs.sort()
            held = self.purged_by_slot.get(slot)
            if held is None:
                self.purged_by_slot[slot] = deque(pairs)
            else:
                # pages come in the primary's order, out of ts order where its topics purged
                # out of turn: noted, as a purge does; sorting the whole slot again for each
                # page held a syncing backup's loop 0.46 s a page for a hot slot's 2,000,000
                if held and held[-1] > pairs[0]:
                    self._run_starts_here(slot, held)
                held.extend(pairs)
            self.purged_count += len(pairs)
            self.purged_max = max(self.purged_max, pairs[-1][0])
        if self.journal is not None and fresh:
            self.journal.append(("d", list(purged)))

    def adopt_epochs(self, after_ts: int, primary_epochs: Sequence[tuple[int, int]]) -> None:
        """Keep our history up to ``after_ts`` (where we agree), take the primary's after it."""
        mine = [e for e in self.epochs if e[1] <= after_ts]
        covering = [e for e in primary_epochs if e[1] <= after_ts + 1]
        if covering and covering[-1][1] <= after_ts and (not mine or mine[-1][0] < covering[-1][0]):
            mine.append(covering[-1])
        newest = mine[-1][0] if mine else -1
        self.epochs = mine + [e for e in primary_epochs if e[1] > after_ts and e[0] > newest]
        if self.journal is not None:
            self.journal.append(("E", after_ts, list(primary_epochs)))


def epoch_ends(epochs: Sequence[tuple[int, int]], last_ts: int) -> dict[int, tuple[int, int]]:
    """Map epoch -> (start_ts, end_ts) for a log whose history is ``epochs`` and end ``last_ts``."""
    out: dict[int, tuple[int, int]] = {}
    for i, (epoch, start) in enumerate(epochs):
        # An epoch never covers more than the log holds, whatever the history says comes next.
        end = min(epochs[i + 1][1] - 1, last_ts) if i + 1 < len(epochs) else last_ts
        out[epoch] = (start, end)
    return out


def divergence(
    follower_epochs: Sequence[tuple[int, int]],
    follower_last: int,
    leader_epochs: Sequence[tuple[int, int]],
    leader_last: int,
) -> int:
    """The last ``ts`` on which two logs agree.

    An epoch has one primary and one start ``ts``, so two logs hold the same
    entries wherever they hold the same epoch; and a follower only ever appended
    after agreeing on the prefix. The logs therefore agree up to the furthest
    point that both cover with a common epoch.
    """
    fol = epoch_ends(follower_epochs, follower_last)
    lead = epoch_ends(leader_epochs, leader_last)
    best = 0
    for epoch, (fstart, fend) in fol.items():
        got = lead.get(epoch)
        if got is None or got[0] != fstart:
            continue
        common = min(fend, got[1])
        if common >= fstart - 1:
            best = max(best, common)
    return max(0, min(best, follower_last, leader_last))


def lag_of(log: GroupLog, topic: str, offset: int, commit_ts: int) -> tuple[int, int | None]:
    """Committed records of ``topic`` after ``offset``, and the ts of the first of them."""
    t = log.topics.get(topic)
    if t is None:
        return 0, None
    i = t.index_of(offset + 1)
    j = t.index_of(commit_ts + 1)
    if j <= i:
        return 0, None
    return j - i, t.records[i][0]
