"""The broker's budget for client input: what unfinished and queued messages hold is counted,
and past ``max_inbound_bytes`` the connection holding the most is closed with 4013."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from tritonmq.broker.admission import CLOSE_NO_HELLO, Admission
from tritonmq.broker.inbound import (
    CLOSE_INBOUND_FULL,
    InboundBudget,
    TrackedConnection,
    evict,
    tracked,
)

KIB = 1024


def test_past_the_limit_the_largest_holders_are_closed_until_it_fits() -> None:
    closed: list[str] = []
    b = InboundBudget(100, closed.append)  # type: ignore[arg-type]
    b.update("small", 10)  # type: ignore[arg-type]
    b.update("big", 60)  # type: ignore[arg-type]
    b.update("mid", 30)  # type: ignore[arg-type]
    assert closed == [] and b.total == 100
    b.update("small", 11)  # type: ignore[arg-type]  # one byte over: the largest goes
    assert closed == ["big"] and b.total == 41 and "big" not in b.held
    b.update("mid", 0)  # type: ignore[arg-type]  # its message was read
    b.release("small")  # type: ignore[arg-type]  # its socket closed
    assert b.total == 0 and not b.held


async def _fragment(first: bytes, never: asyncio.Event) -> AsyncIterator[bytes]:
    yield first
    await never.wait()  # the rest never comes


async def test_unfinished_messages_count_until_read_and_the_largest_is_closed_with_4013() -> None:
    admission = Admission(
        what="client connection",
        max_pending=100,
        timeout=60.0,
        close_code=CLOSE_NO_HELLO,
        timeout_reason="no hello in time",
    )
    budget = InboundBudget(300 * KIB, evict)
    got: list[bytes] = []

    async def handler(ws: Any) -> None:
        assert isinstance(ws, TrackedConnection)
        try:
            got.append(await ws.recv())  # type: ignore[arg-type]  # a hello: admitted
            ws.admitted()
            async for data in ws:
                got.append(data)  # type: ignore[arg-type]
        except ConnectionClosed:
            pass

    never = asyncio.Event()
    async with websockets.serve(
        handler,
        "127.0.0.1",
        0,
        max_size=64 * KIB,
        create_connection=tracked(admission, budget, 1024 * KIB),
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"ws://127.0.0.1:{port}"
        async with websockets.connect(url) as small, websockets.connect(url) as big:
            await small.send(b"hello")
            await big.send(b"hello")
            await asyncio.sleep(0.1)
            # before admission a message is bounded by max_hello_bytes...
            async with websockets.connect(url) as early:
                await early.send(b"x" * (65 * KIB))
                with pytest.raises(ConnectionClosed) as too_big:
                    await asyncio.wait_for(early.recv(), 5)
                assert too_big.value.rcvd is not None and too_big.value.rcvd.code == 1009
            # ...after it by max_frame_bytes; an unfinished one is held, and counted
            sending = [
                asyncio.create_task(small.send(_fragment(b"s" * (100 * KIB), never))),
                asyncio.create_task(big.send(_fragment(b"b" * (150 * KIB), never))),
            ]
            await _until(lambda: budget.total >= 250 * KIB)
            assert budget.total < 260 * KIB
            third = await websockets.connect(url)
            await third.send(b"hello")
            await _until(lambda: len(got) >= 3)
            third_task = asyncio.create_task(third.send(_fragment(b"t" * (120 * KIB), never)))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(big.recv(), 5)
            assert closed.value.rcvd is not None
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (
                CLOSE_INBOUND_FULL,
                "inbound buffers full",
            )
            await _until(lambda: budget.total >= 220 * KIB)
            assert budget.total <= 300 * KIB and admission.closed["inbound_budget"] == 1
            for t in (*sending, third_task):
                t.cancel()
            await asyncio.gather(*sending, third_task, return_exceptions=True)
            await third.close()
        await _until(lambda: budget.total == 0)


async def _until(pred: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.01)
