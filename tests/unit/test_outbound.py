"""The per-connection outbound cap, on a real local websocket pair."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import websockets
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from tritonmq.broker.outbound import CLOSE_OUTBOUND_FULL, Outbound, OutboundBudget
from tritonmq.broker.spawner import Spawner

CAP = 256 * 1024
CHUNK = bytes(range(256)) * 256  # 64 KiB


@asynccontextmanager
async def _pair(
    **client: object,
) -> AsyncIterator[tuple[ServerConnection, websockets.ClientConnection]]:
    accepted: asyncio.Queue[ServerConnection] = asyncio.Queue()
    done = asyncio.Event()

    async def handler(ws: ServerConnection) -> None:
        accepted.put_nowait(ws)
        await done.wait()

    # as the broker serves: no compression, so bytes sent are bytes buffered
    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None, compression=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        async with websockets.connect(f"ws://127.0.0.1:{port}", max_size=None, **client) as c:  # type: ignore[arg-type]
            conn = await asyncio.wait_for(accepted.get(), 5)
            try:
                yield conn, c
            finally:
                done.set()


async def _fill(out: Outbound, conn: ServerConnection, limit: int = 4096) -> int:
    """Send chunks until the cap refuses one (the reader never reads); how many went."""
    for sent in range(limit):
        if not out.send(conn, CHUNK):
            return sent
        await asyncio.sleep(0)  # let the kernel take what it will
    raise AssertionError("the cap never refused a send")


async def test_a_connection_that_never_reads_is_closed_with_4008() -> None:
    tasks = Spawner()
    out = Outbound(CAP, tasks.spawn)
    async with _pair(max_queue=1) as (conn, client):
        await _fill(out, conn)
        assert conn.transport.get_write_buffer_size() <= CAP
        assert not out.accepting(conn)
        assert not out.send(conn, b"more")  # nothing is queued once it is closing
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(client.recv(), 10)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == CLOSE_OUTBOUND_FULL
    await tasks.cancel_all(1.0)


async def test_a_reader_gets_everything_and_stays_open() -> None:
    tasks = Spawner()
    out = Outbound(CAP, tasks.spawn)
    async with _pair() as (conn, client):
        for _ in range(200):  # 12.5 MiB in all, read as it comes
            assert out.send(conn, CHUNK)
            assert await asyncio.wait_for(client.recv(), 10) == CHUNK
        assert out.accepting(conn)
    assert not tasks.tasks


async def test_one_frame_larger_than_the_cap_goes_on_an_empty_buffer() -> None:
    tasks = Spawner()
    out = Outbound(1024, tasks.spawn)
    async with _pair() as (conn, client):
        assert out.send(conn, CHUNK)
        assert await asyncio.wait_for(client.recv(), 10) == CHUNK
        assert out.accepting(conn)


async def test_a_client_closing_on_its_own_is_still_heard() -> None:
    """Its last frames (an ack, then its close frame) arrive while the connection is
    already closing: they must still reach the core."""
    tasks = Spawner()
    out = Outbound(CAP, tasks.spawn)
    async with _pair() as (conn, client):
        await client.close()
        await asyncio.wait_for(conn.wait_closed(), 10)
        assert out.accepting(conn)
        assert not out.send(conn, b"late")  # but nothing is sent to it
    assert not tasks.tasks


async def test_closing_a_connection_that_never_reads_takes_bounded_time() -> None:
    """websockets' close() waits for the buffer to drain: forever for this client."""
    tasks = Spawner()
    out = Outbound(64 * CAP, tasks.spawn, abort_after=0.2)
    async with _pair(max_queue=1) as (conn, client):
        for _ in range(200):  # 12.5 MiB the client will not read
            assert out.send(conn, CHUNK)
        await asyncio.wait_for(out.close(conn, 4000, "going away"), 10)
        await asyncio.wait_for(conn.wait_closed(), 10)
        assert conn.protocol.state is State.CLOSED
        with pytest.raises(ConnectionClosed):  # the client finds it gone (aborted) as it reads
            while True:
                await asyncio.wait_for(client.recv(), 10)
    await tasks.cancel_all(1.0)


async def test_past_the_per_broker_budget_the_largest_holder_is_closed() -> None:
    """Two connections that never read, each under its own cap: past the budget of both
    together, the one holding the most is closed with 4008 and the other is still served."""
    tasks = Spawner()
    closed: list[tuple[ServerConnection, str]] = []
    budget = OutboundBudget(20 * CAP)
    out = Outbound(64 * CAP, tasks.spawn, budget=budget, evicted=lambda c, r: closed.append((c, r)))
    async with _pair(max_queue=1) as (big, big_client), _pair(max_queue=1) as (small, _):
        for _ in range(400):  # until the kernel takes no more: then the broker holds it
            assert out.send(big, CHUNK)
            await asyncio.sleep(0)
            if big.transport.get_write_buffer_size() > 16 * CAP:
                break
        for _ in range(400):
            if not out.send(small, CHUNK) or closed:
                break
            await asyncio.sleep(0)
        assert closed == [(big, "outbound_budget")]
        assert not out.accepting(big) and out.accepting(small)
        assert budget.total <= budget.limit
        with pytest.raises(ConnectionClosed) as gone:
            while True:
                await asyncio.wait_for(big_client.recv(), 10)
        assert gone.value.rcvd is None or gone.value.rcvd.code == CLOSE_OUTBOUND_FULL
    await tasks.cancel_all(1.0)
