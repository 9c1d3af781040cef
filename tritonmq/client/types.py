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
