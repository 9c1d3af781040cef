"""The application's side of a subscription: records in order, then the error that ended it."""

from __future__ import annotations

from typing import Any

import pytest

from tritonmq.client.subscription import Subscription
from tritonmq.errors import Purged


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
