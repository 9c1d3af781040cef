"""What happens to a broker, as :class:`tritonmq.core.broker.BrokerCore` is told it.

Every event is a frozen slotted dataclass carrying ``now`` (seconds on a monotonic
clock the caller owns). Connection handles (``conn``, ``link``) are opaque to the
core: it only compares them by identity and hands them back in actions. Records
stay tuples inside the frames (one event per batch, never per record).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from tritonmq.core.auth import Principal, TokenRejected
from tritonmq.core.group import GroupState, Member
from tritonmq.core.slothistory import SlotHistory
from tritonmq.core.slots import SlotMap
from tritonmq.wire.frames import (
    Append,
    ClientFrame,
    DedupPage,
    Follow,
    HandoverAsk,
    HandoverPairs,
    Leader,
    Purge,
    Record,
    ReplAck,
    SharedAck,
    SharedState,
)


class SessionState(enum.Enum):
    """The broker's ZooKeeper session, as kazoo reports it."""

    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost, session maybe alive: refuse writes
    LOST = "lost"  # expired: ephemeral nodes are gone, step down


class CasOutcome(enum.Enum):
    OK = "ok"  # written: ``state`` is what ZooKeeper now holds (with its new version)
    CONFLICT = "conflict"  # the znode moved (BadVersion, NoNode, NodeExists): nothing written
    UNKNOWN = "unknown"  # ConnectionLoss / SessionExpired mid-call: may or may not be written


# --- clients ---------------------------------------------------------------------

RecordSize: TypeAlias = Callable[[Record], int]
"""What one record costs in a frame of a connection's codec (a pure function the shell
gives; the core cuts answers by it)."""


@dataclass(frozen=True, slots=True)
class ClientFrameIn:
    """A decoded frame from client connection ``conn``. ``wall_ms`` is the shell's wall
    clock (ms since the epoch) when it arrived: the published time a ``pub`` records, and
    the time a token's expiry is judged by. ``verified``: for a ``hello`` carrying a token,
    what the shell read from it (the signature checked with the configured key).
    ``record_size``: what a record costs on this connection when its codec writes records
    larger than the log counts them (JSON); None: as the log counts them (msgpack)."""

    conn: Any
    frame: ClientFrame
    now: float
    wall_ms: int = 0
    verified: Principal | TokenRejected | None = None
    record_size: RecordSize | None = None


@dataclass(frozen=True, slots=True)
class ClientGone:
    conn: Any
    now: float


# --- replication: we are the primary, ``link`` is one follower's connection ----------


@dataclass(frozen=True, slots=True)
class FollowerFrame:
    link: Any
    frame: Follow | ReplAck | SharedAck
    now: float
    nonce: bytes = b""  # the challenge the shell sent on ``link`` (a follow must sign it)


@dataclass(frozen=True, slots=True)
class FollowerGone:
    link: Any
    now: float


# --- replication: we follow ``follow_id`` (from StartFollowing) ---------------------


@dataclass(frozen=True, slots=True)
class PrimaryFrame:
    follow_id: int
    frame: Leader | DedupPage | Append | Purge | SharedState
    now: float


class LinkEnd(enum.Enum):
    CONNECTED = "connected"  # the primary's challenge came (the follow frame is due)
    REFUSED = "refused"  # nothing listens on the primary's port: its process is gone
    CLOSED = "closed"  # the link closed after it had been connected
    TIMED_OUT = "timed out"  # no answer: frozen, partitioned, or overloaded
    REJECTED = "rejected"  # the primary answered with an error frame (code in ``detail``)


@dataclass(frozen=True, slots=True)
class LinkEvent:
    """What happened to the follow link ``follow_id``; the shell reconnects on its own
    back-off until told StopFollowing."""

    follow_id: int
    what: LinkEnd
    now: float
    clean: bool = False  # CLOSED: the close handshake completed
    detail: str = ""
    nonce: bytes = b""  # CONNECTED: the primary's challenge, to sign in the follow frame


# --- ZooKeeper -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZkView:
    """A fresh read of the group: state znode (None: not created), live members, slot map;
    ``histories``: every ``/slots/<n>`` read with it (None: not read, as if none moved)."""

    state: GroupState | None
    members: Mapping[str, Member]
    slots: SlotMap | None
    now: float
    histories: tuple[SlotHistory, ...] | None = None
    read: int = 0  # the latest ReadState request whose read began after it was asked


@dataclass(frozen=True, slots=True)
class SessionChanged:
    session: SessionState
    now: float


@dataclass(frozen=True, slots=True)
class CasDone:
    """The answer to ProposeState ``request``."""

    request: int
    outcome: CasOutcome
    state: GroupState | None  # OK: what was written, with its new version
    now: float


@dataclass(frozen=True, slots=True)
class SubscriptionsLoaded:
    """The answer to LoadSubscriptions ``request``: (topic, name, mode, offset); None: failed.
    ``owners``: (topic, name) -> the principal owning it (absent: anonymous)."""

    request: int
    found: Sequence[tuple[str, str, str, int]] | None
    now: float
    owners: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # (topic, name) -> the era its offset is a ts of, when not 0 (a moved slot, M5)
    eras: Mapping[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OffsetsStored:
    """The answer to StoreOffsets: ``ok`` False means nothing is known to be written."""

    offsets: tuple[tuple[str, str, int], ...]
    ok: bool
    now: float
    eras: tuple[int, ...] = ()  # StoreOffsets' eras, as written


@dataclass(frozen=True, slots=True)
class Synced:
    """The segment files are fsynced up to ``ts`` (as the log was when the fsync began,
    less anything truncated since): what a ``synced`` publish waits for (D4)."""

    ts: int
    now: float


@dataclass(frozen=True, slots=True)
class SubscriptionRegistered:
    """The answer to RegisterSubscription: the offset ZooKeeper holds (None: failed) and
    the era it is a ts of (a moved slot's, M5; 0: a slot that never moved). An offset is
    never taken without its era (M9): another group's ts is not ours."""

    topic: str
    name: str
    offset: int | None
    now: float
    era: int = 0


# --- slot moves (docs/replication.md M2, M7) ------------------------------------------


@dataclass(frozen=True, slots=True)
class SlotStepDone:
    """The answer to ProposeSlotStep ``request``: OK with what was written, CONFLICT (the
    slot no longer allows the step: someone else moved it first), UNKNOWN (ZooKeeper
    failed; the next view decides). ``map_version``: the map version the write made (it
    bumps ``/cluster``'s), which a view read before it does not reach (M1)."""

    request: int
    outcome: CasOutcome
    history: SlotHistory | None
    now: float
    map_version: int


@dataclass(frozen=True, slots=True)
class SlotMoveBegun:
    """The answer to BeginSlotMove ``request``: OK with what was written, CONFLICT (the
    slot or the cluster does not allow the move: ``reason``), UNKNOWN (ZooKeeper failed
    mid-write: the move may have begun; ``reason``)."""

    request: int
    outcome: CasOutcome
    history: SlotHistory | None
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class HandoverAsked:
    """A broker of a slot's new group asks us (on our replication listener ``link``,
    challenged with ``nonce``) for the slot's dedup state up to its seal point."""

    link: Any
    frame: HandoverAsk
    now: float
    nonce: bytes = b""


@dataclass(frozen=True, slots=True)
class HandoverAnswered:
    """The answer to AskHandover ``request``: the old group's pairs (None: no broker of
    it answered; the core asks again later)."""

    request: int
    pairs: HandoverPairs | None
    now: float
    wall_ms: int = 0


# --- time and lifecycle ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tick:
    now: float


@dataclass(frozen=True, slots=True)
class StopRequested:
    """A planned stop (SIGTERM): step down at once, flush offsets, then the shell exits."""

    now: float


Event: TypeAlias = (
    ClientFrameIn
    | ClientGone
    | FollowerFrame
    | FollowerGone
    | PrimaryFrame
    | LinkEvent
    | ZkView
    | SessionChanged
    | CasDone
    | SubscriptionsLoaded
    | OffsetsStored
    | SubscriptionRegistered
    | Synced
    | SlotStepDone
    | SlotMoveBegun
    | HandoverAsked
    | HandoverAnswered
    | Tick
    | StopRequested
)
