"""``tritonmq.Client``: the asyncio producer/consumer API."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlparse

import websockets

from tritonmq.client.consumer import Subscription
from tritonmq.client.link import Link
from tritonmq.client.types import Ack, Fetched, FetchedRecord
from tritonmq.core.slots import SlotMap
from tritonmq.errors import ClientClosed, ConfigError, RetriableError, WrongGroup
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

REROUTES = 5


class Client:
    """Connect with ``Client("zk://host:port")`` or ``Client("ws://host:port")``.

    ``zk://`` reads the cluster (slot map, groups, primaries) from ZooKeeper;
    ``ws://`` asks any broker for it. Each topic is routed to the group that owns
    its slot, over one connection per group that follows that group's primary
    across failovers.
    """

    def __init__(
        self,
        url: str,
        *,
        max_in_flight: int = 32,
        batch_size: int = 1000,
        linger: float = 0.0,
        timeout: float = 30.0,
        retries: int = 1000,
        connect_timeout: float = 30.0,
    ) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in ("zk", "ws", "wss") or not parsed.netloc:
            raise ConfigError(
                f"unsupported broker URL {url!r}: use zk://host:port or ws://host:port"
            )
        self.url = url
        self._scheme = parsed.scheme
        self._zk_hosts = parsed.netloc
        self._chroot = parsed.path if parsed.path not in ("", "/") else "/tritonmq"
        self._known: list[str] = [url] if parsed.scheme != "zk" else []
        self._connect_timeout = connect_timeout
        self._timeout = timeout
        self._link_options: dict[str, Any] = {
            "max_in_flight": max_in_flight,
            "batch_size": batch_size,
            "linger": linger,
            "timeout": timeout,
            "retries": retries,
        }
        self._groups: dict[str, dict[str, Any]] = {}
        self._slots: SlotMap | None = None
        self._links: dict[str, Link] = {}
        self._closed = False

    # --- the cluster view -----------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read the slot map and every group's brokers."""
        if self._scheme == "zk":
            from tritonmq.coord.inspect import fetch_cluster

            info = await asyncio.to_thread(fetch_cluster, self._zk_hosts, self._chroot, 5.0)
        else:
            info = await self._ask_a_broker()
        self._groups = info["groups"]
        self._slots = SlotMap.from_dict(info["slots"]) if info.get("slots") else None

    async def _ask_a_broker(self) -> dict[str, Any]:
        last: BaseException | None = None
        for url in list(self._known):
            try:
                async with websockets.connect(
                    url,
                    subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                    open_timeout=3,
                    compression=None,
                ) as ws:
                    await ws.send(codec.packb({"op": "meta", "id": 0}))
                    meta = codec.decode_broker(await asyncio.wait_for(ws.recv(), 5))
            except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as e:
                last = e
                continue
            groups = meta.get("groups") or {
                meta["group"]: {
                    "primary_url": meta.get("primary_url"),
                    "members": meta.get("members", {}),
                }
            }
            for g in groups.values():
                self._known.extend(u for u in g.get("members", {}).values() if u not in self._known)
            return {"groups": groups, "slots": meta.get("slots")}
        raise ClientClosed(f"no broker reachable among {self._known}: {last}")

    def group_of(self, topic: str) -> str:
        """The group that owns ``topic`` in the cluster view last read."""
        return self._group_of(topic)

    async def group_meta(self, group: str) -> dict[str, Any]:
        """The ``meta`` answer of ``group``'s primary: its commit point, topics, brokers."""
        return await self._link(group).request({"op": "meta"}, self._timeout)

    async def topics(self) -> dict[str, str]:
        """Every topic the groups' primaries hold or held records of: topic -> group."""
        out: dict[str, str] = {}
        for group in sorted(self._groups):
            for t in (await self.group_meta(group)).get("topics", ()):
                out[str(t)] = group
        return out

    def _candidates(self, group: str) -> list[str]:
        g = self._groups.get(group, {})
        urls = [g["primary_url"]] if g.get("primary_url") else []
        urls += [u for u in g.get("members", {}).values() if u not in urls]
        return urls

    def _group_of(self, topic: str) -> str:
        if self._slots is not None:
            return self._slots.group_of(topic)
        if self._groups:  # no slot map: a single-group cluster
            return sorted(self._groups)[0]
        return ""

    def _link(self, group: str) -> Link:
        link = self._links.get(group)
        if link is None:
            if self._closed:
                raise ClientClosed("client closed")

            async def resolve() -> list[str]:
                await self.refresh()
                return self._candidates(group)

            link = self._links[group] = Link(resolve, group=group, **self._link_options)
            link.start()
        return link

    # --- lifecycle -------------------------------------------------------------------

    async def connect(self) -> Client:
        try:
            await asyncio.wait_for(self.refresh(), self._connect_timeout)
        except TimeoutError:
            raise ClientClosed(
                f"cluster not reachable within {self._connect_timeout:.0f}s"
            ) from None
        if not self._groups:
            raise ClientClosed(f"no broker group is registered at {self.url}")
        return self

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*(link.close() for link in self._links.values()))

    async def __aenter__(self) -> Client:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- producing -------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: dict[str, Any] | None = None,
    ) -> Ack:
        """Publish one record; returns once every in-sync replica holds it."""
        return (await self._publish(topic, [(os.urandom(16), value, key, headers)]))[0]

    async def publish_batch(
        self,
        topic: str,
        records: Sequence[tuple[bytes, bytes, bytes | None, dict[str, Any] | None]],
    ) -> list[Ack]:
        """Publish ``(uuid, value, key, headers)`` records with uuids the caller chose, so a
        replay of the same records is recognised by the broker's dedup (Spark's sink)."""
        return await self._publish(topic, records)

    async def publish_many(self, topic: str, values: Iterable[bytes]) -> list[Ack]:
        """Publish many records at once (batched on the wire); acks in the same order."""
        return await self._publish(topic, [(os.urandom(16), v, None, None) for v in values])

    async def _publish(
        self, topic: str, items: Sequence[tuple[bytes, bytes, Any, Any]]
    ) -> list[Ack]:
        """Send to the topic's group; if its slot moved, re-route with the same uuids."""
        for _ in range(REROUTES):
            link = self._link(self._group_of(topic))
            futs = [link.publish_nowait(topic, v, k, h, u) for u, v, k, h in items]
            try:
                return list(await asyncio.gather(*futs))
            except WrongGroup:
                await asyncio.gather(*futs, return_exceptions=True)
                await self.refresh()
        raise WrongGroup(f"topic {topic!r} kept moving between groups")

    # --- reading ranges and committing (Spark) -------------------------------------------

    async def _ask(self, topic: str, frame: dict[str, Any]) -> dict[str, Any]:
        """One request about ``topic`` to its group's primary, following failovers and
        slot moves until ``timeout``; non-retriable errors (e.g. ``Purged``) are raised."""
        deadline = asyncio.get_running_loop().time() + self._timeout
        last: BaseException | None = None
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            try:
                return await self._link(self._group_of(topic)).request(frame, left)
            except WrongGroup as e:
                last = e
                await self.refresh()
            except (RetriableError, TimeoutError) as e:
                last = e
                await asyncio.sleep(0.05)
        raise ClientClosed(f"no answer about topic {topic!r} within {self._timeout:.0f}s: {last}")

    async def fetch_raw(
        self, topic: str, start: int, end: int, *, max: int = 10_000, skip_purged: bool = False
    ) -> Fetched:
        """Records of ``topic`` with ``start <= ts <= end`` (at most ``max``, up to what is
        committed): the cheap form, record tuples and ``(first_ts, ms)`` pairs."""
        got = await self._ask(
            topic,
            {
                "op": "fetch",
                "topic": topic,
                "from": start,
                "to": end,
                "max": max,
                **({"skip_purged": True} if skip_purged else {}),
            },
        )
        purged = got.get("purged")
        return Fetched(
            list(got.get("records", ())),
            [(int(p[0]), int(p[1])) for p in got.get("published", ())],
            int(got["next"]),
            purged if isinstance(purged, int) else None,
        )

    async def fetch(
        self, topic: str, start: int, end: int, *, max: int = 10_000, skip_purged: bool = False
    ) -> tuple[list[FetchedRecord], int]:
        """Read ``topic``'s retained records with ``start <= ts <= end`` without subscribing.

        Returns at most ``max`` records and where to continue (``next``); a range is
        read once an answer comes back empty. Follows failovers. Raises
        :class:`~tritonmq.errors.Purged` if records of the range were already purged
        (``skip_purged=True`` skips them instead).
        """
        got = await self.fetch_raw(topic, start, end, max=max, skip_purged=skip_purged)
        pub = got.published
        out: list[FetchedRecord] = []
        j = 0
        for ts, uuid, key, value, headers in got.records:
            while j + 1 < len(pub) and pub[j + 1][0] <= ts:
                j += 1
            ms = pub[j][1] if pub and pub[j][0] <= ts else None
            out.append(FetchedRecord(topic, ts, uuid, key, value, headers, ms))
        return out, got.next

    async def commit(self, topic: str, subscription: str, ts: int) -> tuple[int, int]:
        """Acknowledge durable ``subscription`` of ``topic`` up to ``ts`` without consuming.

        Registers the subscription if it does not exist (so the broker keeps every later
        record for it); never lowers its offset. Returns ``(offset, head)``: the offset
        now and the group's commit point (its newest committed ts).
        """
        got = await self._ask(
            topic, {"op": "commit", "topic": topic, "subscription": subscription, "ts": ts}
        )
        return int(got["ts"]), int(got["head"])

    # --- consuming -------------------------------------------------------------------

    def subscribe(
        self,
        topic: str,
        subscription: str | None = None,
        from_: str | int = "latest",
        *,
        window: int | None = None,
        mode: str = "broadcast",
    ) -> Subscription:
        """``async with client.subscribe(topic) as sub: async for msg in sub: await msg.ack()``.

        Naming a ``subscription`` makes it durable: its offset lives in ZooKeeper and
        ``from_="latest"`` resumes after what it acknowledged. ``mode="shared"``
        splits its records among every consumer using the same name.
        """
        if not (from_ in ("latest", "earliest") or (isinstance(from_, int) and from_ >= 0)):
            raise ConfigError("from_ must be 'latest', 'earliest' or a ts >= 0")
        if mode not in ("broadcast", "shared"):
            raise ConfigError("mode must be 'broadcast' or 'shared'")
        if mode == "shared" and not subscription:
            raise ConfigError("a shared subscription needs a name")
        link = self._link(self._group_of(topic))
        return link.new_subscription(topic, subscription, from_, window, mode)
