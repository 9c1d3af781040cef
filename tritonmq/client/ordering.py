"""Each topic's publishes reach the broker in call order, across slot moves.

A publish goes to the group that owns its topic's slot; while a slot moves, a call may
be refused with ``WRONG_GROUP`` and re-routed while later calls are already on the wire
or about to go to the new group. One group's link keeps its calls in order (one
connection, resent in id order), so the only rule needed is this: a call is handed to
group G's link only once every earlier unfinished call of its topic is on G's link too.
A call being re-routed is on no link, so everything after it waits for it. (The broker
holds back, on that connection, the batches behind a refused one until the producer
resends a refused one: docs/protocol.md, "A topic whose slot moved".)
"""

from __future__ import annotations

import asyncio
from collections import Counter


class TopicOrder:
    """The unfinished publish calls of one topic, in call order, and where each is."""

    def __init__(self) -> None:
        self._next = 0
        self._at: dict[int, str | None] = {}  # call -> the group's link it is on (None: none)
        self._count: Counter[str | None] = Counter()
        self._waiting = 0
        self._wake = asyncio.Event()

    def __bool__(self) -> bool:
        return bool(self._at)

    def enter(self) -> int:
        """A new call, after every call so far; on no link yet."""
        n = self._next
        self._next += 1
        self._move(n, None)
        return n

    async def turn(self, call: int, group: str) -> None:
        """Wait until every earlier unfinished call is on ``group``'s link; ``call`` is then
        on it (the caller hands it to that link before it awaits anything)."""
        while not self._may_go(call, group):
            self._waiting += 1
            try:
                await self._wake.wait()
            finally:
                self._waiting -= 1
        self._move(call, group)

    def off(self, call: int) -> None:
        """``call`` left its link (refused there, to be re-routed)."""
        self._move(call, None)

    def leave(self, call: int) -> None:
        """``call`` is finished: acknowledged or failed for good."""
        self._count[self._at.pop(call)] -= 1
        self._changed()

    def _may_go(self, call: int, group: str) -> bool:
        others = len(self._at) - 1
        if self._count[group] + (self._at[call] != group) - 1 >= others:
            return True  # the common case: every other call is on this link already
        return all(g == group for n, g in self._at.items() if n < call)

    def _move(self, call: int, group: str | None) -> None:
        if call in self._at:
            self._count[self._at[call]] -= 1
        self._at[call] = group
        self._count[group] += 1
        self._changed()

    def _changed(self) -> None:
        if self._waiting:
            self._wake.set()
            self._wake = asyncio.Event()
