"""The chaos run's checker: what producers sent and learned, what applications received,
and the verdict (lost, duplicated, reordered, phantom records).

It is fed as the run goes (``sent``, ``acked``, ``unknown``, ``delivered``) and keeps
compact state, so that a run of millions of records fits in memory: a producer's
records are numbered densely from 0 (its *seq*, also its send order), and what each
subscription received is one bit per (producer, seq). No I/O and no clock: times
are passed in, so synthetic histories test it exactly.

A record's value is ``b"<producer>:<seq>"`` (:func:`record_value`); anything else
delivered is a phantom.
"""

from __future__ import annotations

import enum
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# How many examples of each violation the details keep (enough to chase one down).
_EXAMPLES = 10


class Outcome(enum.IntEnum):
    """What a producer learned about one record it tried to publish."""

    UNSENT = 0
    PENDING = 1  # sent, no answer yet
    ACKED = 2
    UNKNOWN = 3  # the publish failed or timed out: it may or may not be stored


class Mode(enum.Enum):
    BROADCAST = "broadcast"
    SHARED = "shared"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The columns the chaos run prints, in order, and the details behind them."""

    faults: int
    acked: int
    lost: int
    dup: int
    order_violations: int
    phantom: int
    unknown: int
    longest_pause: float
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    COLUMNS = (
        "faults",
        "acked",
        "lost",
        "dup",
        "order_violations",
        "phantom",
        "unknown",
        "longest_pause",
    )

    @property
    def ok(self) -> bool:
        """No loss, duplicate, reorder or phantom (unknown outcomes are allowed)."""
        return self.lost == self.dup == self.order_violations == self.phantom == 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_value(producer: int, seq: int) -> bytes:
    return f"{producer}:{seq}".encode()


def parse_value(value: bytes) -> tuple[int, int] | None:
    """``(producer, seq)`` of a value made by :func:`record_value`, None for anything else."""
    p, sep, s = value.partition(b":")
    if not sep or not p.isdigit() or not s.isdigit():
        return None
    return int(p), int(s)


class _Bits:
    """A growable bitmap: one bit per seq."""

    __slots__ = ("_b",)

    def __init__(self) -> None:
        self._b = bytearray()

    def test_and_set(self, i: int) -> bool:
        """Set bit ``i``; True if it was already set."""
        byte, bit = divmod(i, 8)
        if byte >= len(self._b):
            self._b.extend(bytes(byte + 1 - len(self._b) + 1024))
        was = bool(self._b[byte] >> bit & 1)
        self._b[byte] |= 1 << bit
        return was

    def __contains__(self, i: int) -> bool:
        byte, bit = divmod(i, 8)
        return byte < len(self._b) and bool(self._b[byte] >> bit & 1)


class _Producer:
    """Per seq: the topic (index), the outcome and the acknowledged ts."""

    __slots__ = ("topic", "outcome", "ts", "longest_pause", "last_ack")

    def __init__(self) -> None:
        self.topic = bytearray()
        self.outcome = bytearray()
        self.ts = array("q")
        self.longest_pause = 0.0
        self.last_ack: float | None = None

    def grow(self, seq: int) -> None:
        if seq >= len(self.outcome):
            more = seq + 1 - len(self.outcome) + 4096
            self.topic.extend(bytes(more))
            self.outcome.extend(bytes(more))
            self.ts.extend([-1] * more)

    def outcome_of(self, seq: int) -> Outcome:
        return Outcome(self.outcome[seq]) if 0 <= seq < len(self.outcome) else Outcome.UNSENT


class Checker:
    """Feed it the run's history; :meth:`verdict` says what went wrong.

    ``subscriptions`` maps each durable subscription's name to its mode; each covers
    every topic in ``topics``. A shared subscription's members split its records, so
    it must see each record once across all of them; order is checked per member of a
    broadcast subscription only (a shared subscription promises no order).
    """

    def __init__(self, topics: Sequence[str], subscriptions: Mapping[str, Mode]) -> None:
        if len(topics) > 255:
            raise ValueError("at most 255 topics")
        self.topics = list(topics)
        self._topic_index = {t: i for i, t in enumerate(self.topics)}
        self.subscriptions = dict(subscriptions)
        self._producers: dict[int, _Producer] = {}
        self._got: dict[tuple[str, int], _Bits] = {}  # (subscription, producer) -> seqs seen
        self._last_seq: dict[tuple[str, str, str, int], int] = {}  # per member/topic/producer
        self.deliveries = 0
        self.dup = 0
        self.dup_per_subscription: Counter[str] = Counter()
        self.phantom = 0
        self.order_violations = 0
        self.ts_mismatch = 0
        self.examples: dict[str, list[Any]] = {
            "dup": [],
            "phantom": [],
            "order": [],
            "ts_mismatch": [],
        }

    # --- producers ---------------------------------------------------------------------

    def _producer(self, producer: int) -> _Producer:
        p = self._producers.get(producer)
        if p is None:
            p = self._producers[producer] = _Producer()
        return p

    def sent(self, producer: int, seq: int, topic: str) -> None:
        """Record ``seq`` of ``producer`` is about to be published to ``topic``."""
        p = self._producer(producer)
        p.grow(seq)
        if p.outcome[seq] != Outcome.UNSENT:
            raise ValueError(f"producer {producer} sent seq {seq} twice")
        p.topic[seq] = self._topic_index[topic]
        p.outcome[seq] = Outcome.PENDING

    def acked(self, producer: int, seq: int, ts: int, now: float) -> None:
        p = self._producers[producer]
        p.outcome[seq] = Outcome.ACKED
        p.ts[seq] = ts
        self._ack_time(p, now)

    def unknown(self, producer: int, seq: int) -> None:
        p = self._producers[producer]
        if p.outcome[seq] == Outcome.PENDING:
            p.outcome[seq] = Outcome.UNKNOWN

    def _ack_time(self, p: _Producer, now: float) -> None:
        if p.last_ack is not None:
            p.longest_pause = max(p.longest_pause, now - p.last_ack)
        p.last_ack = now

    def producer_stopped(self, producer: int, now: float) -> None:
        """The producer stopped trying at ``now``: a stall up to then is a pause too."""
        p = self._producers.get(producer)
        if p is not None and p.last_ack is not None:
            p.longest_pause = max(p.longest_pause, now - p.last_ack)

    # --- applications ------------------------------------------------------------------

    def delivered(self, subscription: str, member: str, topic: str, ts: int, value: bytes) -> None:
        """Member ``member`` of ``subscription`` handed this record to the application."""
        self.deliveries += 1
        key = parse_value(value)
        p = self._producers.get(key[0]) if key else None
        if (
            key is None
            or p is None
            or p.outcome_of(key[1]) == Outcome.UNSENT
            or self.topics[p.topic[key[1]]] != topic
            or subscription not in self.subscriptions
        ):
            self.phantom += 1
            self._example("phantom", (subscription, member, topic, ts, value[:64]))
            return
        producer, seq = key
        if p.outcome[seq] == Outcome.ACKED and p.ts[seq] != ts:
            self.ts_mismatch += 1
            self._example("ts_mismatch", (subscription, topic, producer, seq, p.ts[seq], ts))
        bits = self._got.get((subscription, producer))
        if bits is None:
            bits = self._got[(subscription, producer)] = _Bits()
        if bits.test_and_set(seq):
            self.dup += 1
            self.dup_per_subscription[subscription] += 1
            self._example("dup", (subscription, member, topic, producer, seq, ts))
            return
        if self.subscriptions[subscription] is Mode.SHARED:
            return
        stream = (subscription, member, topic, producer)
        last = self._last_seq.get(stream, -1)
        if seq < last:
            self.order_violations += 1
            self._example("order", (subscription, member, topic, producer, seq, last))
        else:
            self._last_seq[stream] = seq

    def _example(self, kind: str, what: Any) -> None:
        if len(self.examples[kind]) < _EXAMPLES:
            self.examples[kind].append(what)

    # --- the verdict -------------------------------------------------------------------

    def missing(self) -> dict[str, list[tuple[str, int, int, int]]]:
        """Per subscription: acknowledged records it never received, as
        ``(topic, producer, seq, ts)``."""
        out: dict[str, list[tuple[str, int, int, int]]] = {}
        for name in self.subscriptions:
            lost = out[name] = []
            for producer, p in self._producers.items():
                bits = self._got.get((name, producer)) or _Bits()
                for seq in _acked_seqs(p.outcome):
                    if seq not in bits:
                        lost.append((self.topics[p.topic[seq]], producer, seq, p.ts[seq]))
        return out

    def counts(self) -> dict[str, int]:
        """Records per outcome, over all producers."""
        out = {o.name.lower(): 0 for o in Outcome if o is not Outcome.UNSENT}
        for p in self._producers.values():
            for o in (Outcome.PENDING, Outcome.ACKED, Outcome.UNKNOWN):
                out[o.name.lower()] += p.outcome.count(o)
        return out

    def verdict(self, faults: int, extra: Mapping[str, Any] | None = None) -> Verdict:
        missing = self.missing()
        lost_records = {(t, p, s) for recs in missing.values() for t, p, s, _ in recs}
        counts = self.counts()
        details: dict[str, Any] = {
            "records": counts,
            "deliveries": self.deliveries,
            "lost_per_subscription": {n: len(r) for n, r in missing.items()},
            "dup_per_subscription": dict(self.dup_per_subscription),
            "lost_examples": {n: r[:_EXAMPLES] for n, r in missing.items() if r},
            "ts_mismatch": self.ts_mismatch,
            "examples": {k: v for k, v in self.examples.items() if v},
            "pause_per_producer": {
                str(i): round(p.longest_pause, 3) for i, p in sorted(self._producers.items())
            },
        }
        details.update(extra or {})
        return Verdict(
            faults=faults,
            acked=counts["acked"],
            lost=len(lost_records),
            dup=self.dup,
            order_violations=self.order_violations,
            phantom=self.phantom,
            # Never answered at all counts as unknown too: the producer did not learn it.
            unknown=counts["unknown"] + counts["pending"],
            longest_pause=max((p.longest_pause for p in self._producers.values()), default=0.0),
            details=details,
        )


def _acked_seqs(outcome: bytearray) -> Iterable[int]:
    """Indexes of ACKED entries, found with bytearray.find (fast on millions)."""
    acked = bytes([Outcome.ACKED])
    i = outcome.find(acked)
    while i != -1:
        yield i
        i = outcome.find(acked, i + 1)
