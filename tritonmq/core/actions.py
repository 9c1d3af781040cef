"""What the core asks the shell to do. The shell performs them; it decides nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from tritonmq.wire.frames import ErrorCode, Record


@dataclass(frozen=True, slots=True)
class SendPubAck:
    conn: Any
    id: int
    ts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SendError:
    conn: Any
    code: ErrorCode
    message: str
    id: int | None = None


@dataclass(frozen=True, slots=True)
class Replicate:
    """Send log entries ``start..end`` to each of ``followers`` (encode once, send to all)."""

    followers: tuple[str, ...]
    start: int
    end: int


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


@dataclass(frozen=True, slots=True)
class RegisterSubscription:
    """Create ``/subscriptions/<topic>/<name>`` and its offset in ZooKeeper."""

    topic: str
    name: str
    mode: str
    offset: int


@dataclass(frozen=True, slots=True)
class StoreOffsets:
    """Write these (topic, name, offset) to ZooKeeper: one coalesced batch."""

    offsets: tuple[tuple[str, str, int], ...]


Action: TypeAlias = (
    SendPubAck | SendError | Replicate | ProposeIsr | Deliver | RegisterSubscription | StoreOffsets
)
