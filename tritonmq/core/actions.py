"""What the core asks the shell to do. The shell performs them; it decides nothing.

The shell performs a list of actions in order, synchronously where it can (sends are
buffered by the transport), and reports the outcome of those that talk to ZooKeeper
back as events (:mod:`tritonmq.core.events`). Connection handles are opaque.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from tritonmq.core.group import GroupState, Member
from tritonmq.wire.frames import (
    DedupPage,
    ErrorCode,
    Follow,
    HandoverPairs,
    Join,
    Leader,
    Leave,
    Members,
    Purge,
    Record,
    ReplAck,
    SharedAck,
    SharedState,
    SlotInfo,
    StatsReply,
    SubInfo,
)


@dataclass(frozen=True, slots=True)
class SendPubAck:
    conn: Any
    id: int
    ts: tuple[int, ...]
    eras: tuple[int, ...] = ()  # per ts, only when one is not the slot's current era (M8)


@dataclass(frozen=True, slots=True)
class SendError:
    """An ``error`` frame; ``id`` names a request, ``sid`` a subscription, ``primary`` where
    the primary is (NOT_PRIMARY), ``group`` the owner of a topic (WRONG_GROUP), ``first``..
    ``last`` the records a reader missed (PURGED)."""

    conn: Any
    code: ErrorCode
    message: str
    id: int | None = None
    sid: int | None = None
    primary: str | None = None
    group: str | None = None
    first: int | None = None
    last: int | None = None
    era: int | None = None  # WRONG_GROUP ending a reader's era: go on in ``era`` after ``after``
    after: int | None = None


@dataclass(frozen=True, slots=True)
class Replicate:
    """Send log entries ``start..end`` to each of ``followers`` (encode once, send to all)."""

    followers: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ReplicateDedup:
    """Send follower ``follower`` the next page of the dedup state it starts with."""

    follower: str
    page: DedupPage


@dataclass(frozen=True, slots=True)
class ProposeIsr:
    """Compare-and-set the group state's ISR (and the boots that identify its members)."""

    isr: tuple[str, ...]
    boots: Mapping[str, str]
    reason: str


@dataclass(frozen=True, slots=True)
class Deliver:
    conn: Any
    sid: int
    topic: str
    records: list[Record]
    era: int = 0  # of a moved slot (docs/replication.md M3)


@dataclass(frozen=True, slots=True)
class RegisterSubscription:
    """Create ``/subscriptions/<topic>/<name>`` and its offset in ZooKeeper; ``owner`` is
    the principal it belongs to ("" : anonymous), kept next to its mode."""

    topic: str
    name: str
    mode: str
    offset: int
    owner: str = ""
    era: int = 0  # the era ``offset`` is a ts of (a moved slot's current era, M5)
    # the group state's version the primary holds: written only while the state znode is
    # still at it, so a primary deposed while alive registers nothing (S1; None: unfenced)
    fence: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteSubscription:
    """Delete ``/subscriptions/<topic>/<name>`` and its offset from ZooKeeper (admin op)."""

    topic: str
    name: str


@dataclass(frozen=True, slots=True)
class StoreOffsets:
    """Write these (topic, name, offset) to ZooKeeper: one coalesced batch."""

    offsets: tuple[tuple[str, str, int], ...]
    eras: tuple[int, ...] = ()  # the era of each (empty: all 0; a moved slot's, M5)
    fence: int | None = None  # as RegisterSubscription's: a deposed primary writes none


@dataclass(frozen=True, slots=True)
class SendSubOk:
    conn: Any
    sid: int
    next_ts: int
    era: int = 0  # the era ``next_ts`` is a ts of (a moved slot, M3)


@dataclass(frozen=True, slots=True)
class SendFetched:
    """The answer to a ``fetch``: ``published`` holds the ``(first ts, wall-clock ms)`` pairs
    that date ``records``; ``purged`` (``skip_purged`` only) the topic's last purged ts when
    the range reached below it."""

    conn: Any
    id: int
    records: list[Record]
    next_ts: int
    published: tuple[tuple[int, int], ...] = ()
    purged: int | None = None


@dataclass(frozen=True, slots=True)
class SendCommitted:
    """The answer to a ``commit``: the subscription's offset now and the commit point."""

    conn: Any
    id: int
    ts: int
    head: int


@dataclass(frozen=True, slots=True)
class SendMeta:
    """Answer ``meta``/``hello`` with ``info``; ``cluster``: add every group's brokers and the
    slot map, read from ZooKeeper by the shell with a deadline (without them on failure)."""

    conn: Any
    info: Mapping[str, Any]
    cluster: bool


@dataclass(frozen=True, slots=True)
class SendSubInfo:
    """The answer to an admin op on a subscription (``subdel``, ``subreset``)."""

    conn: Any
    info: SubInfo


@dataclass(frozen=True, slots=True)
class SendPresence:
    """A presence frame to client ``conn``: the ``members`` answer to a ``presence``
    request, or a ``join``/``leave`` push to one of its subscriptions."""

    conn: Any
    frame: Members | Join | Leave


@dataclass(frozen=True, slots=True)
class SendStats:
    """The answer to ``stats`` (admin, read-only: tritonmq.core.stats)."""

    conn: Any
    stats: StatsReply


@dataclass(frozen=True, slots=True)
class SendSlotInfo:
    """The answer to ``slotmove`` (admin: tritonmq.core.slotadmin), once the move began."""

    conn: Any
    info: SlotInfo


@dataclass(frozen=True, slots=True)
class CloseConn:
    conn: Any
    code: int
    reason: str


# --- replication ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendEntries:
    """An ``append`` of log entries ``start..end`` (as the log holds them now) to every
    link, encoded once; ``start > end`` is a heartbeat carrying the commit point."""

    links: tuple[Any, ...]
    epoch: int
    commit: int
    start: int
    end: int
    sync: bool = False  # the primary waits for fsyncs: followers sync what they get soon (D4)


@dataclass(frozen=True, slots=True)
class SendLeader:
    """The answer to a follower's ``follow``."""

    link: Any
    leader: Leader


@dataclass(frozen=True, slots=True)
class SendDedup:
    """A later page of the ``leader`` answer's dedup state, on ``link``."""

    link: Any
    page: DedupPage


@dataclass(frozen=True, slots=True)
class SendPurge:
    links: tuple[Any, ...]
    purge: Purge


@dataclass(frozen=True, slots=True)
class SendShared:
    """Tell backups which shared-subscription records members hold or acknowledged."""

    links: tuple[Any, ...]
    shared: SharedState


@dataclass(frozen=True, slots=True)
class CloseLink:
    """Send an ``error`` frame (when ``code`` is set) on a replication link, then close it."""

    link: Any
    reason: str
    code: ErrorCode | None = None


@dataclass(frozen=True, slots=True)
class StartFollowing:
    """Open a replication link to ``primary`` and keep it open (reconnecting on a short
    back-off) until StopFollowing; report every connect/failure as LinkEvent and every
    frame received as PrimaryFrame, tagged ``follow_id``. The core answers CONNECTED
    with the ``follow`` frame to send (SendToPrimary)."""

    follow_id: int
    primary: Member


@dataclass(frozen=True, slots=True)
class StopFollowing:
    follow_id: int


@dataclass(frozen=True, slots=True)
class SendToPrimary:
    """``follow`` (the handshake), ``rack`` (everything up to ``ts`` of ``epoch`` is
    appended) or ``sack`` (shared state frame ``seq`` adopted) on the follow link
    ``follow_id``; dropped if that link is not connected."""

    follow_id: int
    frame: Follow | ReplAck | SharedAck


# --- ZooKeeper ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProposeState:
    """Compare-and-set the group state znode at ``state.version`` (-1: create it); answer
    with CasDone(``request``). An UNKNOWN outcome must be reported as such, never retried
    blindly by the shell: the core re-reads (ReadState) and decides again."""

    request: int
    state: GroupState
    reason: str


@dataclass(frozen=True, slots=True)
class ReadState:
    """Re-read members, state and slot map; answer with a ZkView (retry until it succeeds)
    whose ``read`` is ``request``: a read begun after this was asked (a view read before,
    coalesced or cached, may predate a write whose outcome the core must judge)."""

    request: int = 0


@dataclass(frozen=True, slots=True)
class LoadSubscriptions:
    """Read every durable subscription of the topics this group owns; answer with
    SubscriptionsLoaded(``request``) (``found=None`` on failure)."""

    request: int


class Level(enum.IntEnum):
    DEBUG = 10
    INFO = 20
    WARNING = 30
    ERROR = 40


@dataclass(frozen=True, slots=True)
class LogLine:
    level: Level
    message: str


@dataclass(frozen=True, slots=True)
class WriteLog:
    """Append ``ops`` (core/journal.py: what this event changed in the log) to the segment
    files, before performing any other action of the event: what is then acknowledged or
    replicated was handed to the OS first (docs/replication.md D1)."""

    ops: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True, slots=True)
class SyncLog:
    """fsync the segment files soon (a ``synced`` publish waits for it, D4), then report
    Synced; without it they are fsynced every ``fsync_interval_s``."""


@dataclass(frozen=True, slots=True)
class Stopped:
    """A planned stop is complete on the core's side: close the ZooKeeper session, the
    listeners and every connection, then exit."""


# --- slot moves (docs/replication.md M2, M7) ------------------------------------------


class SlotStep(enum.Enum):
    SEAL = "seal"  # the old group's primary ends its era at ``until``
    COMPLETE = "complete"  # the new group's primary, holding the handover, takes the slot


@dataclass(frozen=True, slots=True)
class SlotMoveAction:
    """The actions of a slot move (one class, so a shell without moves refuses them once)."""


@dataclass(frozen=True, slots=True)
class ProposeSlotStep(SlotMoveAction):
    """Apply ``step`` to ``/slots/<slot>`` by CAS (``coord.slots.apply_slot_step``, which
    re-judges a lost race); answered with SlotStepDone."""

    request: int
    slot: int
    step: SlotStep
    until: int | None = None  # SEAL: the seal point


@dataclass(frozen=True, slots=True)
class AskHandover(SlotMoveAction):
    """Ask ``group`` (its primary, else any ISR member) for slot ``slot``'s dedup state up
    to ``until`` over the replication wire; answered with HandoverAnswered."""

    request: int
    slot: int
    group: str
    until: int
    after: int = 0  # the page of pairs above this ts
    # then the earlier eras' uuids forwarded, a page after this (era, ts) (M8)
    earlier: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class BeginSlotMove:
    """An admin's ``slotmove``: read the cluster's groups, then write ``begin_move`` to
    ``/slots/<slot>`` by CAS (:func:`tritonmq.core.slotadmin.begin_move_among`, judged
    again on what ZooKeeper holds); answered with SlotMoveBegun. Any broker does it, as
    `tritonmq slots move` would: the groups' primaries take the move from there (M2)."""

    request: int
    slot: int
    to: str


@dataclass(frozen=True, slots=True)
class SendHandover(SlotMoveAction):
    """Answer a HandoverAsked on ``link`` (the asker closes it)."""

    link: Any
    pairs: HandoverPairs


Action: TypeAlias = (
    SendPubAck
    | SendError
    | Replicate
    | ReplicateDedup
    | ProposeIsr
    | Deliver
    | RegisterSubscription
    | DeleteSubscription
    | StoreOffsets
    | SendSubOk
    | SendFetched
    | SendCommitted
    | SendMeta
    | SendSubInfo
    | SendPresence
    | SendStats
    | SendSlotInfo
    | CloseConn
    | SendEntries
    | SendLeader
    | SendDedup
    | SendPurge
    | SendShared
    | CloseLink
    | StartFollowing
    | StopFollowing
    | SendToPrimary
    | ProposeState
    | ReadState
    | LoadSubscriptions
    | LogLine
    | WriteLog
    | SyncLog
    | Stopped
    | ProposeSlotStep
    | AskHandover
    | SendHandover
    | BeginSlotMove
)
"""Everything the cores return. BrokerCore never returns Replicate, ReplicateDedup or
ProposeIsr (the PrimaryCore's internal requests): it turns them into SendEntries,
SendDedup and ProposeState."""
