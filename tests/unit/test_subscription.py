"""The application's side of a subscription: records in order, then the error that ended it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tritonmq.client.subscription import PresenceOptions, Subscription
from tritonmq.errors import Purged
from tritonmq.wire.frames import Join, Leave, PresenceMember


class FakeLink:
    def __init__(self) -> None:
        self.acked: list[int] = []
        self.subs: list[Subscription] = []

    def add_subscription(self, sub: Subscription) -> None:
        self.subs.append(sub)
        sub.on_subok(1)

    def remove_subscription(self, sub: Subscription) -> None:
        self.subs.remove(sub)

    def ack(self, sub: Subscription, ts: int) -> None:
        self.acked.append(ts)


async def test_purged_is_raised_after_the_records_received_before_it() -> None:
    link: Any = FakeLink()
    async with Subscription(link, 1, "t", None, "latest", None) as sub:
        sub.on_records([(1, b"u1", None, b"a", None), (2, b"u2", None, b"b", None)])
        sub.fail(Purged("3..9 are gone", first=3, last=9))
        first = await sub.get(timeout=1)
        await first.ack()
        assert (await sub.get(timeout=1)).value == b"b"
        with pytest.raises(Purged) as e:
            await sub.get(timeout=1)
        assert (e.value.first, e.value.last) == (3, 9)
    assert link.acked == [1] and link.subs == []


def test_joins_and_leaves_reach_their_callbacks_and_a_failing_one_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[tuple[str, str]] = []

    def on_join(m: PresenceMember) -> None:
        seen.append(("join", m.info))
        if m.info == "Mallory":
            raise ValueError("the application's bug")

    opts = PresenceOptions("Alice", on_join, lambda m: seen.append(("leave", m.info)))
    sub = Subscription(FakeLink(), 1, "room", None, "latest", None, presence=opts)  # type: ignore[arg-type]
    bob, mallory = PresenceMember("b1.2", "", "Bob"), PresenceMember("b1.3", "", "Mallory")
    sub.on_presence(Join(1, "room", bob))
    sub.on_presence(Join(1, "room", mallory))  # raises in the callback: logged, not raised
    sub.on_presence(Leave(1, "room", bob))
    assert seen == [("join", "Bob"), ("join", "Mallory"), ("leave", "Bob")]
    assert "presence callback" in caplog.text
    Subscription(FakeLink(), 2, "room", None, "latest", None).on_presence(Join(2, "room", bob))


async def test_a_get_cancelled_in_the_turn_its_message_arrives_is_cancelled() -> None:
    """Python 3.11's ``asyncio.wait_for`` returns the result of an inner call that ended in
    the loop turn its caller was cancelled in, and the cancellation is lost: a consumer
    loop of a task cancelled then (asyncio.run's answer to Ctrl-C) ran on for good. The
    likely cause of the one CI run where ``top`` and ``chaos`` hung after Ctrl-C."""
    link: Any = FakeLink()
    async with Subscription(link, 1, "t", None, "latest", None) as sub:
        got: list[bytes] = []

        async def consume() -> None:
            while True:
                got.append((await sub.get(timeout=5)).value)

        task = asyncio.create_task(consume())
        while not sub._ready._waiters:  # the consumer waits in get()
            await asyncio.sleep(0)

        def arrive_and_cancel() -> None:  # one turn: the record, then the Ctrl-C
            sub.on_records([(1, b"u1", None, b"a", None)])
            task.cancel()

        asyncio.get_running_loop().call_soon(arrive_and_cancel)
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(5):
                await task
        assert task.cancelled()
