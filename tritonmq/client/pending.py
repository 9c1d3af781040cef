"""What the client protocol keeps per publish call, batch, one-shot request and subscription.

Plain records with no rules of their own beyond a subscription's memory of its acks;
:mod:`tritonmq.client.protocol` decides what happens to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonmq.wire.frames import (
    Commit,
    Fetch,
    From,
    Meta,
    Presence,
    PubRecord,
    Stats,
    Sub,
    SubDelete,
    SubReset,
)

RECENT_ACKS_S = 30.0  # rule 6: a shared member remembers its acks this long
RECENT_ACKS_MAX = 50_000  # ... and at most this many (the wire allows 100,000)


@dataclass(slots=True)
class Ticket:
    topic: str
    ts: list[int]
    missing: int
    eras: list[int] | None = None  # per record, once a puback said eras (a moved slot)


@dataclass(slots=True)
class Batch:
    id: int
    topic: str
    records: list[PubRecord]
    parts: list[tuple[int, int, int]]  # (ticket, first index in the ticket, count)
    deadline: float
    attempts: int = 0
    on_wire: bool = False
    sent_at: float = 0.0
    durability: str = ""  # the level its records asked for ("": the broker's default)


@dataclass(slots=True)
class Request:
    ticket: int
    frame: Fetch | Commit | Meta | SubDelete | SubReset | Presence | Stats  # with its wire id
    deadline: float
    attempts: int = 0


@dataclass(slots=True)
class Subscription:
    sid: int
    topic: str
    name: str | None
    start: From | int
    window: int | None
    shared: bool
    asked_at: float
    position: int | None = None  # subok.next of the first subok
    max_seen: int = -1  # highest ts handed to the application (of era ``era``)
    era: int = 0  # the era of a moved slot its position is in (docs/replication.md M3)
    acked_to: int = -1  # broadcast: the highest ts the application acknowledged (of ``era``)
    # shared mode (rule 6): ts -> when the application acknowledged it, oldest first
    acked: dict[int, float] = field(default_factory=dict)
    # shared mode: ts handed to the application, not yet acknowledged -> on which connection
    handed: dict[int, int] = field(default_factory=dict)
    member: str = ""  # shared mode: this member's id, the same on every connection
    presence: bool = False  # C12: every `sub` asks for presence again, with the same info
    info: str = ""

    def acknowledged(self, ts: int, now: float) -> None:
        self.handed.pop(ts, None)
        self.acked.pop(ts, None)
        self.acked[ts] = now
        if len(self.acked) > RECENT_ACKS_MAX:
            del self.acked[next(iter(self.acked))]

    def recent_acks(self, now: float) -> tuple[int, ...]:
        old = [ts for ts, at in self.acked.items() if at < now - RECENT_ACKS_S]
        for ts in old:
            del self.acked[ts]
        return tuple(self.acked)

    def frame(self, now: float) -> Sub:
        start: From | int
        if self.shared:
            start = From.LATEST if self.position is not None else self.start
        elif self.max_seen >= 0:
            start = self.max_seen + 1
        elif self.position is not None:
            start = self.position
        else:
            start = self.start
        mode = "shared" if self.shared else "broadcast"
        resume = self.position is not None
        shared_resume = self.shared and resume
        acked, held = (self.recent_acks(now), tuple(self.handed)) if shared_resume else ((), ())
        return Sub(
            self.sid, self.topic, self.name, start, self.window, mode, resume, acked, held,
            self.member if self.shared else "", self.presence, self.info,
            self.era if isinstance(start, int) else 0,
        )  # fmt: skip
