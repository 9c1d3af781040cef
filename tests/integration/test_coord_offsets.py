"""Offsets of durable subscriptions in a real ZooKeeper (``tritonmq/coord/offsets.py``):
a moved slot's offset says its era (docs/replication.md M5); one without an era, as
every offset written before moves existed, reads as era 0."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from tritonmq.coord import paths
from tritonmq.coord.bridge import to_future
from tritonmq.coord.offsets import Offsets
from tritonmq.coord.zkclient import new_client
from tritonmq.errors import Fenced

pytestmark = pytest.mark.integration


@pytest.fixture
async def at(zk_server: Any) -> AsyncIterator[SimpleNamespace]:
    """Offsets over a real ZooKeeper, under a chroot of their own with a group state
    znode (``zk``, ``chroot``, ``state_path``, ``offsets``)."""
    zk = new_client(zk_server.hostport)
    zk.start(timeout=10)
    loop = asyncio.get_running_loop()
    chroot = f"/offsets-{uuid.uuid4().hex[:8]}"
    state_path = f"{chroot}/groups/g1/state"
    zk.create(state_path, b"{}", makepath=True)
    coord = SimpleNamespace(
        zk=zk, chroot=chroot, acls=None, call=lambda r: to_future(loop, r), state_path=state_path
    )
    offsets = Offsets(coord)  # type: ignore[arg-type]
    try:
        yield SimpleNamespace(zk=zk, chroot=chroot, state_path=state_path, offsets=offsets)
    finally:
        zk.delete(chroot, recursive=True)
        zk.stop()
        zk.close()


async def test_offsets_keep_their_era_and_an_offset_without_one_is_era_0(at: Any) -> None:
    zk, chroot, offsets = at.zk, at.chroot, at.offsets
    assert await offsets.register("t", "old", "broadcast", 5) == (5, 0)
    assert await offsets.register("t", "moved", "shared", 7, era=2) == (7, 2)
    # held already: ZooKeeper's offset comes back with its era, never as a bare ts (M9)
    assert await offsets.register("t", "moved", "shared", 9, era=3) == (7, 2)
    raw, _ = zk.get(paths.offset(chroot, "t", "old"))
    assert json.loads(raw) == {"ts": 5}, "a slot that never moved: the form it always had"
    await offsets.store([("t", "old", 9), ("t", "moved", 3)], (0, 3))
    eras: dict[tuple[str, str], int] = {}
    found = await offsets.load(lambda t: True, eras=eras)
    assert sorted(found) == [("t", "moved", "shared", 3), ("t", "old", "broadcast", 9)]
    assert eras == {("t", "moved"): 3}
    raw, _ = zk.get(paths.offset(chroot, "t", "moved"))
    assert json.loads(raw) == {"ts": 3, "era": 3}


async def test_a_hand_on_written_again_never_sends_an_offset_back_an_era(at: Any) -> None:
    """g1 hands `d` on to era 1 (g2's) and writes it again, its first answer lost; g2 had
    meanwhile handed it on to era 2 (g0's). Written over, `d` was at era 1 again, which g2
    had let go: its reader went back and forth between groups and never received era 3's
    records (simulator scenario `tests/sim/test_scenarios.py::test_a_hand_on_written_again_never_sends_an_offset_back_an_era`). The late write is left out; within an era the offset moves as before."""
    zk, chroot, offsets = at.zk, at.chroot, at.offsets
    await offsets.register("t", "d", "broadcast", 0)
    await offsets.register("t", "d2", "broadcast", 0)
    await offsets.store([("t", "d", 0)], (1,))  # g1's hand-on
    await offsets.store([("t", "d", 0)], (2,))  # g2's
    await offsets.store([("t", "d", 0), ("t", "d2", 4)], (1, 0))  # g1's again, and more
    raw, _ = zk.get(paths.offset(chroot, "t", "d"))
    assert json.loads(raw) == {"ts": 0, "era": 2}
    assert json.loads(zk.get(paths.offset(chroot, "t", "d2"))[0]) == {"ts": 4}
    await offsets.store([("t", "d", 7)], (2,))
    raw, _ = zk.get(paths.offset(chroot, "t", "d"))
    assert json.loads(raw) == {"ts": 7, "era": 2}


async def test_a_primary_whose_group_state_moved_on_registers_and_stores_nothing(
    at: Any,
) -> None:
    """A primary deposed while alive names the group state's version it holds: once a
    successor's election moved the state znode on, its registration and its offset
    writes are refused (Fenced) and ZooKeeper holds nothing of them (replication.md S1)."""
    zk, chroot, state_path, offsets = at.zk, at.chroot, at.state_path, at.offsets
    assert await offsets.register("t", "kept", "broadcast", 5, fence=0) == (5, 0)
    assert await offsets.register("t", "kept", "broadcast", 8, fence=0) == (5, 0), "idempotent"
    await offsets.store([("t", "kept", 6)], fence=0)
    zk.set(state_path, b'{"epoch": 2}')  # a successor elected: version 1
    with pytest.raises(Fenced):
        await offsets.register("t", "late", "shared", 13, fence=0)
    with pytest.raises(Fenced):
        await offsets.store([("t", "kept", 9)], fence=0)
    assert zk.exists(paths.subscription(chroot, "t", "late")) is None
    assert zk.exists(paths.offset(chroot, "t", "late")) is None
    found = await offsets.load(lambda t: True)
    assert found == [("t", "kept", "broadcast", 6)], "the deposed primary wrote nothing"
    assert await offsets.register("t", "late", "shared", 13, fence=1) == (13, 0)
