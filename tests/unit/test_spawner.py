"""The broker shell's Spawner: every task kept, failures logged, a stop bounded."""

from __future__ import annotations

import asyncio

import pytest

from tritonmq.broker.spawner import Spawner


async def test_tasks_are_kept_until_done_and_cancel_all_awaits_them() -> None:
    s = Spawner()
    done = asyncio.Event()

    async def quick() -> None:
        done.set()

    async def forever() -> None:
        await asyncio.Event().wait()

    s.spawn(quick(), "quick")
    slow = s.spawn(forever(), "forever")
    await done.wait()
    await asyncio.sleep(0)
    assert s.tasks == {slow}
    await s.cancel_all(timeout=1.0)
    assert slow.cancelled() and s.tasks == set()


async def test_a_failing_task_is_logged_not_lost(caplog: pytest.LogCaptureFixture) -> None:
    s = Spawner()

    async def boom() -> None:
        raise RuntimeError("boom")

    task = s.spawn(boom(), "boom")
    await asyncio.wait([task])
    await asyncio.sleep(0)
    assert "task boom failed" in caplog.text and "RuntimeError: boom" in caplog.text


async def test_cancel_all_gives_up_after_its_deadline() -> None:
    s = Spawner()

    release = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await release.wait()  # a slow cleanup

    task = s.spawn(stubborn(), "stubborn")
    await asyncio.sleep(0)
    await asyncio.wait_for(s.cancel_all(timeout=0.2), 2.0)
    assert not task.done()
    release.set()
    await task
