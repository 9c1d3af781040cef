"""One broker process: a websocket server, a ZooKeeper view, and the pure core between them.

The reconcile loop wakes on every ZooKeeper change, asks
:func:`tritonmq.core.group.decide` what to do and does it. The primary's and
backup's rules live in :mod:`tritonmq.core.replication`; this module performs
the actions they return.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

import websockets
from websockets.asyncio.server import Server, ServerConnection

from tritonmq.broker import clients, offsets, replica
from tritonmq.config import BrokerConfig
from tritonmq.coord.group import GroupCoordinator, Session
from tritonmq.coord.offsets import Offsets
from tritonmq.core.actions import (
    Action,
    Deliver,
    ProposeIsr,
    RegisterSubscription,
    Replicate,
    SendError,
    SendPubAck,
)
from tritonmq.core.delivery import Delivery
from tritonmq.core.group import Member, Verdict, decide
from tritonmq.core.log import GroupLog
from tritonmq.core.replication import BackupCore, PrimaryCore
from tritonmq.core.retention import Retention
from tritonmq.wire import codec
from tritonmq.wire.frames import REPL_SUBPROTOCOL, SUBPROTOCOL, ErrorCode

log = logging.getLogger("tritonmq.broker")
TICK = 0.1


class Broker:
    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.boot = uuid.uuid4().hex[:12]
        self.log = GroupLog()
        self.delivery = Delivery(
            self.log,
            window=cfg.window_records,
            window_bytes=cfg.window_bytes,
            ack_timeout=cfg.ack_timeout,
            grace=cfg.ephemeral_grace,
        )
        self.retention = Retention(
            default_s=cfg.retention_s,
            per_topic=cfg.topic_retention,
            dedup_window_s=cfg.dedup_window_s,
        )
        self.durables_ready = asyncio.Event()
        self.primary: PrimaryCore | None = None
        self.backup: BackupCore | None = None
        self.commit_ts = 0  # what we know is committed (as backup: from the primary's appends)
        self.follow_task: asyncio.Task[None] | None = None
        self.following: tuple[str, int] | None = None
        self.suspect: Member | None = None  # a primary we saw die before ZooKeeper did
        self.repl_links: dict[str, ServerConnection] = {}
        self.coord: GroupCoordinator | None = None
        self.server: Server | None = None
        self.url = ""
        self.me: Member | None = None
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._last_wait = ""
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        host, _, port = self.cfg.listen.rpartition(":")
        self.server = await websockets.serve(
            self._handle,
            host or "127.0.0.1",
            int(port),
            subprotocols=[SUBPROTOCOL, REPL_SUBPROTOCOL],  # type: ignore[list-item]
            max_size=self.cfg.max_frame_bytes,
            compression=None,
            ping_interval=5,
            ping_timeout=max(5.0, self.cfg.session_timeout * 2),
            max_queue=64,
        )
        sock = next(iter(self.server.sockets))
        bound_host, bound_port = sock.getsockname()[:2]
        self.url = f"ws://{self.cfg.advertise_host or bound_host}:{bound_port}"
        self.me = Member(self.cfg.id, self.url, self.boot, self.cfg.advertise_repl)
        self.coord = GroupCoordinator(
            self.cfg.zk,
            self.cfg.chroot,
            self.cfg.group,
            self.me,
            session_timeout=self.cfg.session_timeout,
            on_change=self._wake.set,
        )
        await self.coord.start()
        self.offsets = Offsets(self.coord)
        log.info(
            "broker %s of group %s listening on %s (boot %s)",
            self.cfg.id,
            self.cfg.group,
            self.url,
            self.boot,
        )
        self._tasks = [
            asyncio.ensure_future(self._reconcile()),
            asyncio.ensure_future(self._ticker()),
            asyncio.ensure_future(offsets.run(self)),
        ]

    async def serve_forever(self) -> None:
        await self._stopping.wait()

    def request_stop(self) -> None:
        self._stopping.set()

    async def stop(self) -> None:
        """Planned stop: close the ZooKeeper session first so a backup takes over at once."""
        for t in self._tasks:
            t.cancel()
        if self.follow_task:
            self.follow_task.cancel()
            await asyncio.gather(self.follow_task, return_exceptions=True)
        if self.primary is not None:
            await offsets.flush_now(self)
            self._step_down("shutting down")
        if self.coord is not None:
            await self.coord.stop()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    # --- decisions ---------------------------------------------------------------

    async def _reconcile(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._reconcile_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconcile step failed; retrying")
                await asyncio.sleep(0.2)
                self._wake.set()

    async def _reconcile_once(self) -> None:
        coord, me = self.coord, self.me
        assert coord is not None and me is not None
        if coord.session != Session.CONNECTED:
            if self.primary is not None:
                if coord.session == Session.LOST:
                    self._step_down("ZooKeeper session lost")
                elif self.primary.accepting:
                    self.primary.accepting = False
                    log.warning("ZooKeeper session suspended: refusing writes")
            return
        if not coord.registered:
            return
        state = coord.state
        if self.primary is not None:
            p = self.primary
            if (
                state is None
                or state.epoch != p.epoch
                or state.primary != me.id
                or state.boots.get(me.id) != me.boot
            ):
                self._step_down(f"group state moved to epoch {state.epoch if state else '?'}")
            else:
                if not p.accepting:
                    log.info("ZooKeeper session back: accepting writes")
                    p.accepting = True
                if p.proposal is None and (set(state.isr) != p.isr or dict(state.boots) != p.boots):
                    self.perform(p.isr_changed(state))
                self.perform(
                    p.members_changed(
                        {m.id: m.boot for m in coord.members.values()}, time.monotonic()
                    )
                )
                return
        d = decide(
            me,
            state,
            coord.members,
            self.log.last_ts,
            unclean_election=self.cfg.unclean_election,
            suspect=self.suspect,
        )
        if d.verdict is Verdict.CREATE:
            assert d.state is not None
            created = await coord.create_state(d.state)
            if created is not None:
                self._become_primary(created)
            else:
                await coord.refresh()
        elif d.verdict is Verdict.CLAIM:
            assert d.state is not None
            # Leave the old epoch before claiming: from here on we acknowledge nothing of it.
            self._stop_following()
            won = await coord.cas_state(d.state)
            if won is not None:
                log.info(
                    "elected primary of %s: epoch %d, isr %s (%s)",
                    self.cfg.group,
                    won.epoch,
                    list(won.isr),
                    d.reason,
                )
                self._become_primary(won)
            else:
                await coord.refresh()
        elif d.verdict is Verdict.FOLLOW:
            assert d.state is not None and d.primary is not None
            if self.following != (d.primary.id, d.state.epoch):
                self._start_following(d.primary, d.state.epoch)
        else:
            if d.reason != self._last_wait:
                log.info("waiting: %s", d.reason)
                self._last_wait = d.reason

    def _become_primary(self, state: Any) -> None:
        self._stop_following()
        commit = self.backup.commit_ts if self.backup else self.commit_ts
        self.backup = None
        self.primary = PrimaryCore(
            self.cfg.id,
            self.log,
            state,
            min_insync=self.cfg.effective_min_insync,
            lag_timeout=self.cfg.replica_lag_timeout,
            commit_ts=commit,
            now=time.monotonic(),
            max_bytes=self.cfg.max_bytes,
            dedup_max=self.cfg.dedup_max,
        )
        self.durables_ready.clear()
        # The old primary's unnamed subscribers are unknown here: purge nothing until
        # they have had their grace period to reattach.
        self.delivery.freeze_purge(time.monotonic() + self.cfg.ephemeral_grace)
        asyncio.ensure_future(offsets.load(self, self.primary))
        self.commit_ts = self.primary.commit_ts
        assert self.coord is not None
        self.perform(
            self.primary.members_changed(
                {m.id: m.boot for m in self.coord.members.values()}, time.monotonic()
            )
        )
        self._wake.set()

    def _step_down(self, reason: str) -> None:
        p = self.primary
        if p is None:
            return
        log.warning("stepping down as primary of epoch %d: %s", p.epoch, reason)
        self.primary = None
        for ws in list(self.repl_links.values()):
            asyncio.ensure_future(ws.close(1012, "primary stepped down"))
        self.repl_links.clear()
        self.perform(p.step_down())
        for c in list(self.delivery.consumers.values()):
            self.send(
                c.conn, codec.enc_error(ErrorCode.NOT_PRIMARY, "primary stepped down", sid=c.sid)
            )
        self.delivery.drop_all()
        self.durables_ready.clear()
        self._wake.set()

    def suspect_dead(self, primary: Member) -> None:
        """Our link to the primary is refused: its process is gone. Decide without waiting."""
        if self.suspect != primary:
            log.warning("primary %s refuses connections: treating it as gone", primary.id)
            self.suspect = primary
            self._wake.set()

    def _start_following(self, primary: Member, epoch: int) -> None:
        self._stop_following()
        if self.suspect is not None and self.suspect.id != primary.id:
            self.suspect = None
        self.following = (primary.id, epoch)
        self.backup = BackupCore(self.log, epoch)
        self.backup.commit_ts = self.commit_ts
        log.info("following %s at epoch %d", primary.id, epoch)
        self.follow_task = asyncio.ensure_future(replica.follow(self, primary, epoch))

    def _stop_following(self) -> None:
        if self.backup is not None:
            self.commit_ts = max(self.commit_ts, self.backup.commit_ts)
        if self.follow_task is not None:
            self.follow_task.cancel()
            self.follow_task = None
        self.following = None

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            p = self.primary
            coord = self.coord
            if (
                p is not None
                and coord is not None
                and coord.session is Session.SUSPENDED
                and time.monotonic() - coord.suspended_since > self.cfg.session_timeout
            ):
                # ZooKeeper has surely expired us by now; it only says so once we reach it
                # again. Let our clients go to the new primary instead of waiting for that.
                self._step_down("ZooKeeper unreachable for longer than the session timeout")
                continue
            if p is not None:
                now = time.monotonic()
                self.perform(p.tick(now))
                self.perform(self.delivery.tick(p.commit_ts, now))
                self.retention.committed(p.commit_ts, now)
                replica.heartbeat(self, p)

    # --- performing actions -----------------------------------------------------------

    def perform(self, actions: Iterable[Action]) -> None:
        p = self.primary
        for a in actions:
            if type(a) is SendPubAck:
                self.send(a.conn, codec.enc_puback(a.id, a.ts, self.cfg.group))
            elif type(a) is Replicate:
                if p is not None:
                    replica.send_entries(self, p, a)
            elif type(a) is Deliver:
                self.send(a.conn, codec.enc_deliver(a.sid, a.topic, a.records))
            elif type(a) is SendError:
                hint = self.primary_url() if a.code is ErrorCode.NOT_PRIMARY else None
                self.send(a.conn, codec.enc_error(a.code, a.message, id=a.id, primary=hint))
            elif type(a) is ProposeIsr:
                asyncio.ensure_future(self._propose(a))
            elif type(a) is RegisterSubscription:
                asyncio.ensure_future(offsets.register(self, a))
        if p is not None and p.commit_ts > self.commit_ts:
            self.commit_ts = p.commit_ts
            for d in self.delivery.on_commit(p.commit_ts, time.monotonic()):
                self.send(d.conn, codec.enc_deliver(d.sid, d.topic, d.records))

    async def _propose(self, prop: ProposeIsr) -> None:
        p, coord = self.primary, self.coord
        if p is None or coord is None or coord.state is None:
            return
        st = coord.state
        new = dataclasses.replace(st, isr=prop.isr, boots=prop.boots)
        won = await coord.cas_state(new) if st.epoch == p.epoch else None
        if self.primary is not p:
            return
        if won is None:
            p.proposal_failed()
            await coord.refresh()
            return
        log.info(
            "isr of %s at epoch %d is now %s: %s",
            self.cfg.group,
            won.epoch,
            list(won.isr),
            prop.reason,
        )
        self.perform(p.isr_changed(won))

    @staticmethod
    def send(conn: Any, data: bytes) -> None:
        websockets.broadcast((conn,), data)

    # --- connections ---------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        if ws.subprotocol == REPL_SUBPROTOCOL:
            await replica.serve_follower(self, ws)
        else:
            await clients.serve(self, ws)

    def other_owner(self, topic: str) -> str | None:
        """The group that owns ``topic`` when it is not ours (None: ours, or no slot map yet)."""
        smap = self.coord.slot_map if self.coord else None
        if smap is None:
            return None
        g = smap.group_of(topic)
        return g if g != self.cfg.group else None

    def primary_url(self) -> str | None:
        coord = self.coord
        if coord is None or coord.state is None:
            return None
        if coord.state.primary == self.cfg.id and self.primary is None:
            return None  # our view still names us, but we just stepped down
        m = coord.members.get(coord.state.primary)
        return m.url if m is not None else None
