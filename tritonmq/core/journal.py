"""What changed in a :class:`~tritonmq.core.log.GroupLog`, as operations that rebuild it.

A log whose ``journal`` is a list (a broker with a ``data_dir``) notes every change made
through its public methods, in order, as one tuple per call; the core hands them to the
shell after each event (``WriteLog``), which appends them to the replica's segment files
before it performs any other action of that event, so an acknowledgement sent is of
records already handed to the OS (docs/replication.md D1). :func:`replay` calls the same
methods with the same arguments on a fresh log: the log a broker restarts with is the one
it had, by construction, not by a second implementation of its rules.

Operations are plain tuples, their first item a tag (they are appended once per record on
the primary's hot path):

- ``(APPEND, start_ts, entries)``: entries (``None`` for one purged before we had it)
- ``(PUBLISHED, first_ts, wall_ms)``
- ``(EPOCH, epoch, start_ts)`` and ``(EPOCHS, after_ts, epochs)``
- ``(TRUNCATE, ts)`` and ``(RESET, base_ts)``
- ``(PURGE, topic, upto)``, ``(PURGE_POINTS, points)``, ``(FORGET, ts)``
- ``(DEDUP, triples)``: uuids of records purged before we saw them
- ``(SLOTS, n)``: the cluster's slot count, under which purged uuids are kept
- ``(BASE, next_ts, epochs, points, slots, published)``: what segments deleted by retention
  left (their records purged and their uuids forgotten), replayed first
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tritonmq.core.log import GroupLog

APPEND = "a"
PUBLISHED = "p"
EPOCH = "e"
EPOCHS = "E"
TRUNCATE = "t"
RESET = "r"
PURGE = "u"
PURGE_POINTS = "U"
FORGET = "f"
DEDUP = "d"
SLOTS = "s"
BASE = "b"

Op = tuple[Any, ...]


def replay(ops: Iterable[Op], log: GroupLog | None = None) -> GroupLog:
    """The log the operations describe, applied in order to ``log`` (default: empty)."""
    log = log if log is not None else GroupLog()
    journal, log.journal = log.journal, None  # replaying is not a change to note again
    try:
        for op in ops:
            apply(log, op)
    finally:
        log.journal = journal
    return log


def apply(log: GroupLog, op: Op) -> None:
    """One operation, as the call that noted it."""
    match op[0]:
        case "a":
            log.append_replicated(op[1], op[2])
        case "p":
            log.mark_published(op[1], op[2])
        case "e":
            log.begin_epoch(op[1], op[2])
        case "E":
            log.adopt_epochs(op[1], op[2])
        case "t":
            log.truncate_after(op[1])
        case "r":
            log.reset_to(op[1])
        case "u":
            log.purge(op[1], op[2])
        case "U":
            log.purge_as_primary(op[1])
        case "f":
            log.forget_uuids_upto(op[1])
        case "d":
            log.adopt_dedup(op[1])
        case "s":
            log.set_slots(op[1])
        case "b":
            _, next_ts, epochs, points, slots, published = op
            log.reset_to(next_ts)
            log.epochs = [(e[0], e[1]) for e in epochs]
            log.set_slots(slots)
            log.purge_as_primary(points)
            for first_ts, ms in published:  # accepted times never go back (mark_published)
                log.mark_published(first_ts, ms)
        case tag:
            raise ValueError(f"unknown log operation {tag!r}")


def lowest_cut(ops: Iterable[Op]) -> int | None:
    """The lowest ts a truncation or reset among ``ops`` kept (None: none cut the log):
    what was fsynced above it is another record's position now."""
    cut = None
    for op in ops:
        if op[0] == TRUNCATE or op[0] == RESET:
            kept = op[1] if op[0] == TRUNCATE else op[1] - 1
            cut = kept if cut is None else min(cut, kept)
    return cut


def purged_and_forgotten(log: GroupLog) -> int:
    """The highest ts up to which every record is purged and its uuid forgotten: what lies
    at or below it is no longer needed to rebuild the log (retention may delete it)."""
    upto = log.purged_through
    for held in log.purged_by_slot.values():
        if held:
            upto = min(upto, held[0][0] - 1)
    return upto


def base_of(log: GroupLog, next_ts: int) -> Op:
    """The BASE a log's replay may start from once everything below ``next_ts`` is purged
    and its uuids forgotten (segments deleted by retention)."""
    epochs = [e for e in log.epochs if e[1] <= next_ts]
    covering = [p for p in log.published if p[0] < next_ts][-1:]
    return (BASE, next_ts, epochs, list(log.purge_points()), log.slots, covering)
