"""Each topic's publishes reach the broker in call order across slot moves."""

from __future__ import annotations

import asyncio

from tritonmq.client.ordering import TopicOrder


async def test_calls_on_one_group_never_wait_and_a_later_one_waits_for_an_unplaced_one() -> None:
    order = TopicOrder()
    for _ in range(3):  # as `Client._publish` does: enter, then at once its turn
        await asyncio.wait_for(order.turn(order.enter(), "g1"), 1)
    unplaced, later = order.enter(), order.enter()
    waiting = asyncio.create_task(order.turn(later, "g1"))
    await asyncio.sleep(0)
    assert not waiting.done(), "an earlier call on no link yet goes first"
    await order.turn(unplaced, "g1")
    await asyncio.wait_for(waiting, 1)


async def test_a_later_call_waits_for_an_earlier_one_being_re_routed() -> None:
    """Seed 116's shape: call 1 was refused at g1 and is being re-routed; call 2 (refused
    behind it, or new) must not reach g2 before it."""
    order = TopicOrder()
    first, second = order.enter(), order.enter()
    await order.turn(first, "g1")
    await order.turn(second, "g1")
    order.off(first)  # refused: being re-routed
    order.off(second)
    went: list[str] = []

    async def go(call: int, group: str, name: str) -> None:
        await order.turn(call, group)
        went.append(name)

    later = asyncio.create_task(go(second, "g2", "second"))
    third = order.enter()
    newer = asyncio.create_task(go(third, "g2", "third"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert went == [], "nothing goes while the first call is on no link"
    await order.turn(first, "g2")
    await asyncio.wait_for(asyncio.gather(later, newer), 1)
    assert went == ["second", "third"]


async def test_a_call_waits_until_earlier_ones_on_another_group_finish() -> None:
    order = TopicOrder()
    first, second = order.enter(), order.enter()
    await order.turn(first, "g1")
    waiting = asyncio.create_task(order.turn(second, "g2"))
    await asyncio.sleep(0)
    assert not waiting.done(), "the first is still on g1's link"
    order.leave(first)
    await asyncio.wait_for(waiting, 1)
    order.leave(second)
    assert not order
