"""`Client`'s own decisions, with its links and cluster reads stood in for."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from tritonmq.client.client import Client
from tritonmq.client.types import Ack
from tritonmq.errors import WrongGroup


class MovingLink:
    """Refuses the first batch as the old group of a moving slot does, then acknowledges."""

    def __init__(self) -> None:
        self.calls = 0

    def publish_batch(
        self, topic: str, items: list[Any], durability: str = ""
    ) -> asyncio.Future[list[Ack]]:
        self.calls += 1
        fut: asyncio.Future[list[Ack]] = asyncio.get_running_loop().create_future()
        if self.calls == 1:
            fut.set_exception(WrongGroup("sealed", group="g1"))
        else:
            fut.set_result([Ack(topic, 7, "g1")])
        return fut


async def test_a_re_route_whose_cluster_read_fails_keeps_the_view_and_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen in test_slot_moves' rebalance under load: the re-route's ZooKeeper read raised
    kazoo's ConnectionLoss, and the publisher got it instead of its ack."""
    client = Client("zk://127.0.0.1:1")
    link = MovingLink()

    async def lost() -> None:
        raise ConnectionLoss()

    monkeypatch.setattr(client, "refresh", lost)
    monkeypatch.setattr(client, "_group_of", lambda topic: "g1")
    monkeypatch.setattr(client, "_link", lambda group: link)
    assert await client.publish("t", b"v") == Ack("t", 7, "g1")
    assert link.calls == 2
