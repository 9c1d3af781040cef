"""What goes into the client protocol (events) and what comes out (actions).

Frozen, slotted dataclasses, as the wire's frames are; see :mod:`tritonmq.client.protocol`
for the rules that connect them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from tritonmq.errors import TritonError
from tritonmq.wire.frames import (
    BrokerFrame,
    ClientFrame,
    Commit,
    Committed,
    Fetch,
    Fetched,
    From,
    Join,
    Leave,
    Members,
    Meta,
    MetaReply,
    Presence,
    PubRecord,
    Record,
    Stats,
    StatsReply,
    SubDelete,
    SubInfo,
    SubReset,
)

# --- events (inputs) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Publish:
    """Records with their uuids (made by the caller); ``ticket`` names the answer."""

    ticket: int
    topic: str
    records: Sequence[PubRecord]
    durability: str = ""  # when the broker acknowledges them ("": its default; D4)


@dataclass(frozen=True, slots=True)
class Request:
    """A request answered once (``fetch``, ``commit``, ``meta``); the protocol gives it its
    wire ``id`` (the frame's own is ignored). ``ticket`` names the answer."""

    ticket: int
    frame: Fetch | Commit | Meta | SubDelete | SubReset | Presence | Stats


@dataclass(frozen=True, slots=True)
class SetToken:
    """The token to present in ``hello`` from now on (rule 10); None: none."""

    token: str | None


@dataclass(frozen=True, slots=True)
class Subscribe:
    sid: int
    topic: str
    name: str | None
    start: From | int
    window: int | None = None
    mode: str = "broadcast"
    # shared: this member's id for its whole life (the shell picks it at random; "" : the
    # protocol derives one from its ``rand``)
    member: str = ""
    presence: bool = False  # a member of the topic's presence, told of the others (C12)
    info: str = ""  # what it says about itself there
    # a subscription moved here from another group (M4): ``start`` is a ts of ``era``,
    # resumed (resume: true) when it is its position, a new start when it had none yet
    era: int = 0
    resume: bool = False


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    sid: int


@dataclass(frozen=True, slots=True)
class AckRecord:
    sid: int
    ts: int
    era: int = 0  # the era the record was delivered in: an ack of an era left behind is dropped


@dataclass(frozen=True, slots=True)
class Resolved:
    urls: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResolveFailed:
    error: str


@dataclass(frozen=True, slots=True)
class TransportOpened:
    conn: int


@dataclass(frozen=True, slots=True)
class TransportFailed:
    """``tls``: the TLS handshake failed (a certificate that does not verify), not the network."""

    conn: int
    error: str
    tls: bool = False


@dataclass(frozen=True, slots=True)
class TransportClosed:
    conn: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class FrameReceived:
    conn: int
    frame: BrokerFrame


@dataclass(frozen=True, slots=True)
class EpochSeen:
    """The group's epoch and primary as ZooKeeper or another broker tells it (None: unknown)."""

    epoch: int | None
    primary_url: str | None


@dataclass(frozen=True, slots=True)
class Tick:
    pass


@dataclass(frozen=True, slots=True)
class Close:
    pass


Event: TypeAlias = (
    Publish
    | Request
    | Subscribe
    | Unsubscribe
    | AckRecord
    | Resolved
    | ResolveFailed
    | TransportOpened
    | TransportFailed
    | TransportClosed
    | FrameReceived
    | EpochSeen
    | SetToken
    | Tick
    | Close
)


# --- actions (outputs) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    frame: ClientFrame


@dataclass(frozen=True, slots=True)
class Connect:
    conn: int
    url: str


@dataclass(frozen=True, slots=True)
class Disconnect:
    conn: int


@dataclass(frozen=True, slots=True)
class Resolve:
    pass


@dataclass(frozen=True, slots=True)
class Probe:
    """Ask the group's brokers other than ``exclude`` for its epoch and primary."""

    exclude: str


@dataclass(frozen=True, slots=True)
class PublishDone:
    ticket: int
    ts: tuple[int, ...]
    group: str
    eras: tuple[int, ...] = ()  # per ts when the broker said them (a slot that moved)


@dataclass(frozen=True, slots=True)
class PublishFailed:
    ticket: int
    error: TritonError


@dataclass(frozen=True, slots=True)
class Answered:
    ticket: int
    frame: Fetched | Committed | MetaReply | SubInfo | Members | StatsReply


@dataclass(frozen=True, slots=True)
class RequestFailed:
    ticket: int
    error: TritonError


@dataclass(frozen=True, slots=True)
class DeliverRecords:
    sid: int
    records: Sequence[Record]
    era: int = 0  # of a moved slot (docs/replication.md M3)


@dataclass(frozen=True, slots=True)
class PresenceChanged:
    """A ``join`` or ``leave`` for subscription ``sid`` (one with presence)."""

    sid: int
    frame: Join | Leave


@dataclass(frozen=True, slots=True)
class Subscribed:
    sid: int
    next: int


@dataclass(frozen=True, slots=True)
class SubscriptionFailed:
    sid: int
    error: TritonError


@dataclass(frozen=True, slots=True)
class SubscriptionMoved:
    """Subscription ``sid`` goes on at ``group`` (a slot move, M4): from ``after`` + 1 of
    ``era`` when they are given, else from where it started (it had no position yet).
    ``resume``: it had a position there (the group tells it of records purged since);
    False: it was still finding its start (``earliest`` passing eras nothing is left of)."""

    sid: int
    group: str
    era: int | None
    after: int | None
    resume: bool = True


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Send a :class:`Tick` at ``at`` (the protocol's clock), or earlier."""

    at: float


Action: TypeAlias = (
    Send
    | Connect
    | Disconnect
    | Resolve
    | Probe
    | PublishDone
    | PublishFailed
    | Answered
    | RequestFailed
    | DeliverRecords
    | PresenceChanged
    | Subscribed
    | SubscriptionFailed
    | SubscriptionMoved
    | WakeAt
)
