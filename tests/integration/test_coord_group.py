"""The group coordinator against a real ZooKeeper (``tritonmq/coord/group.py``)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tritonmq.coord.group import GroupCoordinator
from tritonmq.coord.zkclient import new_client
from tritonmq.core.group import GroupState, Member

pytestmark = pytest.mark.integration


async def test_a_refresh_asked_while_one_reads_returns_after_a_read_begun_after_it(
    zk_server: Any,
) -> None:
    """The broker judges a CAS of unknown outcome by the view a refresh brings (ReadState).
    A refresh asked while another read was under way returned at once, and the view the
    core then got was read before the CAS landed: an ISR grow that ZooKeeper held was
    judged unwritten (simulator scenario `tests/sim/test_scenarios.py::test_an_isr_cas_of_unknown_outcome_is_judged_by_a_read_begun_after_it`). It now waits for a read begun after it."""
    chroot = f"/coord-{uuid.uuid4().hex[:8]}"
    me = Member("b1", "ws://b1:1", "boot-b1")
    coord = GroupCoordinator(
        zk_server.hostport, chroot, "g1", me, session_timeout=10.0, on_change=lambda: None
    )
    writer = new_client(zk_server.hostport, auth=None)  # as the coordinator: no credential
    writer.start(timeout=10)
    try:
        await coord.start()
        first = GroupState(1, "b1", ("b1",), {"b1": "boot-b1"}, 1, -1)
        writer.create(coord.state_path, first.to_json(), makepath=True)
        assert await coord.refresh() and coord.state is not None and coord.state.isr == ("b1",)

        reading, release = asyncio.Event(), asyncio.Event()
        plain = coord._read

        async def held_read() -> None:  # the first read is held until the write is made
            reading.set()
            await release.wait()
            await plain()

        coord._read = held_read  # type: ignore[method-assign]
        under_way = asyncio.create_task(coord.refresh())
        await asyncio.wait_for(reading.wait(), 10)
        coord._read = plain  # type: ignore[method-assign]
        grown = GroupState(1, "b1", ("b1", "b2"), {"b1": "boot-b1", "b2": "boot-b2"}, 1, 0)
        writer.set(coord.state_path, grown.to_json(), version=0)  # the CAS that landed
        asked = asyncio.create_task(coord.refresh())  # ReadState, after its answer
        await asyncio.sleep(0)
        assert not asked.done(), "it waits for a read begun after it was asked"
        release.set()
        assert await asyncio.wait_for(asked, 10)
        assert coord.state is not None and coord.state.isr == ("b1", "b2")
        assert await asyncio.wait_for(under_way, 10)
    finally:
        await coord.stop()
        writer.stop()
        writer.close()
