"""Durable subscriptions and their offsets in ZooKeeper.

``/subscriptions/<topic>/<name>`` {"mode", "created"} and ``/offsets/<topic>/<name>``
{"ts"}. Topic and subscription names are percent-encoded into one path segment.
Only the primary writes offsets, coalesced, a few times a second.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote

from kazoo.exceptions import NodeExistsError, NoNodeError

from tritonmq.coord import paths

if TYPE_CHECKING:
    from tritonmq.coord.group import GroupCoordinator


class Offsets:
    def __init__(self, coord: GroupCoordinator) -> None:
        self.coord = coord
        self.subs_root = paths.subscriptions(coord.chroot)
        self.offsets_root = paths.offsets(coord.chroot)

    def _paths(self, topic: str, name: str) -> tuple[str, str]:
        chroot = self.coord.chroot
        return paths.subscription(chroot, topic, name), paths.offset(chroot, topic, name)

    async def register(self, topic: str, name: str, mode: str, offset: int) -> int:
        """Create the subscription (idempotent); returns the offset ZooKeeper holds for it."""
        zk, call = self.coord.zk, self.coord.call
        sub_path, off_path = self._paths(topic, name)
        acl = self.coord.acls.private if self.coord.acls is not None else None  # no reader
        try:
            await call(
                zk.create_async(
                    sub_path, json.dumps({"mode": mode}).encode(), acl=acl, makepath=True
                )
            )
        except NodeExistsError:
            pass
        try:
            await call(
                zk.create_async(
                    off_path, json.dumps({"ts": offset}).encode(), acl=acl, makepath=True
                )
            )
        except NodeExistsError:
            raw, _ = await call(zk.get_async(off_path))
            return int(json.loads(raw)["ts"])
        return offset

    async def store(self, offsets: Iterable[tuple[str, str, int]]) -> None:
        """Write offsets in one transaction (they are one coalesced batch)."""
        tx = self.coord.zk.transaction()
        for topic, name, ts in offsets:
            tx.set_data(self._paths(topic, name)[1], json.dumps({"ts": ts}).encode())
        results = await self.coord.call(tx.commit_async())
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            raise errors[0]

    async def load(self, owns: object) -> list[tuple[str, str, str, int]]:
        """Every subscription of a topic ``owns(topic)`` accepts: (topic, name, mode, offset)."""
        zk, call = self.coord.zk, self.coord.call
        try:
            topics = await call(zk.get_children_async(self.subs_root))
        except NoNodeError:
            return []
        out: list[tuple[str, str, str, int]] = []
        for t in topics:
            topic = unquote(t)
            if not owns(topic):  # type: ignore[operator]
                continue
            try:
                names = await call(zk.get_children_async(f"{self.subs_root}/{t}"))
            except NoNodeError:
                continue
            reads = []
            for n in names:
                sub_path, off_path = self._paths(topic, unquote(n))
                reads.append(
                    asyncio.gather(call(zk.get_async(sub_path)), call(zk.get_async(off_path)))
                )
            for n, got in zip(
                names, await asyncio.gather(*reads, return_exceptions=True), strict=True
            ):
                if isinstance(got, BaseException):
                    continue  # deleted meanwhile
                (sub_raw, _), (off_raw, _) = got
                mode = json.loads(sub_raw).get("mode", "broadcast")
                out.append((topic, unquote(n), mode, int(json.loads(off_raw)["ts"])))
        return out
