"""The asyncio shell around the client protocol, with no broker: failures reach the caller."""

from __future__ import annotations

import asyncio

import pytest
from kazoo.exceptions import ConnectionLoss

from tritonmq.client.events import SubscriptionMoved
from tritonmq.client.link import Link
from tritonmq.client.states import ConnState
from tritonmq.errors import ClientClosed, ClientError, PublishTimeout, Unavailable, WrongGroup
from tritonmq.wire.frames import From


async def test_a_group_whose_cluster_read_keeps_failing_fails_calls_instead_of_hanging() -> None:
    """Bug 7: before, a kazoo exception ended the link's task: the subscription then
    waited forever and publishes could only time out, without saying why."""
    reads = 0

    async def resolve() -> list[str]:
        nonlocal reads
        reads += 1
        raise ConnectionLoss()

    link = Link(resolve, group="g1", timeout=1.0)
    link.start()
    try:
        pub = link.publish_nowait("t", b"v", None, None)
        sub = link.new_subscription("t", None, "latest", None, "broadcast")
        with pytest.raises(Unavailable, match="ConnectionLoss"):
            await asyncio.wait_for(sub.__aenter__(), 10)
        with pytest.raises(PublishTimeout, match="ConnectionLoss"):
            await asyncio.wait_for(pub, 10)
        assert reads >= 2  # retried, not given up after the first
        assert link.state is not ConnState.CLOSED
    finally:
        await link.close()
    assert not link._tasks  # every task it started is done


async def test_a_task_that_dies_fails_every_pending_call() -> None:
    async def resolve() -> list[str]:
        await asyncio.Event().wait()  # never answers
        return []

    link = Link(resolve, group="g1")
    link.start()
    pub = link.publish_nowait("t", b"v", None, None)

    async def broken() -> None:
        raise RuntimeError("a bug in the shell")

    link._spawn(broken())
    with pytest.raises(ClientError, match="a bug in the shell"):
        await asyncio.wait_for(pub, 10)
    await link.close()


async def test_close_fails_pending_calls_and_refuses_new_ones() -> None:
    async def resolve() -> list[str]:
        return []

    link = Link(resolve, group="g1")
    link.start()
    pub = link.publish_nowait("t", b"v", None, None)
    await link.close()
    with pytest.raises(ClientClosed):
        await pub
    with pytest.raises(ClientClosed):
        link.publish_nowait("t", b"v", None, None)
    with pytest.raises(TypeError):
        Link(resolve).publish_nowait("t", "text", None, None)  # type: ignore[arg-type]


async def test_a_subscription_its_group_sends_on_moves_to_the_named_groups_link() -> None:
    """A slot move (docs/replication.md M4): the subscription object the application holds
    goes on at the other group's link, from (era, after + 1); with no link to follow it
    ends with WrongGroup."""

    async def never() -> list[str]:
        await asyncio.Event().wait()
        return []

    other = Link(never, group="g2")
    link = Link(never, group="g1", follow=lambda g: other)
    lone = Link(never, group="g1")
    try:
        sub = link.new_subscription("t", None, "latest", None, "broadcast")
        link.add_subscription(sub)
        link._perform(SubscriptionMoved(sub.sid, "g2", 1, 7))
        assert sub._link is other and sub.sid in other._subs and not link._subs
        frame = other.protocol._subs[sub.sid].frame(0.0)
        assert (frame.start, frame.era, frame.resume) == (8, 1, True)
        named = link.new_subscription("t", "audit", "earliest", None, "broadcast")
        link.add_subscription(named)
        link._perform(SubscriptionMoved(named.sid, "g2", None, None))
        again = other.protocol._subs[named.sid].frame(0.0)
        assert (again.start, again.resume) == (From.LATEST, False), "from its offset"
        first = link.new_subscription("t", None, "earliest", None, "broadcast")
        link.add_subscription(first)
        link._perform(SubscriptionMoved(first.sid, "g2", 0, 0, resume=False))
        placing = other.protocol._subs[first.sid].frame(0.0)
        assert (placing.start, placing.era, placing.resume) == (1, 0, False), "no position yet"
        stuck = lone.new_subscription("t", None, "latest", None, "broadcast")
        lone.add_subscription(stuck)
        lone._perform(SubscriptionMoved(stuck.sid, "g2", 1, 7))
        with pytest.raises(WrongGroup):
            await asyncio.wait_for(stuck.__anext__(), 5)
    finally:
        for x in (link, other, lone):
            await x.close()
