"""Frames of the ``tritonmq.v1`` protocol as frozen, slotted dataclasses.

A record travels as a plain tuple, not an object, because Python's cost is per
object: ``PubRecord = (uuid, key, value, headers)`` from a producer and
``Record = (ts, uuid, key, value, headers)`` once the primary has stamped it.
A replicated log entry is ``(topic, Record)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, TypeAlias

PubRecord: TypeAlias = tuple[bytes, bytes | None, bytes, dict[str, Any] | None]
Record: TypeAlias = tuple[int, bytes, bytes | None, bytes, dict[str, Any] | None]
Entry: TypeAlias = tuple[str, Record]

SUBPROTOCOL = "tritonmq.v1"
REPL_SUBPROTOCOL = "tritonmq.repl.v1"


class ErrorCode(enum.StrEnum):
    """Codes carried by ``error`` frames; see docs/protocol.md."""

    BAD_FRAME = "BAD_FRAME"
    TOO_LARGE = "TOO_LARGE"
    UNKNOWN_OP = "UNKNOWN_OP"
    BAD_REQUEST = "BAD_REQUEST"
    NOT_PRIMARY = "NOT_PRIMARY"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
    UNAVAILABLE = "UNAVAILABLE"
    STALE_EPOCH = "STALE_EPOCH"
    WRONG_GROUP = "WRONG_GROUP"
    FULL = "FULL"
    PURGED = "PURGED"  # the records asked for were purged: a reader would skip them
    INTERNAL = "INTERNAL"
    # --- security (docs/security.md) ---
    UNAUTHENTICATED = "UNAUTHENTICATED"  # no token where one is required, or an invalid one
    TOKEN_EXPIRED = "TOKEN_EXPIRED"  # the token's exp has passed: refresh it with `hello`
    FORBIDDEN = "FORBIDDEN"  # the principal may not do this (claims, or not the owner)
    # --- bounds (config/broker.toml) ---
    LIMIT = "LIMIT"  # a per-connection or per-group cap was reached; the message names it

    @property
    def retriable(self) -> bool:
        """Whether the same request may succeed later: defined here and nowhere else."""
        return self in _RETRIABLE

    @classmethod
    def known(cls, code: str) -> ErrorCode | None:
        """The code named ``code``, or None for one this version does not know."""
        try:
            return cls(code)
        except ValueError:
            return None


_RETRIABLE = {
    ErrorCode.NOT_PRIMARY,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.UNAVAILABLE,
    ErrorCode.WRONG_GROUP,
    ErrorCode.FULL,
}


class From(enum.StrEnum):
    LATEST = "latest"
    EARLIEST = "earliest"


# --- client -> broker -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    client: str = ""
    token: str | None = None  # a JWT (docs/security.md); a new one refreshes the connection's


@dataclass(frozen=True, slots=True)
class Pub:
    id: int
    topic: str
    records: list[PubRecord]
    # when it is acknowledged (docs/replication.md D4): "memory", "written", "synced";
    # "": the broker's default (its `durability` setting)
    durability: str = ""


DURABILITY_LEVELS = ("memory", "written", "synced")


@dataclass(frozen=True, slots=True)
class Sub:
    sid: int
    topic: str
    subscription: str | None
    start: From | int
    window: int | None = None
    mode: str = "broadcast"  # or "shared" (needs a subscription name)
    resume: bool = False  # a reconnect: move the position, keep the durable ack point
    # shared mode, on a reconnect: ts this member acknowledged recently, so a new primary
    # does not hand them out again (its stored offset is only the low watermark)
    acked: tuple[int, ...] = ()
    # ... and ts it handed to its application and has not acknowledged yet: a new primary
    # leaves them with this member instead of handing them to another
    held: tuple[int, ...] = ()
    # shared mode: this member's own id, the same across its reconnects (client-chosen), so a
    # new primary keeps what the old one handed this member for it ("" : none given)
    member: str = ""
    # presence (docs/protocol.md "Presence"): list this subscription among the topic's
    # members and push it the others' `join`/`leave`; ``info``: what it says about itself
    presence: bool = False
    info: str = ""
    # the era of ``start`` when it is a ts (a moved slot's position is (era, ts),
    # docs/replication.md M3; absent: 0)
    era: int = 0


@dataclass(frozen=True, slots=True)
class Ack:
    """Cumulative for broadcast subscriptions; for shared ones, ``ts`` and each of ``many``."""

    sid: int
    ts: int
    many: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Nack:
    sid: int
    ts: int


@dataclass(frozen=True, slots=True)
class Unsub:
    sid: int


@dataclass(frozen=True, slots=True)
class Fetch:
    id: int
    topic: str
    start: int
    end: int
    max: int
    skip_purged: bool = False  # False: records of the range already purged are a PURGED error


@dataclass(frozen=True, slots=True)
class Commit:
    """Acknowledge a durable subscription up to ``ts`` without consuming (Spark's commit).

    Registers the subscription if it is missing; never lowers its offset. ``group``: the
    group whose ``ts`` it is, when the committer says so (a moved slot's earlier era); None:
    the topic's owner's, and a group that does not own it answers WRONG_GROUP."""

    id: int
    topic: str
    subscription: str
    ts: int
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Meta:
    id: int


@dataclass(frozen=True, slots=True)
class SubDelete:
    """Admin: delete durable subscription ``subscription`` of ``topic`` (its offset too).
    ``execute`` False is a dry run: the answer says what would change."""

    id: int
    topic: str
    subscription: str
    execute: bool = False


@dataclass(frozen=True, slots=True)
class SubReset:
    """Admin: move a durable subscription so that its next record is the first retained
    (``earliest``), the next one published (``latest``) or the first with ts >= ``to``."""

    id: int
    topic: str
    subscription: str
    to: From | int
    execute: bool = False


@dataclass(frozen=True, slots=True)
class Stats:
    """Admin, read-only: what this broker holds and serves now (answered by ``stats``);
    ``topic``: only that topic's figures ("" : every topic)."""

    id: int
    topic: str = ""


@dataclass(frozen=True, slots=True)
class SlotMove:
    """Admin: begin moving slot ``slot`` to group ``to`` (docs/replication.md M2.1), as
    `tritonmq slots move` does; the two groups' primaries do the rest. Answered with
    ``slotinfo`` once the move began (not once it completed)."""

    id: int
    slot: int
    to: str


# --- broker -> broker (replication) ----------------------------------------


@dataclass(frozen=True, slots=True)
class Follow:
    """A backup asks the primary for the log from the point where their histories agree."""

    group: str
    id: str
    boot: str
    epoch: int
    last_ts: int
    epochs: list[tuple[int, int]]
    # HMAC-SHA256 of the primary's challenge nonce and who this is, keyed with the
    # cluster secret (docs/protocol.md §10); empty from a broker without a secret
    proof: bytes = b""
    # (topic, ts): the newest record of each topic the backup purged (under this primary or
    # an earlier one); a primary that still holds records it purged purges them too (S3)
    purged: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Challenge:
    """The primary's first frame on a replication link: the nonce a ``follow`` must sign."""

    nonce: bytes


@dataclass(frozen=True, slots=True)
class Append:
    """Entries from ``start`` on; a ``None`` entry is a record already purged.

    ``published`` holds the ``(first_ts, wall-clock ms)`` pairs of the batches these
    entries belong to, so every replica reports the same accept time."""

    epoch: int
    commit: int
    start: int
    entries: list[Entry | None]
    published: tuple[tuple[int, int], ...] = ()
    sync: bool = False  # the primary waits for followers' fsyncs: sync soon, ack `synced` (D4)


@dataclass(frozen=True, slots=True)
class Purge:
    """Drop ``topic``'s records up to ``upto`` for each pair; end dedup up to ``forget``."""

    epoch: int
    topics: list[tuple[str, int]]
    forget: int


@dataclass(frozen=True, slots=True)
class ReplAck:
    epoch: int
    ts: int
    synced: int = 0  # the follower's log is fsynced up to here (D4)


@dataclass(frozen=True, slots=True)
class HandoverAsk:
    """A moving slot's new primary asks a broker of the old group (on its replication
    listener, after its challenge) for the dedup state of slot ``slot`` up to the seal
    point ``until`` (docs/replication.md M2.3). ``proof`` signs the challenge, who asks
    and what, with the cluster secret (empty from a broker without one)."""

    group: str  # the asking broker's group (the slot's new group)
    id: str
    boot: str
    slot: int
    until: int
    proof: bytes = b""
    # a page: the pairs above this ts, as many as the answerer sends at once (None: all of
    # them in one answer, as an earlier version asked; millions held both loops for seconds)
    after: int | None = None
    # the earlier eras' uuids the answerer forwards (M8) are taken a page at a time too:
    # those after this (era, ts), once the slot's own pairs are all handed (None: whole, on
    # the last page, as an earlier version asked)
    earlier: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class HandoverPairs:
    """The answer to ``handover``: ``(ts, uuid)`` of the slot's records up to ``until``
    that a retry may still name (``core.handover.handover_pairs``); asked for a page,
    those above ``after``, ascending, and ``more`` when a later page follows."""

    slot: int
    until: int
    pairs: tuple[tuple[int, bytes], ...]
    after: int | None = None
    more: bool = False
    # (era, pairs) of earlier eras this group was itself handed over and still
    # deduplicates, forwarded: a retry straddling two moves is still recognised. Whole on
    # the last page, or a page at a time after the slot's own when the ask says ``earlier``
    earlier: tuple[tuple[int, tuple[tuple[int, bytes], ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Presence:
    """Who is subscribed to ``topic`` with presence right now (answered with ``members``)."""

    id: int
    topic: str


ClientFrame: TypeAlias = (
    Hello
    | Pub
    | Sub
    | Ack
    | Nack
    | Unsub
    | Fetch
    | Meta
    | Commit
    | SubDelete
    | SubReset
    | Presence
    | Stats
    | SlotMove
)


# --- broker -> client -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PubAck:
    """One ts per record of batch ``id``, in the batch's order (dedup may give older ts)."""

    id: int
    ts: tuple[int, ...]
    group: str
    # per record the era of the slot it was written in, only when one is not the slot's
    # current era (a retry answered from the old group's records, replication.md M8)
    eras: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Deliver:
    """Committed records of subscription ``sid``; ascending ts for broadcast."""

    sid: int
    topic: str
    records: tuple[Record, ...]
    era: int = 0  # the era of a moved slot the records were written in (absent: 0, M3)


@dataclass(frozen=True, slots=True)
class SubOk:
    sid: int
    next: int
    era: int = 0  # the era ``next`` is a ts of (absent: 0, M3)


@dataclass(frozen=True, slots=True)
class Fetched:
    """The answer to ``fetch``. ``published``: ``(first ts, wall-clock ms)`` pairs dating the
    records; ``purged`` (``skip_purged`` only): the topic's last purged ts, when the range
    reached below it."""

    id: int
    records: tuple[Record, ...]
    next: int
    published: tuple[tuple[int, int], ...] = ()
    purged: int | None = None


@dataclass(frozen=True, slots=True)
class Committed:
    """The answer to ``commit``: the subscription's offset now, and the group's commit point."""

    id: int
    ts: int
    head: int


@dataclass(frozen=True, slots=True)
class SubInfo:
    """The answer to ``subdel``/``subreset``: the subscription as it is (``offset``), what
    the op does (``to``: the new offset of a reset), and whether it was ``executed``."""

    id: int
    topic: str
    subscription: str
    mode: str
    owner: str  # "" : the anonymous principal
    offset: int
    consumers: int  # connected consumers (an op is refused while there are any)
    action: str  # "delete" or "reset"
    to: int | None = None
    executed: bool = False


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """The answer to ``slotmove``: slot ``slot`` as the broker wrote it, ``owner`` (still
    the writer of era ``era``) and ``state`` ("moving") on its way to group ``to``."""

    id: int
    slot: int
    owner: str
    era: int
    state: str
    to: str


@dataclass(frozen=True, slots=True)
class TopicStats:
    """One topic in a ``stats`` answer: what the broker retains of it and who reads it."""

    topic: str
    records: int  # retained records
    bytes: int  # their wire size (§2 sizes)
    first_ts: int  # oldest retained ts (0: none retained)
    last_ts: int  # newest retained ts (0: none retained)
    last_ms: int | None  # wall-clock ms at which last_ts was accepted (None: not known)
    rate: float  # records/s this broker accepted for it as primary, over the last seconds
    consumers: int  # consumers connected to it here, durable or not


@dataclass(frozen=True, slots=True)
class SubStats:
    """One durable subscription in a ``stats`` answer (a primary's only)."""

    topic: str
    subscription: str
    mode: str  # "broadcast" or "shared"
    offset: int  # everything up to it acknowledged, as this primary knows it
    stored: int | None  # the offset ZooKeeper holds (None: not registered yet)
    lag: int  # committed records of the topic after ``offset``
    lag_ms: int | None  # how long the oldest of them has waited (None: not known)
    consumers: int  # consumers connected to it on this primary


@dataclass(frozen=True, slots=True)
class StatsReply:
    """The answer to ``stats``: this broker's role and log, its topics and (a primary's)
    durable subscriptions. At most ``STATS_MAX_ITEMS`` of each; ``more_*``: left out."""

    id: int
    group: str
    broker: str
    role: str  # "primary" or "backup"
    epoch: int
    commit: int
    records: int
    bytes: int  # what the retained records cost in memory (what max_bytes bounds)
    max_bytes: int
    rate: float  # records/s the group accepted (this broker as primary), last seconds
    wall_ms: int  # the broker's clock when it answered: lag_ms is judged by it
    topics: tuple[TopicStats, ...] = ()
    subscriptions: tuple[SubStats, ...] = ()
    more_topics: int = 0
    more_subscriptions: int = 0


STATS_MAX_ITEMS = 10_000  # topics (most bytes first) and subscriptions in one answer


@dataclass(frozen=True, slots=True)
class MetaReply:
    """The answer to ``hello`` and ``meta``: who this broker is and where its primary is.

    ``groups`` and ``slots`` (the cluster view) come only with ``meta``.
    """

    id: int
    group: str
    broker: str
    role: str  # "primary" or "backup"
    epoch: int = 0
    primary: str | None = None
    primary_url: str | None = None
    isr: tuple[str, ...] = ()
    members: dict[str, str] = field(default_factory=dict)
    bytes: int = 0
    records: int = 0
    groups: dict[str, dict[str, Any]] | None = None
    slots: dict[str, Any] | None = None
    commit: int = 0  # the group's commit point as this broker knows it
    topics: tuple[str, ...] | None = None  # ``meta`` only: the topics this broker holds


@dataclass(frozen=True, slots=True)
class Error:
    """An ``error`` frame. ``code`` is an :class:`ErrorCode` or, from a newer broker, a string
    this client does not know (then ``retriable`` as sent decides)."""

    code: ErrorCode | str
    message: str
    retriable: bool
    id: int | None = None
    sid: int | None = None
    primary: str | None = None
    group: str | None = None
    first: int | None = None  # PURGED: the missing range, when the broker says it
    last: int | None = None
    # WRONG_GROUP of a subscription whose era ended (M4): go on at ``group`` in ``era``
    # after ``after`` (that group's ts)
    era: int | None = None
    after: int | None = None

    @staticmethod
    def of(
        code: ErrorCode,
        message: str,
        *,
        id: int | None = None,
        sid: int | None = None,
        primary: str | None = None,
        group: str | None = None,
        first: int | None = None,
        last: int | None = None,
        era: int | None = None,
        after: int | None = None,
    ) -> Error:
        """An error whose ``retriable`` flag comes from its code (the one definition)."""
        return Error(
            code, message, code.retriable, id, sid, primary, group, first, last, era, after
        )


@dataclass(frozen=True, slots=True)
class PresenceMember:
    """One subscription with presence: ``client`` the id its primary gave it (unique on that
    primary; a new one after a failover), ``user`` its connection's token subject (""
    anonymous), ``info`` what the client said about itself in its ``sub``."""

    client: str
    user: str
    info: str


@dataclass(frozen=True, slots=True)
class Members:
    """The answer to ``presence``: every member of ``topic`` on its primary, oldest first."""

    id: int
    topic: str
    members: tuple[PresenceMember, ...]


@dataclass(frozen=True, slots=True)
class Join:
    """``member`` subscribed to ``topic`` with presence; pushed to subscription ``sid``."""

    sid: int
    topic: str
    member: PresenceMember


@dataclass(frozen=True, slots=True)
class Leave:
    """``member`` left ``topic`` (unsub, or its connection closed); pushed to ``sid``."""

    sid: int
    topic: str
    member: PresenceMember


BrokerFrame: TypeAlias = (
    PubAck
    | Deliver
    | SubOk
    | Fetched
    | Committed
    | MetaReply
    | Error
    | SubInfo
    | Members
    | Join
    | Leave
    | StatsReply
    | SlotInfo
)


@dataclass(frozen=True, slots=True)
class Leader:
    """The primary's answer to ``Follow``: cut your log after ``truncate_to``, then take mine."""

    epoch: int
    truncate_to: int
    epochs: list[tuple[int, int]]
    reset: bool = False  # the follower lacks what the primary has purged: start over there
    # (ts, uuid, slot) of purged records after ``truncate_to`` (all of them on a reset)
    # whose uuids still deduplicate: a follower that never saw them must still recognise
    # a retry, and hand over only a moving slot's (slot -1: purged before the primary knew
    # the slot count; every handover carries those).
    dedup: tuple[tuple[int, bytes, int], ...] = ()
    # (topic, ts): the newest record of each topic the primary purged. A follower that
    # catches up over purged entries (``None``) never learns their topics otherwise, and
    # once elected would let a reader resuming below them skip them silently (S6)
    purged: tuple[tuple[str, int], ...] = ()
    # ``dedup`` is the first page: ``dedup`` frames follow, each acknowledged, before any entry
    more: bool = False


@dataclass(frozen=True, slots=True)
class DedupPage:
    """A later page of the ``leader`` answer's ``dedup`` (millions of uuids in one frame
    held the primary's event loop for seconds); ``more``: another follows, once this one
    is acknowledged (a ``rack`` of the follower's last ts)."""

    epoch: int
    dedup: tuple[tuple[int, bytes, int], ...]
    more: bool = False


# ``(first ts, last ts)``: every record of one topic with a ts in that range
TsRanges: TypeAlias = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class SharedSub:
    """One shared subscription as its primary knows it, for the backup that may succeed it.

    Every record of ``topic`` up to ``offset`` is acknowledged. Below ``cursor``, a record
    is held by the member ``held`` names (``""``: a member that gave no id), ``free``
    (acknowledged by nobody, held by nobody: to be handed out), or else acknowledged. At
    or above ``cursor``, only those in ``ahead`` are acknowledged and those in ``held`` out;
    the rest were never handed out. ``members``: the ids the primary waits for or serves.
    ``era``: the moved slot's era these ts are of (M5); a new primary restores the state
    only for the era ZooKeeper's offset is at (sent only when not 0).
    """

    topic: str
    name: str
    offset: int
    cursor: int
    held: tuple[tuple[str, TsRanges], ...]
    free: TsRanges
    ahead: TsRanges
    members: tuple[str, ...]
    era: int = 0


@dataclass(frozen=True, slots=True)
class SharedState:
    """The primary's shared subscriptions, sent to its backups whenever they change: a new
    primary then hands out nothing a member holds or acknowledged. ``seq`` grows with every
    frame a primary sends; a backup answers it with :class:`SharedAck`."""

    epoch: int
    subs: tuple[SharedSub, ...]
    seq: int = 0


@dataclass(frozen=True, slots=True)
class SharedAck:
    """A backup has the primary's shared state up to frame ``seq``: records that frame says
    a member holds may go to it (replication.md S8)."""

    epoch: int
    seq: int


ReplFrame: TypeAlias = (
    Follow
    | Append
    | ReplAck
    | SharedAck
    | Leader
    | DedupPage
    | Purge
    | SharedState
    | Challenge
    | HandoverAsk
    | HandoverPairs
)

# The broker -> client frame types, for codecs that tell the two directions apart.
BROKER_FRAMES = (
    PubAck,
    Deliver,
    SubOk,
    Fetched,
    Committed,
    MetaReply,
    Error,
    SubInfo,
    Members,
    Join,
    Leave,
    StatsReply,
    SlotInfo,
)
