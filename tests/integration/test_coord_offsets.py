"""Offsets of durable subscriptions in a real ZooKeeper (``tritonmq/coord/offsets.py``):
a moved slot's offset says its era (docs/replication.md M5); one without an era, as
every offset written before moves existed, reads as era 0."""

from __future__ import annotations

import asyncio
import json
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from tritonmq.coord import paths
from tritonmq.coord.bridge import to_future
from tritonmq.coord.offsets import Offsets
from tritonmq.coord.zkclient import new_client

pytestmark = pytest.mark.integration


async def test_offsets_keep_their_era_and_an_offset_without_one_is_era_0(zk_server: Any) -> None:
    zk = new_client(zk_server.hostport)
    zk.start(timeout=10)
    loop = asyncio.get_running_loop()
    chroot = f"/offsets-{uuid.uuid4().hex[:8]}"
    coord = SimpleNamespace(zk=zk, chroot=chroot, acls=None, call=lambda r: to_future(loop, r))
    try:
        offsets = Offsets(coord)  # type: ignore[arg-type]
        assert await offsets.register("t", "old", "broadcast", 5) == 5
        assert await offsets.register("t", "moved", "shared", 7, era=2) == 7
        raw, _ = zk.get(paths.offset(chroot, "t", "old"))
        assert json.loads(raw) == {"ts": 5}, "a slot that never moved: the form it always had"
        await offsets.store([("t", "old", 9), ("t", "moved", 3)], (0, 3))
        eras: dict[tuple[str, str], int] = {}
        found = await offsets.load(lambda t: True, eras=eras)
        assert sorted(found) == [("t", "moved", "shared", 3), ("t", "old", "broadcast", 9)]
        assert eras == {("t", "moved"): 3}
        raw, _ = zk.get(paths.offset(chroot, "t", "moved"))
        assert json.loads(raw) == {"ts": 3, "era": 3}
    finally:
        zk.delete(chroot, recursive=True)
        zk.stop()
        zk.close()
