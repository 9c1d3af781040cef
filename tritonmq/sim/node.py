"""The simulator's node interface: a process is fed events and answers with effects.

Brokers and clients alike are driven only through :meth:`SimNode.handle`, so a
broker built on another core plugs in by implementing this one method. Messages
from broker to client are the small frames below; client-to-broker and
replication messages are the wire's own frame dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from tritonmq.sim.network import Dial
from tritonmq.sim.zkmodel import SessionState, ZkOp, ZkResult
from tritonmq.wire.frames import ErrorCode, Record

# --- broker -> client messages -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class PubAcked:
    id: int
    ts: tuple[int, ...]
    eras: tuple[int, ...] = ()  # per ts, when one is not the slot's current era (M8)


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    code: ErrorCode
    message: str
    id: int | None = None
    sid: int | None = None
    group: str | None = None  # WRONG_GROUP: the group to go to
    era: int | None = None  # WRONG_GROUP ending a reader's era: go on in ``era`` ...
    after: int | None = None  # ... after ts ``after`` (docs/replication.md M4)


@dataclass(frozen=True, slots=True)
class SubOk:
    sid: int
    next_ts: int
    era: int = 0  # the era ``next_ts`` is a ts of (a moved slot, M3)


@dataclass(frozen=True, slots=True)
class Delivered:
    sid: int
    topic: str
    records: tuple[Record, ...]
    era: int = 0  # the era the records were written in (a moved slot, M3)


# --- events a node is fed ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Booted:
    """The process started with empty memory."""


@dataclass(frozen=True, slots=True)
class SessionChanged:
    state: SessionState


@dataclass(frozen=True, slots=True)
class ZkReplied:
    tag: str
    op: ZkOp
    result: ZkResult


@dataclass(frozen=True, slots=True)
class WatchFired:
    prefix: str


@dataclass(frozen=True, slots=True)
class Dialed:
    tag: str
    peer: str
    outcome: Dial
    conn: int | None


@dataclass(frozen=True, slots=True)
class Accepted:
    conn: int
    peer: str
    kind: str


@dataclass(frozen=True, slots=True)
class Received:
    conn: int
    msg: Any


@dataclass(frozen=True, slots=True)
class Closed:
    conn: int
    timed_out: bool


@dataclass(frozen=True, slots=True)
class Ticked:
    """Timer: every node is ticked every ``TICK`` seconds while it runs."""


NodeEvent: TypeAlias = (
    Booted
    | SessionChanged
    | ZkReplied
    | WatchFired
    | Dialed
    | Accepted
    | Received
    | Closed
    | Ticked
)

# --- effects a node asks for -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    conn: int
    msg: Any


@dataclass(frozen=True, slots=True)
class DialOut:
    peer: str
    kind: str
    tag: str


@dataclass(frozen=True, slots=True)
class CloseConn:
    conn: int


@dataclass(frozen=True, slots=True)
class ZkRequest:
    tag: str
    op: ZkOp


@dataclass(frozen=True, slots=True)
class ZkWatch:
    prefix: str


@dataclass(frozen=True, slots=True)
class Note:
    """A log line: it goes into the trace."""

    text: str


@dataclass(frozen=True, slots=True)
class PurgedUpto:
    """The primary purged ``topic`` up to ``upto`` (for the invariant checker)."""

    topic: str
    upto: int


@dataclass(frozen=True, slots=True)
class AcceptedWrites:
    """The primary stamped new records in ``epoch`` (for the invariant checker)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Leads:
    """The broker became primary of ``epoch`` (for the invariant checker)."""

    epoch: int


Effect: TypeAlias = (
    Send | DialOut | CloseConn | ZkRequest | ZkWatch | Note | PurgedUpto | AcceptedWrites | Leads
)

TICK = 0.1


class SimNode(Protocol):
    name: str

    def handle(self, ev: NodeEvent, now: float) -> list[Effect]: ...
