"""What the client hands to applications."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Ack:
    """A record was accepted by the group's primary and replicated to every in-sync backup."""

    topic: str
    ts: int
    group: str
    # The era of the topic's slot the record was written in, when the broker said it: only
    # for a slot that moved, when the record is not ``group``'s of the current era (a retry
    # answered from the slot's previous group: ``ts`` is that group's; docs/protocol.md §6)
    era: int | None = None


@dataclass(frozen=True, slots=True)
class FetchedRecord:
    """A record read by :meth:`Client.fetch`. ``published``: wall-clock ms at which the
    primary accepted its batch (None if the broker did not say)."""

    topic: str
    ts: int
    uuid: bytes
    key: bytes | None
    value: bytes
    headers: dict[str, Any] | None
    published: int | None


@dataclass(frozen=True, slots=True)
class Fetched:
    """The raw answer to a fetch, for bulk readers (Spark): record tuples
    ``(ts, uuid, key, value, headers)``, ``(first_ts, ms)`` pairs that date them, where
    to continue, and (``skip_purged``) the last purged ts of the topic if the range
    reached below it."""

    records: list[tuple[int, bytes, bytes | None, bytes, dict[str, Any] | None]]
    published: list[tuple[int, int]]
    next: int
    purged: int | None


class Message:
    """One delivered record. ``await msg.ack()`` acknowledges it and everything before it."""

    __slots__ = ("topic", "ts", "uuid", "key", "value", "headers", "_ack")

    def __init__(
        self,
        topic: str,
        ts: int,
        uuid: bytes,
        key: bytes | None,
        value: bytes,
        headers: dict[str, Any] | None,
        ack: Callable[[int], Awaitable[None]],
    ) -> None:
        self.topic = topic
        self.ts = ts
        self.uuid = uuid
        self.key = key
        self.value = value
        self.headers = headers
        self._ack = ack

    async def ack(self) -> None:
        await self._ack(self.ts)

    def __repr__(self) -> str:
        return f"Message(topic={self.topic!r}, ts={self.ts}, value={self.value[:32]!r})"
