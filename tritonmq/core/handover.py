"""The dedup state a moving slot hands from its old group to its new one (replication.md M2.3, M8).

The old group selects, from its log, the ``(ts, uuid)`` of the slot's records up to the
seal point that still deduplicate (:func:`handover_pairs`); the new group keeps them in
a :class:`HandedOver` table of their own, not in its log's uuid table: those ``ts`` are
the old group's, so a retry that hits one is answered with the record's position (era,
ts in the old group), and the table forgets a handover at a deadline the caller passes
in (the dedup window after the seal), never by the new group's own ``ts``.

The pairs are asked for and answered a page at a time (:class:`SlotSelection`): a hot
slot's millions in one frame held both groups' event loops for seconds. The new group's
primary writes each page it was handed into its own log as one entry
(:data:`HANDOVER_TOPIC`, value :func:`encode_entry`; uuid :func:`handover_page_uuid`,
and :func:`handover_uuid` for the last page, whose commit completes the move), so they
replicate and commit like records and a later primary of the group holds them; every
replica reads its table back from those entries (:class:`LogTable`), and an entry
leaves the log when the dedup window has passed it (purged at the forget point).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, cast

import msgpack

from tritonmq.core.log import UNKNOWN_SLOT, GroupLog
from tritonmq.core.slothistory import Position
from tritonmq.core.slots import slot_of
from tritonmq.errors import SlotHistoryError

# The topic of handover entries: a control character, so no client can name it (a
# topic name must not contain one), and so no client reads, writes or subscribes to it.
HANDOVER_TOPIC = "\x00tritonmq.handover"
_MAGIC = b"TMQH2"  # (slot, era, {uuid: ts})
_MAGIC_PAIRS = b"TMQH1"  # (slot, era, [(ts, uuid), ...]), as an earlier version wrote
_UUID_LEN = 72  # longer than any client uuid (at most 64 bytes): no client record collides
_TS, _UUID = itemgetter(0), itemgetter(1)  # of a pair (ts, uuid) or a record (ts, uuid, ...)


def handover_uuid(slot: int, era: int, until: int) -> bytes:
    """The entry's uuid: one per (slot, the era that ends, its seal point), so the log's
    dedup table makes a repeated handover (a new primary after a crash, M7) find the entry
    it already has, while a move sealed again after a roll back (same era, a later seal
    point, more records) is handed over afresh."""
    return _entry_uuid(slot, era, f"until {until}")


def handover_page_uuid(slot: int, era: int, until: int, after: int, last: int) -> bytes:
    """The entry uuid of a page but the last (that one is :func:`handover_uuid`): the
    pairs above ``after`` up to ``last``. A new primary handed the same page again (M7)
    finds the entry it already has; one the old group answers differently since (it
    forgot uuids meanwhile) is written afresh, so no pair of it is skipped."""
    return _entry_uuid(slot, era, f"until {until} after {after} to {last}")


def handover_forward_uuid(slot: int, era: int, until: int, after: int, last: int) -> bytes:
    """The entry uuid of a page of an earlier era's uuids forwarded with the handover
    sealed at ``until``: those above ``after`` up to ``last``, ts of that era (an earlier
    version's handover forwards each era whole: ``after`` 0)."""
    return _entry_uuid(slot, era, f"forwarded at {until} after {after} to {last}")


def _entry_uuid(slot: int, era: int, rest: str) -> bytes:
    """Longer than any client uuid (at most 64 bytes), so no client record collides; its
    slot and era are its 5th and 7th words (:func:`entry_slot_era`)."""
    return f"tritonmq handover of slot {slot} era {era} {rest} ".encode().ljust(_UUID_LEN, b".")


def entry_slot_era(uuid: bytes) -> tuple[int, int]:
    """(slot, era) of a handover entry's uuid (either kind)."""
    words = uuid.split()
    return int(words[4]), int(words[6])


def encode_entry(slot: int, era: int, pairs: Iterable[tuple[int, bytes]]) -> bytes:
    """The entry's value: the slot, the era that ended and its uuids, each with its ts
    there, as a msgpack map after a magic prefix: a handover can hold millions of uuids,
    and a map decodes into the table's own dict in C, where a per-pair Python loop held
    every replica's event loop for seconds."""
    return _MAGIC + msgpack.packb((slot, era, {u: ts for ts, u in pairs}))


def decode_entry(value: bytes) -> tuple[int, int, dict[bytes, int]]:
    """(slot, era, uuid -> ts) of an entry's value; SlotHistoryError when it is not one.
    An entry written as pairs (``TMQH1``, by an earlier version) reads the same."""
    old = value.startswith(_MAGIC_PAIRS)
    if not old and not value.startswith(_MAGIC):
        raise SlotHistoryError("not a handover entry")
    try:
        got = msgpack.unpackb(value[len(_MAGIC) :], use_list=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise SlotHistoryError(f"a handover entry does not decode: {e}") from None
    if (
        type(got) is not tuple
        or len(got) != 3
        or type(got[0]) is not int
        or type(got[1]) is not int
        or type(got[2]) is not (tuple if old else dict)
    ):
        raise SlotHistoryError("a handover entry is (slot, era, uuids)")
    if old:
        return got[0], got[1], {u: ts for ts, u in got[2]}
    return got[0], got[1], cast("dict[bytes, int]", got[2])


def table_of(log: GroupLog) -> HandedOver:
    """The handed-over uuids of every handover entry ``log`` holds, read whole (a replica
    keeps its own in step with its log instead: :class:`LogTable`)."""
    t = log.topics.get(HANDOVER_TOPIC)
    table = HandedOver()
    for rec in t.records if t is not None else ():
        slot, era, uuids = decode_entry(rec[3])
        table.join(era, uuids, float("inf"), slot)
    return table


def handover_pairs(
    log: GroupLog, slot: int, slots: int, until: int
) -> tuple[tuple[int, bytes], ...]:
    """``(ts, uuid)``, ascending, of every record of ``slot`` (of ``slots``) at or below
    ``until`` that a retry may still name: the slot's retained records, and its purged
    records the log still remembers (kept per slot: a whole group's window, up to
    ``dedup_max``, in one frame held both groups' event loops for seconds)."""
    sel = select_slot(log, slot, slots, until)
    return sel.page(0, sel.size)[0]


@dataclass(frozen=True, slots=True)
class SlotSelection:
    """What :func:`handover_pairs` hands over, kept as runs ascending by ts (each topic's
    records up to the seal point, the slot's purged pairs), copied once per handover in C:
    each page is cut from them by bisection and a merge of at most a page of each run.
    Building and sorting every pair at once held the old group's event loop 0.39 s for a
    hot slot's 2,000,000 uuids (M2.3); a copy takes 15 ms (24 to 96 ms for purged ones,
    in the runs the log kept them in) and a page of 100,000 16 to 67 ms. The copies hold the records retained then, values
    included, until the handover ends (a purge meanwhile frees them only after)."""

    runs: tuple[Sequence[tuple[Any, ...]], ...]  # records (ts, uuid, ...) or pairs (ts, uuid)

    @property
    def size(self) -> int:
        return sum(len(r) for r in self.runs)

    def page(self, after: int, size: int) -> tuple[tuple[tuple[int, bytes], ...], bool]:
        """At most ``size`` pairs above ts ``after``, ascending, and whether more follow."""
        starts, bound = [], None
        for run in self.runs:
            i = bisect_right(run, after, key=_TS)
            if i < len(run):
                starts.append((run[i][0], run, i))
                if len(run) - i > size:  # its pair after a page's worth bounds the page
                    last = run[i + size][0]
                    bound = last if bound is None else min(bound, last)
        # so do the last pairs of the runs that begin first, once they hold a page's worth:
        # a slot's purges make hundreds of short runs, mostly one after another
        starts.sort(key=_TS)
        held, reach = 0, 0
        for _, run, i in starts:
            if bound is not None and run[i][0] > bound:
                break
            held, reach = held + len(run) - i, max(reach, run[-1][0])
            if held > size:
                bound = reach if bound is None else min(bound, reach)
                break
        heads = []  # of each run, what may be in the page
        for _, run, i in starts:
            j = len(run) if bound is None else bisect_right(run, bound, lo=i, key=_TS)
            if j > i:
                heads.append(run[i : min(j, i + size + 1)])
        # one sort in C of the runs' heads (timsort merges runs; a ts is in one run only: a
        # purged record left its topic): a merge in Python cost 40 ms a page
        top = sorted(chain.from_iterable(heads), key=_TS)[: size + 1]
        got = tuple(zip(map(_TS, top), map(_UUID, top), strict=True))  # records to pairs, in C
        return got[:size], len(got) > size


def select_slot(log: GroupLog, slot: int, slots: int, until: int) -> SlotSelection:
    """The runs of :class:`SlotSelection` for ``slot`` (of ``slots``) up to ``until``."""
    runs: list[Sequence[tuple[Any, ...]]] = []
    for name, t in log.topics.items():
        if name != HANDOVER_TOPIC and slot_of(name, slots) == slot:
            j = bisect_right(t.records, until, key=_TS)
            if j:
                runs.append(t.records[:j])
    for key in (slot, UNKNOWN_SLOT):
        for pairs in log.purged_runs(key):  # copies, in ts order each
            j = bisect_right(pairs, until, key=_TS)
            if j:
                runs.append(pairs if j == len(pairs) else pairs[:j])
    return SlotSelection(tuple(runs))


@dataclass(frozen=True, slots=True)
class Forwarded:
    """The earlier eras' uuids a handover forwards (those this group was itself handed
    and still holds, M8), per era as two lists ascending by ts, taken once per handover:
    each page is cut after an (era, ts) cursor. Sorted and sent whole in the last page,
    a hot slot's 2,000,000 held the old group's event loop 0.25 s, then 0.8 s framing
    48 MB, and the new group's 0.7 s adopting them in one entry (M2.3). An era's pages
    join its map in ts order, so its values are sorted already but for a page answered
    afresh; the check is one sort of sorted ints in C."""

    eras: tuple[tuple[int, list[int], list[bytes]], ...]  # (era, its ts, their uuids)

    @classmethod
    def of(cls, table: HandedOver, slot: int, before: int) -> Forwarded:
        """``slot``'s eras before ``before`` that ``table`` holds."""
        maps: dict[int, list[dict[bytes, int]]] = {}
        for _, s, era, uuids in table.batches:
            if s == slot and era < before and uuids:
                maps.setdefault(era, []).append(uuids)
        eras = []
        for era, ms in sorted(maps.items()):
            ts = list(chain.from_iterable(m.values() for m in ms))
            us = list(chain.from_iterable(ms))
            if ts != sorted(ts):
                order = sorted(range(len(ts)), key=ts.__getitem__)
                ts, us = [ts[i] for i in order], [us[i] for i in order]
            eras.append((era, ts, us))
        return cls(tuple(eras))

    def whole(self) -> tuple[tuple[int, tuple[tuple[int, bytes], ...]], ...]:
        """(era, pairs) of every uuid, as an earlier version's asker takes them."""
        return self.page((0, 0), sum(len(ts) for _, ts, _ in self.eras))[0]

    def page(
        self, after: tuple[int, int], size: int
    ) -> tuple[tuple[tuple[int, tuple[tuple[int, bytes], ...]], ...], bool]:
        """(era, pairs) of at most ``size`` uuids after ``after`` (era, ts), ascending,
        and whether more follow."""
        out: list[tuple[int, tuple[tuple[int, bytes], ...]]] = []
        left = size
        for era, ts, us in self.eras:
            if era < after[0]:
                continue
            i = bisect_right(ts, after[1]) if era == after[0] else 0
            if i == len(ts):
                continue
            if left <= 0:
                return tuple(out), True
            j = min(len(ts), i + left)
            out.append((era, tuple(zip(ts[i:j], us[i:j], strict=True))))
            left -= j - i
            if j < len(ts):
                return tuple(out), True
        return tuple(out), False


@dataclass(slots=True)
class HandedOver:
    """uuids another group stored before a slot moved here, with their position there,
    per slot. A position is (era, ts) of *its* slot: a uuid handed over with slot 1's
    pairs must not answer a retry of slot 16 with slot 1's era (found by the simulator
    when a handover carried every slot's purged uuids: scenario
    ``test_a_retry_is_answered_with_its_own_slot_s_era_not_the_handover_s``). ``slot``
    None: any slot. One dict per handover, looked up in the order adopted: a handover of
    millions of uuids is adopted in C, not one Python object per uuid (that took seconds
    of the event loop)."""

    # (deadline, slot, era, uuid -> ts in the old group) per handover, in the order adopted
    batches: list[tuple[float, int | None, int, dict[bytes, int]]] = field(default_factory=list)

    def adopt(
        self,
        era: int,
        pairs: Iterable[tuple[int, bytes]],
        forget_at: float,
        slot: int | None = None,
    ) -> tuple[bytes, ...]:
        """Remember ``pairs`` (old group's ts, uuid) of ``slot``'s ``era`` until
        ``forget_at``; a uuid already known for the slot keeps its first position
        (adopting the same handover twice, as a new primary repeating it does, changes
        nothing). Returns the uuids newly adopted (see :meth:`join`)."""
        return self.join(era, {u: ts for ts, u in pairs}, forget_at, slot)[1]

    def join(
        self, era: int, uuids: dict[bytes, int], forget_at: float, slot: int | None = None
    ) -> tuple[dict[bytes, int] | None, tuple[bytes, ...], bool]:
        """Remember ``uuids`` (uuid -> old group's ts; kept, not copied) as :meth:`adopt`
        does, and say how to take it back (:meth:`unjoin`): the batch's dict the uuids
        went into (None: none was new), the uuids newly adopted, and whether they began
        that batch. A later page of a handover joins its first
        page's dict: an era gives a uuid one ts, and checked against every earlier page, a
        hot slot's twenty pages cost a replica's rebuild more than one map did."""
        same = None
        for b in self.batches:
            if b[1] != slot or not uuids:
                continue
            if same is None and b[2] == era and b[0] == forget_at:
                same = b[3]  # joined below
                continue
            known = uuids.keys() & b[3].keys()
            if known:
                uuids = {u: ts for u, ts in uuids.items() if u not in known}
        if not uuids:
            return None, (), False
        if same is None:
            self.batches.append((forget_at, slot, era, uuids))
            return uuids, tuple(uuids), True
        fresh = tuple(uuids.keys() - same.keys())
        same.update(uuids)
        return same, fresh, False

    def unjoin(self, batch: dict[bytes, int], fresh: tuple[bytes, ...], began: bool) -> None:
        """Take back a :meth:`join` (the latest one not taken back yet): a batch it began
        goes, else the uuids it added leave the batch it joined."""
        if began:
            self.batches = [b for b in self.batches if b[3] is not batch]
            return
        for u in fresh:
            batch.pop(u, None)

    def lookup(self, uuid: bytes, slot: int | None = None) -> Position | None:
        """Where ``uuid`` was stored as a record of ``slot`` (None: of any slot): the
        slot's own handovers first, then those for any slot."""
        fallback = None
        for _, s, era, uuids in self.batches:
            if s == slot or slot is None:
                ts = uuids.get(uuid)
                if ts is not None:
                    return Position(era, ts)
            elif s is None and fallback is None:
                ts = uuids.get(uuid)
                if ts is not None:
                    fallback = Position(era, ts)
        return fallback

    def all_known(self, uuids: Sequence[bytes], slot: int | None = None) -> bool:
        """Every uuid of a batch was handed over: the retry is answered, not stored (M8)."""
        return bool(uuids) and all(self.lookup(u, slot) is not None for u in uuids)

    def forget(self, now: float) -> int:
        """Drop every handover whose deadline has passed; returns how many uuids went."""
        gone = sum(len(b[3]) for b in self.batches if b[0] <= now)
        self.batches = [b for b in self.batches if b[0] > now]
        return gone


@dataclass(slots=True)
class LogTable:
    """The :class:`HandedOver` table a replica reads from its log's handover entries,
    kept in step with them an entry at a time: a new page's entry is read alone; one a
    truncation took (never committed) is taken back alone, newest first; one purged at the
    forget point stays until none of its handover's entries is left (its uuids deduplicate
    a little longer). Read again whole after a truncation, a hot slot's 2,000,000 uuids
    held the replica's event loop over a second (M2.3)."""

    table: HandedOver = field(default_factory=HandedOver)
    # per entry read, ascending by ts: its record (whether the log still holds that very
    # tuple says whether a truncation took it) and its :meth:`HandedOver.join`
    read: list[tuple[tuple[Any, ...], dict[bytes, int] | None, tuple[bytes, ...], bool]] = field(
        default_factory=list
    )
    key: tuple[int, int, int, int] | None = None  # the entries when last read

    def follow(self, log: GroupLog) -> HandedOver:
        """The table of the handover entries ``log`` holds now."""
        t = log.topics.get(HANDOVER_TOPIC)
        recs = t.records if t is not None else []
        cut = log.cuts.get(HANDOVER_TOPIC, 0)  # entries a truncation took, ever
        key = (len(recs), recs[0][0], recs[-1][0], cut) if recs else None
        if key == self.key:
            return self.table
        self.key = key
        if t is None or not recs:
            self.table, self.read = HandedOver(), []
            return self.table
        # gone and above what was purged: a truncation took it (a suffix of the log, so
        # newest first), even below the first entry left (the next written later still)
        while (
            self.read and self.read[-1][0][0] > t.last_purged and not _holds(recs, self.read[-1][0])
        ):
            _, batch, fresh, began = self.read.pop()
            if batch is not None:
                self.table.unjoin(batch, fresh, began)
        gone = bisect_right(self.read, recs[0][0] - 1, key=_read_ts)
        if gone:  # left at the forget point: a handover goes once none of its entries is
            del self.read[:gone]
            left = {entry_slot_era(rec[1]) for rec in recs}
            self.table.batches = [b for b in self.table.batches if (b[1], b[2]) in left]
        after = self.read[-1][0][0] if self.read else 0
        for rec in recs[t.index_of(after + 1) :]:
            slot, era, uuids = decode_entry(rec[3])
            batch, fresh, began = self.table.join(era, uuids, float("inf"), slot)
            # a batch begun goes whole when taken back: its uuids need not be kept twice
            self.read.append((rec, batch, () if began else fresh, began))
        return self.table


def _read_ts(read: tuple[tuple[Any, ...], Any, Any, Any]) -> int:
    ts: int = read[0][0]
    return ts


def _holds(recs: Sequence[tuple[Any, ...]], rec: tuple[Any, ...]) -> bool:
    """``recs`` (ascending by ts) hold this very record (not one written at its ts since)."""
    i = bisect_right(recs, rec[0], key=_TS) - 1
    return i >= 0 and recs[i] is rec
