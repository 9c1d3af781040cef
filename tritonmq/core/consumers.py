"""What :class:`~tritonmq.core.delivery.Delivery` keeps per subscriber.

A :class:`Consumer` is one ``(connection, sid)`` attachment: its position, ack
point and window. A :class:`Durable` is a named subscription that outlives its
consumers: its offset, and in ``shared`` mode which records are in flight, to be
handed out again, reserved for a member that is away, or in the gap an election
left. Plain records; every rule that changes them is in :mod:`tritonmq.core.delivery`.
"""

from __future__ import annotations

import enum
from typing import Any


class Mode(enum.StrEnum):
    BROADCAST = "broadcast"
    SHARED = "shared"


class Consumer:
    __slots__ = (
        "conn",
        "sid",
        "topic",
        "durable",
        "next_ts",
        "acked_ts",
        "floor",
        "window",
        "window_bytes",
        "inflight",
        "inflight_bytes",
        "member",
        "era",
        "until",
    )

    def __init__(
        self, conn: Any, sid: int, topic: str, durable: Durable | None, next_ts: int, acked_ts: int
    ) -> None:
        self.conn = conn
        self.sid = sid
        self.topic = topic
        self.durable = durable
        self.next_ts = next_ts
        self.acked_ts = acked_ts
        self.floor = next_ts - 1
        self.window = 0
        self.window_bytes = 0
        self.inflight = 0  # shared mode: records handed to this consumer, not yet acked
        self.inflight_bytes = 0  # shared mode: their sizes, bounded by window_bytes
        self.member = ""  # shared mode: the client-chosen id that survives reconnects
        self.era = 0  # the era of a moved slot it reads here (docs/replication.md M3, M4)
        self.until: int | None = (
            None  # its era's seal point: nothing above it is pushed (None: no end)
        )


class Durable:
    __slots__ = (
        "topic",
        "name",
        "mode",
        "offset",
        "stored",
        "consumers",
        "cursor",
        "inflight",
        "redeliver",
        "turn",
        "ahead",
        "resume_at",
        "reserved",
        "away",
        "awaiting",
        "release_at",
        "gap",
        "gap_skip",
        "gap_open",
        "era",
        "stored_era",
        "until",
        "pending",
        "declared",
    )

    def __init__(self, topic: str, name: str, mode: Mode, offset: int, stored: int | None) -> None:
        self.topic = topic
        self.name = name
        self.mode = mode
        self.offset = offset  # every record up to here is acknowledged
        self.stored = stored  # the offset ZooKeeper holds (None: not registered yet)
        self.consumers: list[Consumer] = []
        # shared mode
        self.cursor = offset + 1  # next record never yet dispatched
        self.inflight: dict[int, tuple[Consumer, float]] = {}
        self.redeliver: list[int] = []  # heap of ts to hand out again
        self.turn = 0
        self.ahead: set[int] = set()  # ts >= cursor a member says it acknowledged: skip them
        self.resume_at = 0.0  # a new primary releases nothing uncertain before this
        # records handed to a member that is away (its id), kept for it until it is back
        # or its time in ``away`` is up; None: handed to some member, unknown which (after
        # an election), kept until ``gap_open``
        self.reserved: dict[int, str | None] = {}
        self.away: dict[str, float] = {}  # member id -> until when its records wait for it
        self.awaiting: set[str] = set()  # members the old primary knew, not back yet
        self.release_at = 0.0  # ... and when the gap opens without them
        # [lo, hi]: records the old primary may have handed out after its last frame;
        # walked once ``gap_open`` (every member back, or ``release_at``)
        self.gap = (0, -1)
        self.gap_skip: set[int] = set()  # ts in the gap acknowledged or claimed already
        self.gap_open = True
        # a moved slot (docs/replication.md M5): the era served here, the era of the stored
        # offset, the era's seal point (nothing above it goes out), and whether the offset is
        # still at an older era, written by that era's group (not by us)
        self.era = 0
        self.stored_era = 0
        self.until: int | None = None
        self.pending = False
        # the offset a `sub` here asked ZooKeeper to create it at, until ZooKeeper is known
        # to hold it: a start, not an acknowledgement (None: loaded, or made by a commit)
        self.declared: int | None = None

    def start_afresh(self, offset: int) -> None:
        """Acknowledged up to ``offset``, nothing handed out above it: a moved slot's
        subscription at an era nobody has served it yet (what a shared one's replicated
        state says, era-less, may be of another era, in another group's ts)."""
        self.offset = offset
        self.cursor = offset + 1
        self.inflight, self.redeliver, self.ahead = {}, [], set()
        self.reserved, self.away, self.awaiting = {}, {}, set()
        self.resume_at = self.release_at = 0.0
        self.gap, self.gap_skip, self.gap_open = (0, -1), set(), True

    def low_watermark(self) -> int:
        """Every record up to here is acknowledged; never past the era's seal point: a new
        primary's cursor starts at its epoch's, and above the seal point lie a later era's
        records of ours (the slot came back), which purge would take (M5)."""
        low = self.cursor
        if self.inflight:
            low = min(low, min(self.inflight))
        if self.redeliver:
            low = min(low, self.redeliver[0])
        if self.reserved:
            low = min(low, min(self.reserved))
        if self.gap[0] <= self.gap[1]:
            low = min(low, self.gap[0])
        return low - 1 if self.until is None else min(low - 1, self.until)

    def hold(self) -> int:
        return self.offset if self.stored is None else min(self.stored, self.offset)
