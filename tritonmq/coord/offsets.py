"""Durable subscriptions and their offsets in ZooKeeper.

``/subscriptions/<topic>/<name>`` {"mode", "owner"} and ``/offsets/<topic>/<name>``
{"ts", "era"} (``era``: of a moved slot, docs/replication.md M5; absent: 0). ``owner`` is the principal the subscription belongs to (docs/security.md); one
written before owners existed has none and belongs to the anonymous principal. Topic and subscription names are percent-encoded into one path segment.
Only the primary writes offsets, coalesced, a few times a second.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.security import ACL

from tritonmq.coord import paths
from tritonmq.errors import Fenced

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

    async def register(
        self,
        topic: str,
        name: str,
        mode: str,
        offset: int,
        owner: str = "",
        era: int = 0,
        fence: int | None = None,
    ) -> tuple[int, int]:
        """Create the subscription (idempotent); returns the offset ZooKeeper holds for it
        with its era (an offset is never read without it: docs/replication.md M9).
        ``fence``: the group state's version the primary holds; created only while the
        state is still at it (one transaction), else :class:`Fenced` and nothing written."""
        zk, call = self.coord.zk, self.coord.call
        sub_path, off_path = self._paths(topic, name)
        data: dict[str, str] = {"mode": mode}
        if owner:
            data["owner"] = owner
        acl = self._acl()
        if fence is not None:
            encoded = json.dumps(data).encode()
            return await self._register_fenced(sub_path, off_path, encoded, offset, era, fence)
        try:
            await call(zk.create_async(sub_path, json.dumps(data).encode(), acl=acl, makepath=True))
        except NodeExistsError:
            pass
        try:
            await call(zk.create_async(off_path, _offset(offset, era), acl=acl, makepath=True))
        except NodeExistsError:
            return await self._held(off_path)
        return offset, era

    async def _held(self, off_path: str) -> tuple[int, int]:
        """The offset an existing subscription is at, with its era."""
        raw, _ = await self.coord.call(self.coord.zk.get_async(off_path))
        off = json.loads(raw)
        return int(off["ts"]), int(off.get("era", 0))

    def _acl(self) -> list[ACL] | None:
        """Subscriptions and offsets are the brokers' alone: no reader credential."""
        return self.coord.acls.private if self.coord.acls is not None else None

    async def _register_fenced(
        self, sub_path: str, off_path: str, data: bytes, offset: int, era: int, fence: int
    ) -> tuple[int, int]:
        zk, call = self.coord.zk, self.coord.call
        acl = self._acl()
        for path in (sub_path, off_path):  # parents (private too): a transaction makes none
            await call(zk.ensure_path_async(path.rsplit("/", 1)[0], acl=acl))
        for _ in range(3):  # a create of ours raced by another: look again
            have_sub = await call(zk.exists_async(sub_path)) is not None
            tx = zk.transaction()
            tx.check(self.coord.state_path, fence)
            if not have_sub:
                tx.create(sub_path, data, acl=acl)
            tx.create(off_path, _offset(offset, era), acl=acl)
            results = await call(tx.commit_async())
            if not any(isinstance(r, Exception) for r in results):
                return offset, era
            if isinstance(results[0], BadVersionError | NoNodeError):
                raise Fenced(f"the group state moved past version {fence}")
            if isinstance(results[-1], NodeExistsError):
                return await self._held(off_path)
        raise Fenced(f"registering {off_path} kept racing another writer")

    async def store(
        self,
        offsets: Iterable[tuple[str, str, int]],
        eras: Sequence[int] = (),
        fence: int | None = None,
    ) -> None:
        """Write offsets in one transaction (they are one coalesced batch); ``eras``: each
        one's era (empty: all 0). ``fence``: as :meth:`register`'s (:class:`Fenced`).

        An offset of a moved slot's era never replaces one of a later era: that one was
        written by the group the subscription was handed on to, and ours (a hand-on
        written again after its first answer was lost) would send it back a move (M5).
        It is left out, as done: the subscription went on past our era."""
        zk, call = self.coord.zk, self.coord.call
        writes = [
            (self._paths(topic, name)[1], ts, eras[i] if eras else 0)
            for i, (topic, name, ts) in enumerate(offsets)
        ]
        # a slot that never moved is written only by its group: read only moved slots' ones
        moved = [path for path, _, era in writes if era]
        got = await asyncio.gather(*(call(zk.get_async(p)) for p in moved))
        held = dict(zip(moved, got, strict=True))
        tx = zk.transaction()
        if fence is not None:
            tx.check(self.coord.state_path, fence)
        for path, ts, era in writes:
            if not era:
                tx.set_data(path, _offset(ts, 0))
                continue
            raw, stat = held[path]
            if int(json.loads(raw).get("era", 0)) <= era:
                tx.set_data(path, _offset(ts, era), version=stat.version)
        results = await call(tx.commit_async())
        if fence is not None and isinstance(results[0], BadVersionError | NoNodeError):
            raise Fenced(f"the group state moved past version {fence}")
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:  # the op that failed, not the ones rolled back with it
            raise next((e for e in errors if not isinstance(e, RolledBackError)), errors[0])

    async def delete(self, topic: str, name: str) -> None:
        """Delete a subscription and its offset (admin op); one already gone is fine."""
        zk, call = self.coord.zk, self.coord.call
        sub_path, off_path = self._paths(topic, name)
        for path in (off_path, sub_path):
            try:
                await call(zk.delete_async(path))
            except NoNodeError:
                pass

    async def load(
        self,
        owns: object,
        owners: dict[tuple[str, str], str] | None = None,
        eras: dict[tuple[str, str], int] | None = None,
    ) -> list[tuple[str, str, str, int]]:
        """Every subscription of a topic ``owns(topic)`` accepts: (topic, name, mode, offset).
        ``owners`` (when given) gets each owned one's principal, ``eras`` the era of each
        offset that is not 0 (a moved slot's, M5)."""
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
                sub = json.loads(sub_raw)
                mode = sub.get("mode", "broadcast")
                off = json.loads(off_raw)
                out.append((topic, unquote(n), mode, int(off["ts"])))
                if eras is not None and int(off.get("era", 0)):
                    eras[(topic, unquote(n))] = int(off["era"])
                if owners is not None and isinstance(sub.get("owner"), str) and sub["owner"]:
                    owners[(topic, unquote(n))] = sub["owner"]
        return out


def _offset(ts: int, era: int) -> bytes:
    """An offset znode's value; a slot that never moved keeps the form it always had."""
    return json.dumps({"ts": ts, "era": era} if era else {"ts": ts}).encode()
