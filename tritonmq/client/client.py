"""``tritonmq.Client``: the asyncio producer/consumer API."""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import logging
import os
import ssl
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import websockets
from websockets.exceptions import WebSocketException

from tritonmq import tlsconfig
from tritonmq.client.link import MAX_FRAME_BYTES, Link
from tritonmq.client.ordering import TopicOrder
from tritonmq.client.routing import ClusterView
from tritonmq.client.subscription import PresenceOptions, Subscription
from tritonmq.client.types import Ack, Fetched, FetchedRecord
from tritonmq.context import client_url, context_for
from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import (
    ClientClosed,
    ConfigError,
    ProtocolError,
    TlsError,
    WrongGroup,
    error_from_wire,
)
from tritonmq.wire import frames
from tritonmq.wire.frames import (
    DURABILITY_LEVELS,
    SUBPROTOCOL,
    BrokerFrame,
    Commit,
    Fetch,
    From,
    Hello,
    Members,
    Meta,
    MetaReply,
    Presence,
    PresenceMember,
    Stats,
    StatsReply,
    SubDelete,
    SubInfo,
    SubReset,
)
from tritonmq.wire.names import check_topic
from tritonmq.wire.subprotocols import MSGPACK

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from tritonmq.coord.zkclient import FromEnv, ZkCredential

log = logging.getLogger("tritonmq.client")

REROUTES = 5
# A slot move: the old group names the new one while the new group's view of the map may
# still name the old (each re-reads ZooKeeper on its own watch). A publish re-routes up
# to this many times, pausing 50 ms, doubling to 1 s, between re-routes after the first.
MOVE_REROUTES = 12


class Client:
    """Connect with ``Client("zk://host:port")`` or ``Client("ws://host:port")``.

    ``Client()`` without a URL connects to ``$TRITONMQ_URL``, else to the cluster
    `tritonmq dev` runs (its local context, tritonmq/context.py), whose ZooKeeper
    credential and CA it then uses unless the environment or ``ca_file`` say others.

    ``zk://`` reads the cluster (slot map, groups, primaries) from ZooKeeper;
    ``ws://`` (or ``wss://``) asks any broker for it. Each topic is routed to the group
    that owns its slot, over one connection per group that follows that group's primary
    across failovers.

    ``wss://`` brokers (a TLS cluster advertises them, whichever URL bootstrapped) are
    always verified: against ``ca_file`` (PEM) if given, else the system's trust store.
    A certificate that does not verify raises :class:`~tritonmq.errors.TlsError`.

    ``token`` (a JWT, docs/security.md) is presented in every ``hello``;
    :meth:`refresh_token` replaces it, live connections included.

    ``zk_auth_file`` (zk:// URLs): the file holding the cluster's ZooKeeper credential
    (``user:password``); default ``$TRITONMQ_ZK_AUTH_FILE``, else the local context's.

    ``max_frame_bytes`` is the brokers' setting of that name (default 8 MiB, theirs): a
    record that cannot fit in such a frame is refused before it is sent, with
    :class:`~tritonmq.errors.FrameTooLarge` (code ``TOO_LARGE``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        max_in_flight: int = 32,
        batch_size: int = 1000,
        linger: float = 0.0,
        timeout: float = 30.0,
        retries: int = 1000,
        connect_timeout: float = 30.0,
        ca_file: str | None = None,
        token: str | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        zk_auth_file: str | None = None,
    ) -> None:
        url = client_url(url)
        parsed = urlparse(url)
        if parsed.scheme not in ("zk", "ws", "wss") or not parsed.netloc:
            raise ConfigError(
                f"unsupported broker URL {url!r}: use zk://host:port, ws:// or wss://host:port"
            )
        if isinstance(max_frame_bytes, bool) or not isinstance(max_frame_bytes, int):
            raise ConfigError("max_frame_bytes must be an int")
        if max_frame_bytes < 1024:
            raise ConfigError("max_frame_bytes must be at least 1024")
        # The local context's credential and CA, for the cluster it names (tritonmq/context.py):
        # an argument or the environment wins.
        from tritonmq.coord.zkclient import FROM_ENV, credential_from, read_credential

        self._zk_auth: ZkCredential | None | FromEnv = FROM_ENV
        ctx = context_for(url)
        if ctx is not None:
            ca_file = ca_file or ctx.ca_file
            if parsed.scheme == "zk" and credential_from() is None:
                self._zk_auth = read_credential(ctx.zk_auth_file)
        if zk_auth_file is not None:  # the argument wins over the environment and context
            self._zk_auth = read_credential(zk_auth_file)
        self._tls = tlsconfig.client_context(ca_file) if ca_file else None
        self.url = url
        self._scheme = parsed.scheme
        self._zk_hosts = parsed.netloc
        self._chroot = parsed.path if parsed.path not in ("", "/") else "/tritonmq"
        self._known: list[str] = [url] if parsed.scheme != "zk" else []
        self._connect_timeout = connect_timeout
        self._token = token
        self._link_options: dict[str, Any] = {
            "max_in_flight": max_in_flight,
            "batch_size": batch_size,
            "linger": linger,
            "timeout": timeout,
            "retries": retries,
            "tls": self._tls,
            "max_frame_bytes": max_frame_bytes,
        }
        if token is not None:
            self._link_options["token"] = token
        self._view = ClusterView()
        self._links: dict[str, Link] = {}
        self._orders: dict[str, TopicOrder] = {}  # topics with publishes unfinished
        self._closed = False
        self._zk: KazooClient | None = None
        self._zk_exit: Callable[[], None] | None = None  # stops _zk at exit if close() never runs
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- the cluster view -----------------------------------------------------------

    async def refresh(self) -> None:
        """Re-read the slot map and every group's brokers."""
        if self._scheme == "zk":
            info = await self._read_zk()
        else:
            info = await self._ask_a_broker()
        self._view = ClusterView.from_info(info)

    async def _refresh_to_reroute(self) -> None:
        """A re-route re-reads the map; a read that fails (ZooKeeper's session lost for a
        moment) keeps the view: the refusal named the group to try, and the next re-route
        reads again. It was raised to the publisher (kazoo's ConnectionLoss, seen under load
        in test_slot_moves' rebalance)."""
        try:
            await self.refresh()
        except Exception as e:
            if self._closed:
                raise
            log.debug("cluster read for a re-route failed, keeping the view: %r", e)

    async def _read_zk(self) -> dict[str, Any]:
        """The cluster view from ZooKeeper, over one session kept for the client's life
        (it also carries the watches on each group's state, bug 8)."""
        from tritonmq.coord.inspect import read_cluster
        from tritonmq.coord.zkclient import new_client

        zk = self._zk
        if zk is None:
            # credential: TRITONMQ_ZK_AUTH(_FILE), else the local context's
            zk = new_client(self._zk_hosts, timeout=2.0, auth=self._zk_auth)
            try:
                await asyncio.to_thread(zk.start, 5.0)
            except Exception as e:
                await asyncio.to_thread(zk.close)
                raise ClientClosed(f"cannot reach ZooKeeper at {self._zk_hosts}: {e}") from e
            if self._closed:
                await asyncio.to_thread(_stop_zk, zk)
                raise ClientClosed("client closed")
            self._zk = zk
            # If the process exits without close() (an interrupted run), kazoo's own exit hook
            # joins its worker threads without stopping the session, and a watch's read can
            # wait for ever on a ZooKeeper that is gone: stop the session first (hooks run in
            # reverse order of registration, so this one runs before kazoo's).
            self._zk_exit = functools.partial(_stop_zk, zk)
            atexit.register(self._zk_exit)
        info: dict[str, Any] = await asyncio.to_thread(read_cluster, zk, self._chroot)
        return info

    def _watch_group(self, group: str) -> None:
        """Bug 8: a new epoch in ``/groups/<g>/state`` moves the group's link at once,
        instead of waiting for a frozen primary to thaw or its pings to time out."""
        zk, loop = self._zk, asyncio.get_running_loop()
        if zk is None or not group:
            return
        from kazoo.recipe.watchers import DataWatch

        from tritonmq.coord import paths

        def changed(data: bytes | None, _stat: object) -> bool:  # on kazoo's thread
            if self._closed:
                return False  # stop watching
            if data:
                loop.call_soon_threadsafe(self._on_group_state, group, data)
            return True

        path = paths.state(self._chroot, group)
        self._spawn(asyncio.to_thread(DataWatch, zk, path, changed))

    def _on_group_state(self, group: str, data: bytes) -> None:
        link = self._links.get(group)
        try:
            state = json.loads(data)
            epoch, primary = int(state["epoch"]), state.get("primary")
        except (ValueError, KeyError, TypeError):
            return
        if link is None or primary is None:
            return
        url = self._view.member_url(group, primary)
        if url is not None:
            link.epoch_seen(epoch, url)
            return

        async def find_url() -> None:  # a broker we have not seen yet: re-read the cluster
            try:
                await self.refresh()
            except Exception as e:
                log.debug("cluster read after a state change failed: %r", e)
                return
            found = self._view.member_url(group, primary)
            if found is not None and not self._closed:
                link.epoch_seen(epoch, found)

        self._spawn(find_url())

    async def _probe(self, group: str, exclude: str) -> tuple[int | None, str | None]:
        """Bug 8 without ZooKeeper: ask the group's other brokers for its epoch and primary."""
        urls = [u for u in {*self._view.candidates(group), *self._known} if u != exclude]
        answers = await asyncio.gather(
            *(_hello(u, self._tls, self._token) for u in urls), return_exceptions=True
        )
        best: tuple[int | None, str | None] = (None, None)
        for a in answers:
            if isinstance(a, MetaReply) and a.group == group and a.primary_url:
                if best[0] is None or a.epoch > best[0]:
                    best = (a.epoch, a.primary_url)
        return best

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ask_a_broker(self) -> dict[str, Any]:
        last: BaseException | None = None
        refused_tls: BaseException | None = None
        for url in list(self._known):
            try:
                async with websockets.connect(
                    url,
                    ssl=tlsconfig.for_url(url, self._tls),
                    subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                    open_timeout=3,
                    compression=None,
                ) as ws:
                    if self._token:  # a broker that requires tokens answers meta to no one else
                        await ws.send(MSGPACK.encode(Hello("tritonmq-python", self._token)))
                        async with asyncio.timeout(5):
                            said = MSGPACK.decode_broker(await ws.recv())
                        if isinstance(said, frames.Error):
                            raise _refusal(said)
                    await ws.send(MSGPACK.encode(Meta(0)))
                    async with asyncio.timeout(5):
                        meta = MSGPACK.decode_broker(await ws.recv())
            except (OSError, TimeoutError, ProtocolError, WebSocketException) as e:
                last = e
                if tlsconfig.is_tls_failure(e):
                    refused_tls = e
                continue
            if isinstance(meta, frames.Error):
                raise _refusal(meta)
            if not isinstance(meta, MetaReply):
                last = ProtocolError(f"{url} answered meta with {type(meta).__name__}")
                continue
            groups = meta.groups or {
                meta.group: {"primary_url": meta.primary_url, "members": meta.members}
            }
            for g in groups.values():
                self._known.extend(u for u in g.get("members", {}).values() if u not in self._known)
            return {"groups": groups, "slots": meta.slots}
        if refused_tls is not None:
            raise TlsError(f"TLS handshake refused by {self._known}: {refused_tls}")
        raise ClientClosed(f"no broker reachable among {self._known}: {last}")

    def group_of(self, topic: str) -> str:
        """The group that owns ``topic`` in the cluster view last read."""
        return self._group_of(topic)

    def groups(self) -> list[str]:
        """The groups of the cluster view last read, sorted."""
        return sorted(self._view.groups)

    def slot_history(self, topic: str) -> SlotHistory:
        """``topic``'s slot history in the cluster view last read: which group held its
        records up to which ts (docs/replication.md M3; a slot that never moved, or a
        cluster without a slot map: era 0 at its one group)."""
        slots = self._view.slots
        return slots.history_of(topic) if slots is not None else SlotHistory(self._group_of(topic))

    async def group_meta(self, group: str) -> MetaReply:
        """The ``meta`` answer of ``group``'s primary: its commit point, topics, brokers."""
        got = await self._link(group).request(Meta(0))
        if not isinstance(got, MetaReply):
            raise ProtocolError(f"meta answered with {type(got).__name__}")
        return got

    async def group_stats(self, group: str, topic: str = "") -> StatsReply:
        """The ``stats`` answer of ``group``'s primary (an admin principal's): retained
        records and bytes per topic, rates, consumers, durable subscriptions' lag."""
        got = await self._link(group).request(Stats(0, topic))
        if not isinstance(got, StatsReply):
            raise ProtocolError(f"stats answered with {type(got).__name__}")
        return got

    async def topics(self) -> dict[str, str]:
        """Every topic the groups' primaries hold records of or have subscribers on: topic -> group."""
        out: dict[str, str] = {}
        for group in sorted(self._view.groups):
            for t in (await self.group_meta(group)).topics or ():
                out[t] = group
        return out

    def _candidates(self, group: str) -> list[str]:
        return self._view.candidates(group)

    def _group_of(self, topic: str) -> str:
        return self._view.group_of(topic)

    def _link(self, group: str) -> Link:
        link = self._links.get(group)
        if link is None:
            if self._closed:
                raise ClientClosed("client closed")

            async def resolve() -> list[str]:
                await self.refresh()
                return self._candidates(group)

            async def probe(exclude: str) -> tuple[int | None, str | None]:
                return await self._probe(group, exclude)

            link = self._links[group] = Link(
                resolve,
                group=group,
                probe=probe if self._scheme != "zk" else None,
                follow=self._link,
                **self._link_options,
            )
            link.start()
            if self._scheme == "zk":
                self._watch_group(group)
        return link

    # --- lifecycle -------------------------------------------------------------------

    async def connect(self) -> Client:
        try:
            async with asyncio.timeout(self._connect_timeout):
                await self.refresh()
        except TimeoutError:
            raise ClientClosed(
                f"cluster not reachable within {self._connect_timeout:.0f}s"
            ) from None
        if not self._view.groups:
            raise ClientClosed(f"no broker group is registered at {self.url}")
        return self

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*(link.close() for link in self._links.values()))
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        zk, self._zk = self._zk, None
        if self._zk_exit is not None:
            atexit.unregister(self._zk_exit)
            self._zk_exit = None
        if zk is not None:
            await asyncio.to_thread(_stop_zk, zk)

    async def __aenter__(self) -> Client:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def refresh_token(self, token: str) -> None:
        """Present ``token`` from now on: each live connection sends it in a new ``hello``
        at once (the broker keeps the connection's principal; it must be the same one), and
        every later connection starts with it."""
        self._token = token
        self._link_options["token"] = token
        for link in self._links.values():
            link.set_token(token)

    # --- producing -------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: dict[str, Any] | None = None,
        durability: str = "",
    ) -> Ack:
        """Publish one record; returns once every in-sync replica holds it (``durability``:
        "memory", "written" or "synced"; "": the broker's default, docs/replication.md D4)."""
        record = [(os.urandom(16), value, key, headers)]
        return (await self._publish(topic, record, durability))[0]

    async def publish_batch(
        self,
        topic: str,
        records: Sequence[tuple[bytes, bytes, bytes | None, dict[str, Any] | None]],
        *,
        durability: str = "",
    ) -> list[Ack]:
        """Publish ``(uuid, value, key, headers)`` records with uuids the caller chose, so a
        replay of the same records is recognised by the broker's dedup (Spark's sink)."""
        return await self._publish(topic, records, durability)

    async def publish_many(
        self, topic: str, values: Iterable[bytes], *, durability: str = ""
    ) -> list[Ack]:
        """Publish many records at once (batched on the wire); acks in the same order."""
        items = [(os.urandom(16), v, None, None) for v in values]
        return await self._publish(topic, items, durability)

    async def _publish(
        self, topic: str, items: Sequence[tuple[bytes, bytes, Any, Any]], durability: str = ""
    ) -> list[Ack]:
        """Send to the topic's group; if its slot moved, re-route with the same uuids: to
        the group the refusal names (while a slot moves, the map still names the old owner,
        which refuses new writes naming the new one: docs/replication.md M2), else by the
        re-read map."""
        check_topic(topic)
        if durability and durability not in DURABILITY_LEVELS:
            raise ConfigError(f"durability must be one of {', '.join(DURABILITY_LEVELS)}")
        order = self._orders.get(topic)
        if order is None:
            order = self._orders[topic] = TopicOrder()
        call = order.enter()
        try:
            group = self._group_of(topic)
            for attempt in range(MOVE_REROUTES):
                await order.turn(call, group)  # the topic's earlier calls go first
                link = self._link(group)
                try:
                    return await link.publish_batch(topic, list(items), durability)
                except WrongGroup as e:
                    order.off(call)
                    if attempt:  # groups disagree for a moment while a slot moves
                        await asyncio.sleep(min(1.0, 0.05 * 2 ** (attempt - 1)))
                    await self._refresh_to_reroute()
                    named = e.group if e.group in self._view.groups else None
                    group = named or self._group_of(topic)
            raise WrongGroup(f"topic {topic!r} kept moving between groups")
        finally:
            order.leave(call)
            if not order:
                del self._orders[topic]

    # --- reading ranges and committing (Spark) -------------------------------------------

    async def _ask(self, frame: Fetch | Commit | SubDelete | SubReset | Presence) -> BrokerFrame:
        """One request about ``frame.topic`` to its group's primary. The link follows
        failovers until ``timeout``; a slot move re-routes; other errors are raised."""
        check_topic(frame.topic)
        for _ in range(REROUTES):
            link = self._link(self._group_of(frame.topic))
            try:
                return await link.request(frame)
            except WrongGroup:
                await self._refresh_to_reroute()
        raise WrongGroup(f"topic {frame.topic!r} kept moving between groups")

    async def fetch_raw(
        self,
        topic: str,
        start: int,
        end: int,
        *,
        max: int = 10_000,
        skip_purged: bool = False,
        group: str | None = None,
    ) -> Fetched:
        """Records of ``topic`` with ``start <= ts <= end`` (at most ``max``, up to what is
        committed): the cheap form, record tuples and ``(first_ts, ms)`` pairs. ``group``:
        ask that group (its ts) instead of the topic's owner, for the records of an era
        of a moved slot it held (:meth:`slot_history`)."""
        frame = Fetch(0, topic, start, end, max, skip_purged)
        got = await (self._ask(frame) if group is None else self._link(group).request(frame))
        if not isinstance(got, frames.Fetched):
            raise ProtocolError(f"fetch answered with {type(got).__name__}")
        return Fetched(list(got.records), list(got.published), got.next, got.purged)

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

    async def commit(
        self, topic: str, subscription: str, ts: int, *, group: str | None = None
    ) -> tuple[int, int]:
        """Acknowledge durable ``subscription`` of ``topic`` up to ``ts`` without consuming.

        Registers the subscription if it does not exist (so the broker keeps every later
        record for it); never lowers its offset. Returns ``(offset, head)``: the offset
        now and the group's commit point (its newest committed ts). Without ``group``,
        ``ts`` is the topic's owner's: a group that no longer owns it (the client's map was
        stale) answers WRONG_GROUP and the commit goes to the owner. ``group``: ``ts`` is
        that group's, which held an era of the topic's moved slot (:meth:`slot_history`):
        it acknowledges the subscription if it serves it at such an era, up to the era's
        seal point (docs/replication.md M5), else changes nothing.
        """
        frame = Commit(0, topic, subscription, ts, group)
        got = await (self._ask(frame) if group is None else self._link(group).request(frame))
        if not isinstance(got, frames.Committed):
            raise ProtocolError(f"commit answered with {type(got).__name__}")
        return got.ts, got.head

    # --- administering subscriptions (admin principals) ------------------------------------

    async def delete_subscription(
        self, topic: str, subscription: str, *, execute: bool = False
    ) -> SubInfo:
        """Delete durable ``subscription`` of ``topic`` (its offset too); without ``execute``
        a dry run. The answer says what it was; refused while consumers are connected."""
        got = await self._ask(SubDelete(0, topic, subscription, execute))
        if not isinstance(got, SubInfo):
            raise ProtocolError(f"subdel answered with {type(got).__name__}")
        return got

    async def reset_subscription(
        self, topic: str, subscription: str, to: str | int, *, execute: bool = False
    ) -> SubInfo:
        """Move durable ``subscription`` so its next record is the first retained
        (``"earliest"``), the next published (``"latest"``) or the first with ts >= ``to``;
        without ``execute`` a dry run. ``SubInfo.to`` is the offset it gets."""
        if not (to in ("earliest", "latest") or (isinstance(to, int) and to >= 0)):
            raise ConfigError("to must be 'earliest', 'latest' or a ts >= 0")
        start = to if isinstance(to, int) else From(to)
        got = await self._ask(SubReset(0, topic, subscription, start, execute))
        if not isinstance(got, SubInfo):
            raise ProtocolError(f"subreset answered with {type(got).__name__}")
        return got

    # --- presence -------------------------------------------------------------------

    async def presence(self, topic: str) -> list[PresenceMember]:
        """Who is subscribed to ``topic`` with presence now, oldest first (its primary's
        view; after a failover, those whose clients have subscribed again)."""
        got = await self._ask(Presence(0, topic))
        if not isinstance(got, Members):
            raise ProtocolError(f"presence answered with {type(got).__name__}")
        return list(got.members)

    # --- consuming -------------------------------------------------------------------

    def subscribe(
        self,
        topic: str,
        subscription: str | None = None,
        from_: str | int = "latest",
        *,
        window: int | None = None,
        mode: str = "broadcast",
        presence: bool = False,
        info: str = "",
        on_join: Callable[[PresenceMember], object] | None = None,
        on_leave: Callable[[PresenceMember], object] | None = None,
    ) -> Subscription:
        """``async with client.subscribe(topic) as sub: async for msg in sub: await msg.ack()``.

        Naming a ``subscription`` makes it durable: its offset lives in ZooKeeper and
        ``from_="latest"`` resumes after what it acknowledged. ``mode="shared"``
        splits its records among every consumer using the same name.

        ``presence=True`` lists this subscription among the topic's members (with ``info``,
        what it says about itself) and calls ``on_join``/``on_leave`` with each other
        member that comes or goes; it is asked for again on every reconnect, so a new
        primary knows it after a failover (docs/protocol.md §13).
        """
        check_topic(topic)  # InvalidName: a pattern ("chat.*") is refused, not taken literally
        if not (from_ in ("latest", "earliest") or (isinstance(from_, int) and from_ >= 0)):
            raise ConfigError("from_ must be 'latest', 'earliest' or a ts >= 0")
        if mode not in ("broadcast", "shared"):
            raise ConfigError("mode must be 'broadcast' or 'shared'")
        if mode == "shared" and not subscription:
            raise ConfigError("a shared subscription needs a name")
        if not presence and (info or on_join or on_leave):
            raise ConfigError("info, on_join and on_leave need presence=True")
        link = self._link(self._group_of(topic))
        opts = PresenceOptions(info, on_join, on_leave) if presence else None
        return link.new_subscription(topic, subscription, from_, window, mode, opts)


def _refusal(e: frames.Error) -> Exception:
    return error_from_wire(str(e.code), e.message, e.retriable, e.primary, e.group)


async def _hello(url: str, tls: ssl.SSLContext | None, token: str | None = None) -> BrokerFrame:
    """One broker's own view of its group (``hello``: no cluster read on its side)."""
    async with websockets.connect(
        url,
        ssl=tlsconfig.for_url(url, tls),
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        open_timeout=1,
        close_timeout=1,
        compression=None,
    ) as ws:
        await ws.send(MSGPACK.encode(Hello("tritonmq-python", token)))
        async with asyncio.timeout(1):
            return MSGPACK.decode_broker(await ws.recv())


def _stop_zk(zk: KazooClient) -> None:
    zk.stop()
    zk.close()
