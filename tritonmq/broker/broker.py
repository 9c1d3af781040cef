"""One broker process: decode -> :class:`BrokerCore` -> perform.

The shell owns the sockets, the ZooKeeper client, the clock and the tasks; the
core owns every decision. Every event goes through :meth:`Broker.feed`, and every
action the core returns goes through the one ``match`` in :meth:`Broker.perform`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections.abc import Iterable
from socket import gethostname
from typing import Any, assert_never

import websockets
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from websockets.asyncio.server import Server, ServerConnection

from tritonmq import tlsconfig
from tritonmq.broker import clients, http, moves, replica
from tritonmq.broker.admission import (
    CLOSE_NO_HELLO,
    CLOSE_POLICY,
    Admission,
    fit_fd_limit,
)
from tritonmq.broker.credentials import BrokerCredentials, load_credentials, warn_if_insecure
from tritonmq.broker.disk import Disk
from tritonmq.broker.inbound import (
    AdmissionCollector,
    InboundBudget,
    TrackedConnection,
    evict,
    tracked,
)
from tritonmq.broker.metrics import BrokerMetrics
from tritonmq.broker.origin import origin_check
from tritonmq.broker.outbound import Outbound, OutboundBudget
from tritonmq.broker.spawner import Spawner
from tritonmq.config import BrokerConfig
from tritonmq.coord.group import GroupCoordinator
from tritonmq.coord.offsets import Offsets
from tritonmq.core.actions import (
    Action,
    AskHandover,
    BeginSlotMove,
    CloseConn,
    CloseLink,
    DeleteSubscription,
    Deliver,
    LoadSubscriptions,
    LogLine,
    ProposeIsr,
    ProposeSlotStep,
    ProposeState,
    ReadState,
    RegisterSubscription,
    Replicate,
    ReplicateDedup,
    SendCommitted,
    SendDedup,
    SendEntries,
    SendError,
    SendFetched,
    SendHandover,
    SendLeader,
    SendMeta,
    SendPresence,
    SendPubAck,
    SendPurge,
    SendShared,
    SendSlotInfo,
    SendStats,
    SendSubInfo,
    SendSubOk,
    SendToPrimary,
    StartFollowing,
    StopFollowing,
    Stopped,
    StoreOffsets,
    SyncLog,
    WriteLog,
)
from tritonmq.core.auth import Origins, broker_origins, own_names
from tritonmq.core.broker import STOP_FLUSH_S, BrokerCore
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    Event,
    OffsetsStored,
    SessionChanged,
    StopRequested,
    SubscriptionRegistered,
    SubscriptionsLoaded,
    Synced,
    Tick,
    ZkView,
)
from tritonmq.core.group import GroupState, Member
from tritonmq.core.health import Readiness, readiness
from tritonmq.storage.recovery import open_data_dir
from tritonmq.tokens import TokenVerifier
from tritonmq.wire import codec, repl
from tritonmq.wire.frames import (
    REPL_SUBPROTOCOL,
    SUBPROTOCOL,
    ErrorCode,
    Follow,
    ReplAck,
    SharedAck,
)
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL

log = logging.getLogger("tritonmq.broker")
TICK = 0.1
META_DEADLINE = 3.0
ORIGINS_EVERY = 5.0  # the cluster's brokers are re-read for the Origin check at most this often
CLOSE_DEADLINE = 2.0  # closing the server and its connections on a planned stop, at most


class Broker:
    def __init__(self, cfg: BrokerConfig, creds: BrokerCredentials | None = None) -> None:
        self.cfg = cfg
        self.creds = creds
        self.boot = uuid.uuid4().hex[:12]
        self.core: BrokerCore | None = None
        self.disk: Disk | None = None  # segment files (a data_dir), else memory only
        self.coord: GroupCoordinator | None = None
        self.cluster_origins: Origins = frozenset()  # see _learn_origins
        self.own_names: frozenset[str] = frozenset()  # our host names, once bound (Origin)
        self._origins_read_at = -ORIGINS_EVERY
        self.offsets: Offsets | None = None
        self.server: Server | None = None
        self.repl_server: Server | None = None  # only brokers of the group connect here
        self.url = ""
        self.repl_url = ""  # what peers dial (advertise_repl, e.g. a proxy, or the listener)
        self.repl_bound = ""  # HOST:PORT the replication listener is bound to
        self.tasks = Spawner()
        self.follows: dict[int, asyncio.Task[None]] = {}
        self.follow_links: dict[int, Any] = {}
        self.repl_tls = tlsconfig.replication_context(cfg) if cfg.tls_ca else None
        self._session = None
        self._read_covered = 0  # the latest ReadState request a finished read began after
        self._groups_read: asyncio.Task[dict[str, Any] | None] | None = None
        # Client connections: unauthenticated ones (until the core accepts a frame: a hello)
        # have a deadline and a cap of their own, never the room of authenticated clients.
        self.admission = Admission(
            what="client connection",
            max_pending=cfg.max_unauthenticated,
            timeout=cfg.hello_timeout,
            close_code=CLOSE_NO_HELLO,
            timeout_reason="no hello in time",
            max_admitted=cfg.max_connections,
        )
        # Replication links: admitted once the core attaches a follow (or answers a handover).
        self.repl_admission = Admission(
            what="replication link",
            max_pending=cfg.max_repl_pending,
            timeout=cfg.repl_auth_timeout,
            close_code=CLOSE_POLICY,
            timeout_reason="no follow in time",
            count_left=True,
        )
        fit_fd_limit(cfg.max_connections + cfg.max_unauthenticated + cfg.max_repl_pending)
        self.inbound = InboundBudget(cfg.max_inbound_bytes, evict)
        # What client connections hold on their way out: per connection and per broker.
        self.outbound = Outbound(
            cfg.max_outbound_bytes,
            self.tasks.spawn,
            budget=OutboundBudget(cfg.max_outbound_total_bytes),
            evicted=self.admission.evicted,
        )
        self._stopping = asyncio.Event()
        self._stopped = asyncio.Event()
        self.tokens = TokenVerifier.from_config(cfg)
        self.metrics = BrokerMetrics(
            cfg, lambda: self.core, lambda: (self.admission.open, self.admission.refused)
        )
        self.metrics.registry.register(
            AdmissionCollector(
                cfg.group,
                self.admission,
                self.repl_admission,
                self.inbound,
                lambda: self.outbound.budget.total if self.outbound.budget else 0,
            )
        )
        self.http = http.HttpRoutes(http.load_web_files(), self._readiness, self.metrics.exposition)

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        creds = self.creds = self.creds or load_credentials(self.cfg)
        warn_if_insecure(creds)
        host, _, port = self.cfg.listen.rpartition(":")
        # The client port speaks tritonmq.v1 (and .json) only: a handshake asking for replication fails
        # there (HTTP 400), so a client connection can never become a replication link.
        tls = tlsconfig.server_context(self.cfg)
        self.server = await websockets.serve(
            self._serve_client,
            host or "127.0.0.1",
            int(port),
            subprotocols=[SUBPROTOCOL, JSON_SUBPROTOCOL],  # type: ignore[list-item]
            # max_hello_bytes until admitted, then max_frame_bytes (TrackedConnection.admitted)
            max_size=self.cfg.max_hello_bytes,
            create_connection=tracked(self.admission, self.inbound, self.cfg.max_frame_bytes),
            compression=None,
            ping_interval=5,
            ping_timeout=max(5.0, self.cfg.session_timeout * 2),
            close_timeout=1,
            max_queue=self.cfg.max_queue,
            ssl=tls,
            process_request=http.plain_http(
                self.http,
                self.admission.process_request,
                self.admission.after(
                    origin_check(
                        self.cfg.allowed_origins,
                        lambda: self.cluster_origins,
                        self._learn_origins,
                        lambda: self.own_names,
                    )
                ),
            ),
        )
        sock = next(iter(self.server.sockets))
        bound_host, bound_port = sock.getsockname()[:2]
        scheme = "wss" if tls is not None else "ws"
        self.url = f"{scheme}://{self.cfg.advertise_host or bound_host}:{bound_port}"
        self.own_names = own_names(self.url, bound_host, self.cfg.advertise_host, gethostname())
        repl_host, _, repl_port = (self.cfg.repl_listen or f"{host}:0").rpartition(":")
        self.repl_server = await websockets.serve(
            self._serve_follower,
            repl_host or "127.0.0.1",
            int(repl_port),
            subprotocols=[REPL_SUBPROTOCOL],  # type: ignore[list-item]
            max_size=replica.FOLLOWER_MAX_FRAME,
            compression=None,
            ping_interval=5,
            ping_timeout=max(5.0, self.cfg.session_timeout * 2),
            close_timeout=1,
            max_queue=16,
            ssl=tls,
            create_connection=tracked(self.repl_admission),
        )
        repl_sock = next(iter(self.repl_server.sockets))
        repl_bound_host, repl_bound_port = repl_sock.getsockname()[:2]
        self.repl_bound = f"{repl_bound_host}:{repl_bound_port}"
        self.repl_url = self.cfg.advertise_repl or (
            f"{scheme}://{self.cfg.advertise_host or repl_bound_host}:{repl_bound_port}"
        )
        recovered = None
        if self.cfg.data_dir:  # the log and incarnation its segment files describe
            opened = await asyncio.to_thread(
                open_data_dir, self.cfg.data_dir, self.cfg.segment_bytes
            )
            self.disk = Disk(self.cfg, opened.store, self.feed, opened.log.last_ts)
            self.boot, recovered = opened.boot, opened.log
        me = Member(self.cfg.id, self.url, self.boot, self.repl_url)
        self.core = BrokerCore(self.cfg, me, creds.secret, log=recovered)
        if recovered is not None:  # recovery fsynced what it read: the core may count on it
            self.feed(Synced(recovered.last_ts, time.monotonic()))
        self.coord = GroupCoordinator(
            self.cfg.zk,
            self.cfg.chroot,
            self.cfg.group,
            me,
            session_timeout=self.cfg.session_timeout,
            on_change=self._zk_changed,
            spawn=self.tasks.spawn,
            auth=creds.zk,
            reader=creds.zk_reader,
        )
        await self.coord.start()
        self.offsets = Offsets(self.coord)
        log.info(
            "broker %s of group %s listening on %s, replication on %s (boot %s)",
            self.cfg.id,
            self.cfg.group,
            self.url,
            self.repl_url,
            self.boot,
        )
        if not self.cfg.auth_required:
            log.warning(
                "ANONYMOUS ACCESS: clients need no token and may publish, read, and delete or "
                "reset any subscription (set auth_required for production; docs/security.md)"
            )
        self._zk_changed()
        self.tasks.spawn(self._ticker(), "ticker")
        if self.disk is not None:
            self.tasks.spawn(self.disk.run(lambda: self.core.log if self.core else None), "disk")
        if "*" not in self.cfg.allowed_origins:
            self._learn_origins()  # in the background: the brokers known at start

    async def serve_forever(self) -> None:
        await self._stopping.wait()

    def request_stop(self) -> None:
        self._stopping.set()

    async def stop(self) -> None:
        """Planned stop: step down, write offsets, close the ZooKeeper session so a backup
        takes over at once, then close the server. Every wait has a deadline."""
        if self.core is not None:
            self.feed(StopRequested(time.monotonic()))
            try:
                async with asyncio.timeout(STOP_FLUSH_S + 0.5):
                    await self._stopped.wait()
            except TimeoutError:
                log.warning("offsets not written before the stop deadline")
        await self.tasks.cancel_all(timeout=1.0)
        if self.disk is not None:
            await self.disk.close()
        if self.coord is not None:
            await self.coord.stop()
        servers = [s for s in (self.server, self.repl_server) if s is not None]
        for server in servers:
            server.close()
        try:
            closed = asyncio.gather(*(server.wait_closed() for server in servers))
            async with asyncio.timeout(CLOSE_DEADLINE):
                await closed
        except TimeoutError:
            log.warning("connections still open after %.1fs; exiting anyway", CLOSE_DEADLINE)

    # --- events in ----------------------------------------------------------------

    def feed(self, event: Event) -> None:
        assert self.core is not None
        self.metrics.event_in(event)
        self.perform(self.core.handle(event))
        self.metrics.handled(event)

    def _readiness(self) -> Readiness:
        if self.core is None:
            return Readiness(False, "starting")
        return readiness(self.core)

    def _zk_changed(self) -> None:
        coord = self.coord
        if coord is None or self.core is None:
            return
        now = time.monotonic()
        if coord.session is not self._session:
            self._session = coord.session  # type: ignore[assignment]
            self.feed(SessionChanged(coord.session, now))
        if coord.registered:  # after a lost session, the view is stale until we are back
            hs, read = coord.slot_histories, self._read_covered
            self.feed(ZkView(coord.state, dict(coord.members), coord.slot_map, now, hs, read))

    def _learn_origins(self) -> None:
        """(Re)read the cluster's brokers, whose pages the Origin check allows: once at start
        and when a page is refused (it may come from a broker that joined since), at most
        every :data:`ORIGINS_EVERY` seconds, sharing ``meta``'s read of the cluster."""
        coord, now = self.coord, time.monotonic()
        if coord is None or now - self._origins_read_at < ORIGINS_EVERY:
            return
        self._origins_read_at = now

        async def read() -> None:
            groups = await self._cluster_read(coord)
            if groups is not None:
                urls = (url for g in groups.values() for url in g["members"].values())
                self.cluster_origins = broker_origins(urls)

        self.tasks.spawn(read(), "read-origins")

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            self.feed(Tick(time.monotonic()))
            self.admission.sweep()
            self.repl_admission.sweep()

    async def _serve_client(self, ws: ServerConnection) -> None:
        try:
            await clients.serve(
                ws, self.cfg, self._feed_client, self.outbound.accepting, self.tokens.verify
            )
        finally:
            self.outbound.forget(ws)

    def _feed_client(self, event: Event) -> None:
        """Feed a client's event; the first frame the core accepts admits the connection."""
        self.feed(event)
        if isinstance(event, ClientFrameIn) and event.conn in self.admission.pending:
            core, conn = self.core, event.conn
            if core is not None and core.auth.admitted(conn) and self.admission.admit(conn):
                assert isinstance(conn, TrackedConnection)
                conn.admitted()

    async def _serve_follower(self, ws: ServerConnection) -> None:
        await replica.serve_follower(ws, self.feed, secrets.token_bytes(replica.NONCE_BYTES))

    # --- actions out -----------------------------------------------------------------

    def perform(self, actions: Iterable[Action]) -> None:
        core = self.core
        assert core is not None
        group = self.cfg.group
        for a in actions:
            match a:
                case SendPubAck(conn=conn, id=pub_id, ts=ts, eras=eras):
                    self.outbound.send(conn, codec.enc_puback(pub_id, ts, group, eras))
                    self.metrics.acked(conn, pub_id, len(ts))
                case Deliver(conn=conn, sid=sid, topic=topic, records=records, era=era):
                    data = codec.enc_deliver(sid, topic, records, era)
                    self.outbound.send(conn, data)
                    born = core.log.published_at(records[0][0]) if records else None
                    self.metrics.delivered_frame(records, len(data), born)
                case SendError():
                    self.metrics.refused_request(a.code, a.conn, a.id)
                    hint = a.primary
                    if hint is None and a.code is ErrorCode.NOT_PRIMARY:
                        hint = core.primary_url()
                    frame = codec.enc_error(
                        a.code,
                        a.message,
                        id=a.id,
                        sid=a.sid,
                        primary=hint,
                        group=a.group,
                        first=a.first,
                        last=a.last,
                        era=a.era,
                        after=a.after,
                    )
                    self.outbound.send(a.conn, frame)
                case SendSubOk(conn=conn, sid=sid, next_ts=next_ts, era=era):
                    self.outbound.send(conn, codec.enc_subok(sid, next_ts, era))
                case SendFetched(conn=conn, id=fid, records=records, next_ts=next_ts):
                    data = codec.enc_fetched(fid, records, next_ts, a.published, a.purged)
                    self.outbound.send(conn, data)
                case SendCommitted(conn=conn, id=cid, ts=ts, head=head):
                    self.outbound.send(conn, codec.enc_committed(cid, ts, head))
                case SendSubInfo(conn=conn, info=info):
                    self.outbound.send(conn, codec.enc_subinfo(info))
                case SendPresence(conn=conn, frame=reply) | SendStats(conn=conn, stats=reply):
                    self.outbound.send(conn, codec.enc_broker(reply))
                case SendMeta(conn=conn, info=info, cluster=cluster):
                    if cluster:
                        self.tasks.spawn(self._send_meta(conn, dict(info)), "meta")
                    else:
                        self.outbound.send(conn, codec.packb(dict(info)))
                case CloseConn(conn=conn, code=code, reason=reason):
                    self.tasks.spawn(self.outbound.close(conn, code, reason), "close-conn")
                case SendEntries(links=links, epoch=epoch, commit=commit, start=start, end=end):
                    entries, published = core.entries_for(start, end)
                    data = repl.enc_append(epoch, commit, start, entries, published, a.sync)
                    websockets.broadcast(links, data)
                case SendLeader(link=link, leader=leader):
                    self.repl_admission.admit(link)  # the core attached its follow
                    self.send(link, repl.enc_leader(leader))
                case SendDedup(link=link, page=page):
                    self.send(link, repl.enc_dedup(page))
                case SendPurge(links=links, purge=purge):
                    if links:
                        websockets.broadcast(links, repl.enc_purge(purge))
                case SendShared(links=links, shared=shared):
                    websockets.broadcast(links, repl.enc_shared(shared))
                case CloseLink(link=link, reason=reason, code=code):
                    self.repl_admission.refused_by_core(link)  # counted if never admitted
                    if code is not None:
                        self.send(link, codec.enc_error(code, reason))
                    self.tasks.spawn(link.close(1000 if code else 1012, reason[:100]), "close")
                case StartFollowing(follow_id=fid, primary=primary):
                    self.follows[fid] = self.tasks.spawn(
                        replica.follow(
                            fid,
                            primary,
                            self.cfg.listen,
                            self.follow_links,
                            self.feed,
                            tls=self.repl_tls,
                        ),
                        f"follow-{primary.id}",
                    )
                case StopFollowing(follow_id=fid):
                    task = self.follows.pop(fid, None)
                    if task is not None:
                        task.cancel()
                case SendToPrimary(follow_id=fid, frame=frame):
                    ws = self.follow_links.get(fid)
                    if ws is not None:
                        match frame:
                            case Follow():
                                self.send(ws, repl.enc_follow(frame))
                            case ReplAck():
                                rack = repl.enc_rack(frame.epoch, frame.ts, frame.synced)
                                self.send(ws, rack)
                            case SharedAck():
                                self.send(ws, repl.enc_sack(frame))
                            case _:
                                assert_never(frame)
                case ProposeState(request=request, state=state, reason=reason):
                    self.tasks.spawn(self._cas(request, state, reason), "cas")
                case ReadState(request=request):
                    self.tasks.spawn(self._read_state(request), "read-state")
                case LoadSubscriptions(request=request):
                    self.tasks.spawn(self._load(request), "load-subscriptions")
                case StoreOffsets(offsets=offsets, eras=eras):
                    self.tasks.spawn(self._store(offsets, eras, a.fence), "store-offsets")
                case RegisterSubscription(topic=topic, name=name, mode=mode, offset=offset):
                    reg = self._register(topic, name, mode, offset, a.owner, a.era, a.fence)
                    self.tasks.spawn(reg, "register")
                case DeleteSubscription(topic=topic, name=name):
                    self.tasks.spawn(self._delete(topic, name), "delete-subscription")
                case LogLine(level=level, message=message):
                    log.log(level, "%s", message)
                case WriteLog(ops=ops):  # first of its event's actions (D1)
                    assert self.disk is not None
                    self.disk.write(ops, core.log.last_ts)
                case SyncLog():
                    if self.disk is not None:
                        self.disk.sync_soon()
                case Stopped():
                    self._stopped.set()
                case ProposeSlotStep():
                    assert self.coord is not None
                    step = moves.perform_step(self.coord.zk, self.cfg.chroot, group, a, self.feed)
                    self.tasks.spawn(step, f"slot-{a.slot}-{a.step.value}")
                case BeginSlotMove():
                    assert self.coord is not None
                    begin = moves.perform_begin(self.coord.zk, self.cfg.chroot, a, self.feed)
                    self.tasks.spawn(begin, f"slot-{a.slot}-begin")
                case SendSlotInfo(conn=conn, info=info):
                    self.outbound.send(conn, codec.enc_slotinfo(info))
                case AskHandover():
                    assert self.coord is not None and self.creds is not None
                    ask = moves.ask_handover(
                        a,
                        zk=self.coord.zk,
                        chroot=self.cfg.chroot,
                        me=core.me,
                        group=group,
                        secret=self.creds.secret,
                        tls=self.repl_tls,
                        feed=self.feed,
                    )
                    self.tasks.spawn(ask, f"handover-{a.slot}")
                case SendHandover(link=link, pairs=pairs):
                    self.repl_admission.admit(link)  # another group's primary, its ask proven
                    self.send(link, repl.enc_handover_pairs(pairs))
                case Replicate() | ReplicateDedup() | ProposeIsr():
                    raise AssertionError(f"BrokerCore never returns {a!r}")
                case _:
                    assert_never(a)

    @staticmethod
    def send(conn: Any, data: bytes) -> None:
        """Queue ``data`` on a replication link without waiting (a closed link drops it).
        Client connections go through :class:`Outbound`, which bounds what they hold."""
        websockets.broadcast((conn,), data)

    # --- ZooKeeper work the core asked for ----------------------------------------------

    @staticmethod
    async def _read_groups(coord: GroupCoordinator) -> dict[str, Any] | None:
        """The cluster view for ``meta``. One read is in flight at a time and every ``meta``
        that arrives meanwhile shares it: a flood of ``meta`` frames (15 bytes each) costs
        ZooKeeper one read per round trip, not several round trips each."""
        try:
            return await coord.read_groups()
        except Exception as e:  # ZooKeeper unreachable: answer with what we know
            log.debug("meta without cluster view: %s", e)
            return None

    async def _cas(self, request: int, state: GroupState, reason: str) -> None:
        coord = self.coord
        assert coord is not None
        outcome, written = CasOutcome.UNKNOWN, None
        try:
            if state.version == -1:
                written = await coord.create_state(state)
            else:
                written = await coord.cas_state(state)
            outcome = CasOutcome.OK if written is not None else CasOutcome.CONFLICT
        except (BadVersionError, NoNodeError, NodeExistsError):
            outcome = CasOutcome.CONFLICT
        except Exception as e:  # ConnectionLoss, SessionExpired...: it may have been written
            log.warning("state CAS (%s) outcome unknown: %r", reason, e)
        self.feed(CasDone(request, outcome, written, time.monotonic()))

    async def _read_state(self, request: int) -> None:
        """Re-read the group; the views from then on say they were read after ``request``
        (the core judges a CAS of unknown outcome only by such a read)."""
        coord = self.coord
        assert coord is not None
        while not await coord.refresh():
            await asyncio.sleep(0.2)
        self._read_covered = max(self._read_covered, request)
        self._zk_changed()

    async def _load(self, request: int) -> None:
        assert self.offsets is not None and self.core is not None
        core = self.core
        found: list[tuple[str, str, str, int]] | None
        owners: dict[tuple[str, str], str] = {}
        eras: dict[tuple[str, str], int] = {}

        def ours(t: str) -> bool:  # owned, or of a moved slot we held an era of (M5)
            return core.slots is None or core.slots.group_of(t) == group or bool(held(t))

        group, held = self.cfg.group, core.moves.serves_fetch
        try:
            found = await self.offsets.load(ours, owners, eras)
        except Exception as e:  # ZooKeeper unreachable: the core retries
            log.warning("loading subscriptions failed: %s", e)
            found = None
        self.feed(SubscriptionsLoaded(request, found, time.monotonic(), owners, eras))

    async def _store(
        self,
        offsets: tuple[tuple[str, str, int], ...],
        eras: tuple[int, ...] = (),
        fence: int | None = None,
    ) -> None:
        assert self.offsets is not None
        ok = True
        try:
            async with asyncio.timeout(STOP_FLUSH_S):
                await self.offsets.store(offsets, eras, fence)
        except Exception as e:
            log.warning("storing %d offset(s) failed: %r", len(offsets), e)
            ok = False
        self.feed(OffsetsStored(offsets, ok, time.monotonic(), eras))

    async def _delete(self, topic: str, name: str) -> None:
        assert self.offsets is not None
        try:
            await self.offsets.delete(topic, name)
        except Exception as e:  # it comes back on the next load: say so
            log.error("deleting subscription %s/%s from ZooKeeper failed: %s", topic, name, e)

    async def _register(
        self,
        topic: str,
        name: str,
        mode: str,
        offset: int,
        owner: str,
        era: int = 0,
        fence: int | None = None,
    ) -> None:
        assert self.offsets is not None
        held: int | None
        try:
            held, era = await self.offsets.register(topic, name, mode, offset, owner, era, fence)
        except Exception as e:
            log.warning("registering subscription %s/%s failed: %s", topic, name, e)
            held = None
        self.feed(SubscriptionRegistered(topic, name, held, time.monotonic(), era))

    def _cluster_read(self, coord: GroupCoordinator) -> asyncio.Task[dict[str, Any] | None]:
        """The read of every group's brokers in flight, or a new one (see :meth:`_read_groups`)."""
        if self._groups_read is None or self._groups_read.done():
            self._groups_read = self.tasks.spawn(self._read_groups(coord), "read-groups")
        return self._groups_read

    async def _send_meta(self, conn: Any, frame: dict[str, Any]) -> None:
        """``meta`` plus the slot map and every group's brokers, so a ws:// client can route."""
        coord = self.coord
        if coord is not None:
            try:  # shielded: one waiter's deadline does not cancel the others' read
                async with asyncio.timeout(META_DEADLINE):
                    groups = await asyncio.shield(self._cluster_read(coord))
            except TimeoutError:
                groups = None
            if groups is not None:
                frame["groups"] = groups
            if coord.slot_map is not None:
                frame["slots"] = coord.slot_map.as_dict()
        self.outbound.send(conn, codec.packb(frame))
